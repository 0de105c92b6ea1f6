// The registry: everything the service knows about its resource kinds, derived once from the
// drizzle schema. Routes, validation and (later) documentation all read from here, nowhere else.
import { createTableRelationsHelpers, extractTablesRelationalConfig, getTableColumns, is, Many, normalizeRelation } from 'drizzle-orm';
import { getTableConfig, type SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core';
import { createInsertSchema } from 'drizzle-zod';
import type { z } from 'zod';

/** Fields the server sets on every write; clients may echo them but never change them. */
export const SERVER_MANAGED_FIELDS = ['createdAt', 'updatedAt'] as const;

/** Paths the service itself answers; a table may not take one of these names. */
export const SERVICE_PATHS = ['', 'healthz', 'readyz', 'openapi.json', 'docs'] as const;

/** Methods that only read: all the service paths take, and all the read-only token may use. */
export const READ_METHODS = ['GET', 'HEAD', 'OPTIONS'] as const;

const withTrailingSlash = (paths: string[]) => new Set(paths.flatMap((p) => [p, `${p}/`]));
/** Health probes: open without a token, never rate-limited or shed, so an orchestrator always reaches them. */
export const PROBE_PATHS = withTrailingSlash(['/healthz', '/readyz']);
/**
 * Paths open without a token: the probes and the documentation (a browser cannot attach a bearer
 * token to a page load; it holds no data). Files under OPEN_PREFIX are the documentation's too.
 */
export const OPEN_PATHS = withTrailingSlash(['/healthz', '/readyz', '/openapi.json', '/docs', '/docs/init.js']);
export const OPEN_PREFIX = '/docs/assets/';

/** The key of an element, parsed from its path segment. */
export type Id = number | string;

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

export interface Field {
  /** The field name in JSON bodies and queries (the key in schema.ts). */
  key: string;
  column: SQLiteColumn;
  /** The primary key or a server-managed field. */
  readOnly: boolean;
}

export interface ForeignKey {
  /** The child's field holding the parent's key. */
  field: string;
  parent: Resource;
  onDelete: string;
}

export interface Resource {
  /** The SQL table name, which is also the collection's path segment. */
  name: string;
  table: SQLiteTable;
  fields: Field[];
  primaryKey: Field;
  /** Turns a path segment into a key value; undefined when it cannot name an element. */
  parseId: (segment: string) => Id | undefined;
  /** Fields a client may not set on create (the server assigns them). */
  serverAssigned: Set<string>;
  /** Zod schema of a create body, read-only fields removed; unknown fields fail. */
  createSchema: z.ZodObject;
  /** Zod schema of a full replacement (PUT, and the result of a PATCH). */
  replaceSchema: z.ZodObject;
  foreignKeys: ForeignKey[];
  /** The foreign keys of other kinds that point at this one. */
  referencedBy: { child: Resource; field: string; onDelete: string }[];
  /** Primary key and server-managed fields: never changed by a client. */
  readOnly: Set<string>;
  /** The field key of an SQL column name (for constraint errors). */
  fieldOfColumn: Map<string, string>;
}

/** A parent → children relation: `/<parent>/<id>/<name>` lists children whose `field` is <id>. */
export interface Relation {
  name: string;
  parent: Resource;
  child: Resource;
  field: string;
}

export type RouteKind = 'collection' | 'element' | 'related';

export interface Route {
  kind: RouteKind;
  /** The path template, with `{id}` for the key (OpenAPI style). */
  path: string;
  methods: readonly Method[];
  resource: Resource;
  relation?: Relation;
}

export interface Registry {
  resources: Resource[];
  relations: Relation[];
  routes: Route[];
}

/** The schema cannot be served as declared; the message says what to change. */
export class RegistryError extends Error {
  override name = 'RegistryError';
}

const METHODS: Record<RouteKind, readonly Method[]> = {
  collection: ['GET', 'HEAD', 'POST', 'OPTIONS'],
  element: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
  related: ['GET', 'HEAD', 'POST', 'OPTIONS'],
};

const PATH_SEGMENT = /^[a-z0-9][a-z0-9_-]*$/;
const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]*)$/;

function parseIntegerId(segment: string): number | undefined {
  if (!CANONICAL_INTEGER.test(segment)) return undefined;
  const value = Number(segment);
  return Number.isSafeInteger(value) ? value : undefined;
}

function parseTextId(segment: string): string | undefined {
  return segment === '' ? undefined : segment;
}

function toResource(table: SQLiteTable): Resource {
  const config = getTableConfig(table);
  const name = config.name;
  if (!PATH_SEGMENT.test(name)) {
    throw new RegistryError(`table "${name}" cannot be a path segment: use lower case letters, digits, "-" or "_"`);
  }
  if ((SERVICE_PATHS as readonly string[]).includes(name)) {
    throw new RegistryError(`table "${name}" collides with the service path /${name}; rename the table`);
  }
  const columns = getTableColumns(table) as Record<string, SQLiteColumn>;
  const keyed = Object.entries(columns).filter(([, column]) => column.primary);
  if (keyed.length !== 1 || config.primaryKeys.length > 0) {
    throw new RegistryError(`table "${name}" needs exactly one primary-key column to be served as a resource`);
  }
  const [pkKey, pkColumn] = keyed[0] as [string, SQLiteColumn];
  const serverManaged = new Set<string>(SERVER_MANAGED_FIELDS.filter((key) => key in columns));
  const readOnly = new Set([pkKey, ...serverManaged]);
  const integerKey = pkColumn.dataType === 'number';
  const serverAssigned = new Set(integerKey || pkColumn.hasDefault ? readOnly : serverManaged);

  const fields = Object.entries(columns).map(([key, column]) => ({ key, column, readOnly: readOnly.has(key) }));
  const primaryKey = fields.find((f) => f.key === pkKey) as Field;
  const insert = createInsertSchema(table) as unknown as z.ZodObject;
  const omit = (keys: Set<string>) =>
    insert.omit(Object.fromEntries([...keys].map((k) => [k, true])) as Record<string, true> & Record<number, never>).strict();

  return {
    name,
    table,
    fields,
    primaryKey,
    parseId: integerKey ? parseIntegerId : parseTextId,
    serverAssigned,
    createSchema: omit(serverAssigned),
    replaceSchema: omit(readOnly),
    foreignKeys: [],
    referencedBy: [],
    readOnly,
    fieldOfColumn: new Map(fields.map((f) => [f.column.name, f.key])),
  };
}

/** Related-path names given explicitly with drizzle `relations()`: parent's `many()` key per child column. */
function explicitRelationNames(schema: Record<string, unknown>): Map<SQLiteColumn, string> {
  const names = new Map<SQLiteColumn, string>();
  const { tables, tableNamesMap } = extractTablesRelationalConfig(schema, createTableRelationsHelpers);
  for (const config of Object.values(tables)) {
    for (const [name, relation] of Object.entries(config.relations)) {
      if (!is(relation, Many)) continue;
      try {
        const { references } = normalizeRelation(tables, tableNamesMap, relation);
        if (references.length === 1) names.set(references[0] as SQLiteColumn, name);
      } catch (error) {
        throw new RegistryError(`relation "${config.dbName}.${name}": ${(error as Error).message}`);
      }
    }
  }
  return names;
}

function toRelations(resources: Resource[], schema: Record<string, unknown>): Relation[] {
  const byTable = new Map(resources.map((r) => [r.table, r]));
  const explicit = explicitRelationNames(schema);
  const relations: Relation[] = [];
  for (const child of resources) {
    const foreignKeys = getTableConfig(child.table).foreignKeys.map((fk) => ({ fk, ref: fk.reference() }));
    for (const { fk, ref } of foreignKeys) {
      const parent = byTable.get(ref.foreignTable);
      const column = ref.columns[0] as SQLiteColumn;
      if (!parent || ref.columns.length !== 1 || ref.foreignColumns[0] !== parent.primaryKey.column) continue;
      const field = child.fieldOfColumn.get(column.name) as string;
      const onDelete = fk.onDelete ?? 'no action';
      child.foreignKeys.push({ field, parent, onDelete });
      parent.referencedBy.push({ child, field, onDelete });
      const siblings = foreignKeys.filter((other) => other.ref.foreignTable === ref.foreignTable);
      const name = explicit.get(column) ?? (siblings.length === 1 ? child.name : undefined);
      if (!name) {
        throw new RegistryError(
          `table "${child.name}" has ${siblings.length} foreign keys to "${parent.name}"; name each related path ` +
            `with drizzle relations(): many(${child.name}, { relationName }) on "${parent.name}"`,
        );
      }
      if (!PATH_SEGMENT.test(name)) throw new RegistryError(`related path "${parent.name}/{id}/${name}" is not a valid path segment`);
      relations.push({ name, parent, child, field });
    }
  }
  return relations;
}

function toRoutes(resources: Resource[], relations: Relation[]): Route[] {
  const route = (kind: RouteKind, resource: Resource, segments: string[], relation?: Relation): Route => {
    return { kind, path: `/${segments.join('/')}`, methods: METHODS[kind], resource, relation };
  };
  const routes = [
    ...resources.flatMap((r) => [route('collection', r, [r.name]), route('element', r, [r.name, '{id}'])]),
    ...relations.map((rel) => route('related', rel.child, [rel.parent.name, '{id}', rel.name], rel)),
  ];
  const seen = new Set<string>();
  for (const { path } of routes) {
    if (seen.has(path)) throw new RegistryError(`two routes would both be ${path}; give one of them another name`);
    seen.add(path);
  }
  return routes;
}

/**
 * Derives the registry from a schema module's exports (drizzle tables and optional relations).
 * @throws {RegistryError} when the schema cannot be served (name collisions, ambiguous relations)
 */
export function createRegistry(schema: Record<string, unknown>): Registry {
  const tables = Object.values(schema).filter((value): value is SQLiteTable => is(value, SQLiteTable));
  if (tables.length === 0) throw new RegistryError('the schema declares no tables');
  const resources = tables.map(toResource);
  const relations = toRelations(resources, schema);
  return { resources, relations, routes: toRoutes(resources, relations) };
}

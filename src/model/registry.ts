// The registry: everything the service knows about its resource kinds, derived once from the
// drizzle schema. Routes, validation and (later) documentation all read from here, nowhere else.
import { createTableRelationsHelpers, extractTablesRelationalConfig, getTableColumns, is, Many, normalizeRelation, One } from 'drizzle-orm';
import {
  type ForeignKey as DrizzleForeignKey,
  getTableConfig,
  getViewConfig,
  SQLiteColumn,
  SQLiteNumeric,
  SQLiteTable,
  SQLiteView,
} from 'drizzle-orm/sqlite-core';
import { createInsertSchema } from 'drizzle-zod';
import { z } from 'zod';
import { customKindOf, isInteger, keepsSeconds, wholeSecond } from '../db/columns.js';
import { isSearchDeclaration } from '../db/search.js';
import { onFirstUse } from '../first-use.js';
import { toInstant } from './instant.js';

/** Fields the server sets on every write; clients may echo them but never change them. */
export const SERVER_MANAGED_FIELDS = ['createdAt', 'updatedAt'] as const;

/** Paths the service itself answers; a table may not take one of these names. */
export const SERVICE_PATHS = ['', 'healthz', 'readyz', 'openapi.json', 'docs', '_batch', '_changes'] as const;

/** Methods that only read: all the service paths take, and all the read-only token may use. */
export const READ_METHODS = ['GET', 'HEAD', 'OPTIONS'] as const;

const withTrailingSlash = (paths: string[]) => new Set(paths.flatMap((p) => [p, `${p}/`]));
/** Health probes: open without a token, never rate-limited or shed, so an orchestrator always reaches them. */
export const PROBE_PATHS = withTrailingSlash(['/healthz', '/readyz']);
/**
 * Paths open without a token: the probes and the documentation (a browser cannot attach a bearer
 * token to a page load; it holds no data). Files under OPEN_PREFIX are the documentation's too.
 */
export const OPEN_PATHS = withTrailingSlash([
  '/healthz',
  '/readyz',
  '/openapi.json',
  '/docs',
  '/docs/init.js',
  '/docs/changes',
  '/docs/changes.js',
]);
export const OPEN_PREFIX = '/docs/assets/';

/** One value of a key (an integer or a text). */
export type KeyValue = number | string;
/** The key of an element, parsed from its path segment: one value, or one per column of a composite key. */
export type Id = KeyValue | KeyValue[];

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

/** A single-column foreign key to a served kind: to its key (a ForeignKey too), or to another unique field. */
export interface Reference {
  /** The child's field holding the value. */
  field: string;
  parent: Resource;
  /** The parent's field it names. */
  target: Field;
}

/**
 * A foreign key of several columns to a served kind (to its key or another unique set of fields): it adds no
 * related path, but a write that breaks it is a 422 naming its fields, as a Reference's is.
 */
export interface CompositeReference {
  /** The child's fields holding the values, in the foreign key's order. */
  fields: string[];
  parent: Resource;
  /** The parent's fields they name, in the same order. */
  targets: Field[];
}

/**
 * Every foreign key of a kind to a served kind, each as its fields and the parent's fields they name (a
 * single-column one as a list of one): what a refused write is checked against to name its fields.
 */
export function foreignKeysOf(resource: Resource): CompositeReference[] {
  return [
    ...resource.references.map(({ field, parent, target }) => ({ fields: [field], parent, targets: [target] })),
    ...resource.compositeReferences,
  ];
}

export interface Resource {
  /** The SQL table (or view) name, which is also the collection's path segment (percent-encoded). */
  name: string;
  /** `/<name>`, percent-encoded as a path segment. */
  path: string;
  table: SQLiteTable | SQLiteView;
  /** A view, or a table without a primary key: served read-only, as a collection only. */
  readOnlyKind: boolean;
  fields: Field[];
  /** The primary key's fields in key order: one, several (a composite key), or none. */
  key: Field[];
  /** Turns an element's path segment (as sent, percent-encoded) into its key; undefined when it cannot name an element. */
  parseId: (segment: string) => Id | undefined;
  /** The key of a row. */
  idOf: (row: Record<string, unknown>) => Id;
  /** The key's values in key order, as the database compares them. */
  keyValues: (id: Id) => KeyValue[];
  /** The element path of a row: `/<name>/<k1>,<k2>`, each part percent-encoded. */
  elementPath: (row: Record<string, unknown>) => string;
  /** Fields a client may not set on create (the server assigns them). */
  serverAssigned: Set<string>;
  /** Zod schema of a create body, read-only fields removed; unknown fields fail (built on first use, as replaceSchema). */
  createSchema: z.ZodObject;
  /** Zod schema of a full replacement (PUT, and the result of a PATCH). */
  replaceSchema: z.ZodObject;
  foreignKeys: ForeignKey[];
  /** Every foreign key to this kind (`field`: the child's fields), whether it names the key (`byKey`) or another unique field. */
  referencedBy: { child: Resource; field: string; onDelete: string; byKey: boolean }[];
  /** Every single-column foreign key of this kind to a served kind, for a 422 naming the field that names nothing. */
  references: Reference[];
  /** Every foreign key of several columns of this kind to a served kind, for the same 422 (looked at after a failure only). */
  compositeReferences: CompositeReference[];
  /** Primary key and server-managed fields: never changed by a client. */
  readOnly: Set<string>;
  /** The field key of an SQL column name (for constraint errors). */
  fieldOfColumn: Map<string, string>;
  /** The relations `expand=` may name, by name. */
  expansions: Map<string, Expansion>;
  /** The text fields `q=` searches (schema.ts's `searchable()`); empty when the kind takes no `q`. */
  searchable: Field[];
}

/**
 * A relation `expand=` may add to an element (docs/http-api.md#query-parameters-collections-and-related-lists): to-one, this kind's `field` names one
 * `target` element; to-many, the `target` elements whose `field` names this one.
 */
export interface Expansion {
  name: string;
  cardinality: 'one' | 'many';
  target: Resource;
  field: string;
}

/** A parent → children relation: `/<parent>/<id>/<name>` lists children whose `field` is <id>. */
export interface Relation {
  name: string;
  parent: Resource;
  child: Resource;
  field: string;
}

export type RouteShape = 'collection' | 'element' | 'related';

export interface Route {
  shape: RouteShape;
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

const METHODS: Record<RouteShape, readonly Method[]> = {
  collection: ['GET', 'HEAD', 'POST', 'OPTIONS'],
  element: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
  related: ['GET', 'HEAD', 'POST', 'OPTIONS'],
};

/** An integer as written canonically: `7`, not `07`, `+7` or `7.0` (keys in paths, filter values, dateText()). */
export const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]*)$/;
/**
 * The canonical whole numbers (`7`, not `07`) from 1 to `max`, as alternatives of a pattern without anchors:
 * the shorter ones, then those of max's length below it digit by digit, then max itself (a JSON Schema bounds
 * no number written as text).
 */
function positiveUpTo(max: number): string {
  const digits = String(max);
  const below = [...digits].flatMap((digit, i) => {
    const low = i === 0 ? 1 : 0;
    const high = Number(digit) - 1;
    if (high < low) return [];
    const rest = digits.length - i - 1;
    return [`${digits.slice(0, i)}${high === low ? low : `[${low}-${high}]`}${rest ? `[0-9]{${rest}}` : ''}`];
  });
  const shorter = digits.length > 1 ? [`[1-9][0-9]{0,${digits.length - 2}}`] : [];
  return [...shorter, ...below, digits].join('|');
}

/** The canonical whole numbers from 0 to `max`, as an anchored pattern. */
export const wholeNumbersUpTo = (max: number): string => `^(0|${positiveUpTo(max)})$`;

/** An integer JSON carries exactly (±(2^53 − 1)) as written canonically, as a pattern without anchors (a filter's value in OpenAPI). */
export const SAFE_INTEGER_PATTERN = `0|-?(${positiveUpTo(Number.MAX_SAFE_INTEGER)})`;
/** A decimal number as text (a NUMERIC column's value). */
export const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/**
 * The significant digits SQLite keeps of a NUMERIC value: it stores text that reads as a number as
 * an INTEGER or a REAL, keeping 15 (https://sqlite.org/datatype3.html §3.1); more would drift.
 */
export const NUMERIC_DIGITS = 15;

/** How many significant digits a decimal text has (leading and trailing zeros do not count). */
export function significantDigits(text: string): number {
  const mantissa = (text.split(/[eE]/)[0] as string).replace(/^[+-]/, '').replace('.', '');
  return mantissa.replace(/^0+/, '').replace(/0+$/, '').length;
}

/**
 * Whether a name can be served as a path segment: any text but the empty one and the dot segments,
 * which URL resolution removes (RFC 3986 §5.2.4); characters outside the unreserved set are percent-encoded.
 */
function checkSegment(name: string, what: string): void {
  if (name === '' || name === '.' || name === '..') throw new RegistryError(`${what} "${name}" cannot be a path segment; rename it`);
}

/** Decodes a path segment; undefined for a malformed escape (it then names nothing). */
function decoded(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** A number's text as an element path writes it (`String`): `2.5`, never `2.50`, `02.5` or `+2.5`. */
const isCanonicalNumber = (text: string): boolean => Number.isFinite(Number(text)) && String(Number(text)) === text;

/**
 * Parses one key value from its (decoded) text, which must be the text the element's path is written
 * with (docs/http-api.md#routes: one path per element): canonical integers for an integer column, numbers as JS
 * writes them for REAL, base64 with its padding for a BLOB. A key without a type takes a number when the
 * text is one as JS writes it, else the text: its numeric keys are reached, and a text key spelled as such
 * a number is not (SQLite tells `5` from `'5'`). A NUMERIC key is compared as a number by both engines
 * (`2.5` and `2.50` name one element), whose text each writes its own way (PostgreSQL keeps the scale).
 */
function keyParser(field: Field): (text: string) => KeyValue | undefined {
  const { column } = field;
  if (isInteger(column)) {
    return (text) => {
      if (!CANONICAL_INTEGER.test(text)) return undefined;
      const value = Number(text);
      return Number.isSafeInteger(value) ? value : undefined;
    };
  }
  if (column.dataType === 'number') return (text) => (isCanonicalNumber(text) ? Number(text) : undefined);
  const custom = customKindOf(column);
  if (custom === 'bytes') return (text) => (text !== '' && Buffer.from(text, 'base64').toString('base64') === text ? text : undefined);
  if (custom === 'untyped') return (text) => (text === '' ? undefined : isCanonicalNumber(text) ? Number(text) : text);
  return (text) => (text === '' ? undefined : text);
}

/**
 * How a kind's key travels in a path: one value as its own segment, or a composite key's values
 * in key order joined by `,` (a `,` or `%` inside a value percent-encoded), per docs/http-api.md#routes.
 */
function keyCodec(key: Field[], path: string): Pick<Resource, 'parseId' | 'idOf' | 'keyValues' | 'elementPath'> {
  const parsers = key.map(keyParser);
  const segmentOf = (value: unknown) => encodeURIComponent(String(value));
  if (key.length === 1) {
    const [field] = key as [Field];
    const parse = parsers[0] as (text: string) => KeyValue | undefined;
    return {
      parseId: (segment) => {
        const text = decoded(segment);
        return text === undefined ? undefined : parse(text);
      },
      idOf: (row) => row[field.key] as KeyValue,
      keyValues: (id) => [id as KeyValue],
      elementPath: (row) => `${path}/${segmentOf(row[field.key])}`,
    };
  }
  return {
    parseId: (segment) => {
      const parts = segment.split(',');
      if (parts.length !== key.length) return undefined;
      const id: KeyValue[] = [];
      for (let i = 0; i < parts.length; i++) {
        const text = decoded(parts[i] as string);
        const value = text === undefined ? undefined : (parsers[i] as (text: string) => KeyValue | undefined)(text);
        if (value === undefined) return undefined;
        id.push(value);
      }
      return id;
    },
    idOf: (row) => key.map((f) => row[f.key] as KeyValue),
    keyValues: (id) => id as KeyValue[],
    elementPath: (row) => `${path}/${key.map((f) => segmentOf(row[f.key])).join(',')}`,
  };
}

/** Text SQLite takes for a number in a column of numeric affinity: a well-formed integer or real literal, spaces around. */
const NUMERIC_LITERAL = /^[ \t\n\v\f\r]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[ \t\n\v\f\r]*$/;

/**
 * Whether text survives a column of numeric affinity (dateText()): text that is no number is stored as text,
 * and an integer in canonical form (`2009`) as a number that reads back as the same text; anything else that
 * reads as a number (`02134`, `1.50`, `1e3`, ` 12 `) would come back as other text.
 * @see https://sqlite.org/datatype3.html#type_affinity
 */
export function keepsNumericText(text: string): boolean {
  if (!NUMERIC_LITERAL.test(text)) return true;
  return CANONICAL_INTEGER.test(text) && Number.isSafeInteger(Number(text));
}

/** A SQLite BOOLEAN column's value: the integer it holds, or a JSON true/false as 1/0 (the integer is tried first). */
const booleanIntegerRule = () =>
  z
    .union([z.int(), z.boolean().transform(Number)], {
      error: (issue) => (issue.code === 'invalid_union' ? 'must be true or false (stored as 1 or 0), or an integer' : undefined),
    })
    .meta({ description: 'A BOOLEAN column of SQLite: served as the integer it holds (1, 0); true and false are taken as 1 and 0.' });

/** Text of a decimal a NUMERIC column keeps exactly: at most NUMERIC_DIGITS significant digits, within a double's range. */
const decimalText = () =>
  z
    .string()
    .regex(DECIMAL, 'must be a decimal number as text, e.g. "12.50"')
    // Each refinement judges decimals only: a text that is none already has its one error.
    .refine(
      (text) => !DECIMAL.test(text) || significantDigits(text) <= NUMERIC_DIGITS,
      `has more than the ${NUMERIC_DIGITS} significant digits a NUMERIC value keeps exactly`,
    )
    // An exponent past a double's range would be stored as Inf, or as 0 for a nonzero value.
    .refine(
      (text) => !DECIMAL.test(text) || (Number.isFinite(Number(text)) && (Number(text) !== 0 || significantDigits(text) === 0)),
      'is out of the range a NUMERIC value holds (about 1e-307 to 1e308)',
    );

/**
 * A JSON number a NUMERIC column keeps exactly: one whose shortest text (as JS writes it, which reads back as
 * the same double) has at most NUMERIC_DIGITS significant digits. Taken as that text, as if it had been sent so.
 */
const exactNumber = () =>
  z
    .number()
    .refine((n) => Number.isFinite(n) && significantDigits(String(n)) <= NUMERIC_DIGITS)
    .transform(String);

/** What a NUMERIC value that is neither an exact decimal text nor an exact number should have been. */
function numericRefusal(input: unknown): string {
  if (typeof input !== 'number' && typeof input !== 'string')
    return `must be a decimal number: a JSON number of at most ${NUMERIC_DIGITS} significant digits (7.5), or its text ("12.50")`;
  if (typeof input === 'number' && !Number.isFinite(input)) return 'is out of the range a NUMERIC value holds (about 1e-307 to 1e308)';
  // A number past what is kept would be stored rounded; its text is refused alike, so say what is kept.
  return `has more than the ${NUMERIC_DIGITS} significant digits a NUMERIC value keeps exactly: send the decimal as text of at most ${NUMERIC_DIGITS} significant digits, e.g. "12.50"`;
}

/**
 * A NUMERIC column's value: decimal text (as the database returns it), or a JSON number kept exactly, taken
 * as its text. The text is tried first: a number costs nothing more than before unless it is sent.
 */
const numericRule = () =>
  z
    .union([decimalText().meta({ format: 'decimal' }), exactNumber()], {
      error: (issue) => (issue.code === 'invalid_union' ? numericRefusal(issue.input) : undefined),
    })
    .meta({
      description: `An exact decimal as text, of at most ${NUMERIC_DIGITS} significant digits, about 1e-307 to 1e308 in magnitude; a JSON number of at most ${NUMERIC_DIGITS} significant digits is taken as its text (7.5 as "7.5").`,
      examples: ['12.50'],
    });

/**
 * The validation of the values drizzle-zod cannot tell from the column class alone: exact decimals
 * for NUMERIC (text, as the database returns them), base64 for BLOBs, any scalar for untyped columns,
 * integers for intKey(), text a dateText() column keeps, JSON values as sent.
 */
function valueRules(columns: Record<string, SQLiteColumn>): Record<string, () => z.ZodType> {
  const rules: Record<string, () => z.ZodType> = {};
  for (const [key, column] of Object.entries(columns)) {
    const custom = customKindOf(column);
    if (custom === 'bytes') rules[key] = () => z.base64().meta({ examples: ['aGVsbG8='] });
    else if (custom === 'untyped') rules[key] = () => z.union([z.string(), z.number()]);
    // As drizzle-zod checks an integer() column: a safe integer, which JSON carries exactly.
    else if (custom === 'integer') rules[key] = () => z.int();
    // A BOOLEAN of SQLite's (introspected): its integers, or true/false stored as 1/0.
    else if (custom === 'booleanInteger') rules[key] = booleanIntegerRule;
    // Any finite number: drizzle-zod bounds a REAL by ±(2^47 − 1), as for MySQL's, while SQLite stores any double (1e308).
    else if (column.columnType === 'SQLiteReal') rules[key] = () => z.number();
    // A timestamp kept as a number (integer({ mode: 'timestamp' | 'timestamp_ms' })) is written as the text a GET
    // shows (`2026-01-31T12:00:00.000Z`, or any instant a timestamp filter takes), not as a JS Date JSON cannot carry;
    // seconds mode keeps the whole second, on PostgreSQL too (whose column keeps milliseconds).
    else if (column.dataType === 'date')
      rules[key] = () =>
        z
          .string()
          .meta({ format: 'date-time', examples: ['2026-01-31T12:00:00.000Z'] })
          .transform((text, ctx) => {
            const instant = toInstant(text);
            if (instant) return keepsSeconds(column) ? wholeSecond(instant) : instant;
            ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time, e.g. "2026-01-31T12:00:00Z"' });
            return z.NEVER;
          });
    // Any JSON value, taken as parsed: drizzle-zod's record would copy an object member by member, and lose
    // a `__proto__` member (an ordinary name in JSON) on the way.
    else if (column.dataType === 'json')
      rules[key] = () => z.custom<unknown>((value) => value !== null && value !== undefined, 'must not be null');
    else if (custom === 'dateText')
      rules[key] = () =>
        z
          .string()
          .refine(
            keepsNumericText,
            'reads as a number, which this DATE/TIME column (numeric affinity in SQLite) would store as a number, not as this text',
          )
          .meta({
            description:
              'Stored as text as given (e.g. "2026-01-31"), but text that reads as a number other than a canonical integer ("1.50", "02134") is refused: the column would store it as a number.',
          });
    else if (is(column, SQLiteNumeric)) rules[key] = numericRule;
  }
  return rules;
}

/** The primary key's columns in key order (a composite key as its primaryKey() lists them). */
function keyColumnsOf(table: SQLiteTable, columns: Record<string, SQLiteColumn>): string[] {
  const composite = getTableConfig(table).primaryKeys[0];
  const byColumn = new Map(Object.entries(columns).map(([key, column]) => [column, key]));
  if (composite) return composite.columns.map((column) => byColumn.get(column as SQLiteColumn) as string);
  return Object.entries(columns)
    .filter(([, column]) => column.primary)
    .map(([key]) => key);
}

/**
 * Names of tables the service (restable_…: the change feed, search indexes, keys, secrets), drizzle
 * (its migrations) or SQLite keep; table names are compared without case, as SQLite does.
 */
const OWN_TABLE = /^(restable_|__drizzle_migrations$|sqlite_)/i;

/** drizzle column modes whose values JSON does not carry as the API reads and writes them, and what to declare instead. */
const UNSERVED_MODES: Readonly<Record<string, string>> = {
  SQLiteBigInt:
    "blob({ mode: 'bigint' }) holds a BigInt, which has no JSON form; declare integer() (safe integers) or numeric() (exact decimal text)",
  SQLiteNumericBigInt: "numeric({ mode: 'bigint' }) holds a BigInt, which has no JSON form; declare numeric() (exact decimal text)",
  SQLiteBlobBuffer:
    'blob() holds a Buffer, which JSON carries as neither text nor bytes; declare bytes() from src/db/columns.ts (base64 text)',
};

function toResource(source: SQLiteTable | SQLiteView): Resource {
  const view = is(source, SQLiteView);
  const name = view ? getViewConfig(source).name : getTableConfig(source).name;
  checkSegment(name, view ? 'view' : 'table');
  if ((SERVICE_PATHS as readonly string[]).includes(name)) {
    throw new RegistryError(`table "${name}" collides with the service path /${name}; rename the table`);
  }
  if (OWN_TABLE.test(name)) {
    throw new RegistryError(
      `table "${name}" has a name kept for the service's own tables (restable_…, __drizzle_migrations, sqlite_…); rename the table`,
    );
  }
  const columns = (view ? getViewConfig(source).selectedFields : getTableColumns(source)) as Record<string, SQLiteColumn>;
  for (const [key, column] of Object.entries(columns)) {
    if (!is(column, SQLiteColumn))
      throw new RegistryError(`view "${name}": field "${key}" must be a column (declare the view with its columns)`);
    const unserved = UNSERVED_MODES[column.columnType];
    if (unserved) throw new RegistryError(`${view ? 'view' : 'table'} "${name}": field "${key}" is not served: ${unserved}`);
  }
  const keyFields = view ? [] : keyColumnsOf(source, columns);
  // Server-managed: the timestamps, and a generated column (its value is the database's to compute).
  const serverManaged = new Set<string>([
    ...SERVER_MANAGED_FIELDS.filter((key) => key in columns),
    ...Object.entries(columns)
      .filter(([, column]) => column.generated?.type === 'always')
      .map(([key]) => key),
  ]);
  const readOnly = new Set([...keyFields, ...serverManaged]);
  const sole = keyFields.length === 1 ? (columns[keyFields[0] as string] as SQLiteColumn) : undefined;
  // A sole integer key is a rowid the database assigns, unless it is also a foreign key (a one-to-one
  // extension of its parent: the client names the parent); a composite key is given by the client.
  const referencing = !view && getTableConfig(source).foreignKeys.some((fk) => fk.reference().columns.includes(sole as SQLiteColumn));
  // Only an INTEGER key is SQLite's rowid (a REAL one left out would be stored as NULL); intKey() is declared INT so as not to be one.
  const assigned = sole !== undefined && !referencing && (sole.columnType === 'SQLiteInteger' || sole.hasDefault);
  const serverAssigned = new Set(assigned ? readOnly : serverManaged);

  const fields = Object.entries(columns).map(([key, column]) => ({ key, column, readOnly: readOnly.has(key) }));
  const key = keyFields.map((k) => fields.find((f) => f.key === k) as Field);
  const path = `/${encodeURIComponent(name)}`;
  /** The zod schemas of create and replace bodies, built on the kind's first write: 300 kinds pay for those written to. */
  const bodySchemas = onFirstUse(() => {
    const generated = (view ? z.object({}) : createInsertSchema(source, valueRules(columns) as never)) as unknown as z.ZodObject;
    // A key the client gives is required, whatever drizzle-zod infers (an INTEGER PRIMARY KEY would take a
    // rowid, a composite key column without NOT NULL a NULL), and a text one of a single-column key is a
    // path segment: not empty, nor `.` or `..`, which clients resolve away (RFC 3986 §5.2.4, even as %2E).
    // An element must be addressable by its key.
    const given = keyFields.filter((k) => !serverAssigned.has(k) && k in generated.shape);
    const EMPTY = 'must not be empty: the element is addressed by it';
    const DOTS = 'must not be "." or "..": the element is addressed by it';
    /** A sole key's value other than a dot segment (a part of a composite key is no segment of its own). */
    const noDots = (v: unknown) => keyFields.length > 1 || (v !== '.' && v !== '..');
    const addressable = (k: string) => {
      const schema = generated.shape[k] as z.ZodType;
      const value = schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema;
      // A BLOB key (base64 text) is not empty either.
      if (customKindOf(columns[k] as SQLiteColumn) === 'bytes') return value.refine((v) => v !== '', EMPTY);
      // Nor is an untyped one given as text, nor (alone) `.` or `..`.
      if (customKindOf(columns[k] as SQLiteColumn) === 'untyped') return value.refine((v) => v !== '', EMPTY).refine(noDots, DOTS);
      if (!(value instanceof z.ZodString)) return value;
      const segment =
        keyFields.length === 1
          ? value.refine(noDots, DOTS).meta({ not: { enum: ['.', '..'] } }) // the refinement, as the OpenAPI document can say it
          : value;
      return segment.min(1, EMPTY);
    };
    const insert = given.length ? generated.extend(Object.fromEntries(given.map((k) => [k, addressable(k)]))) : generated;
    const omit = (keys: Set<string>) =>
      insert
        .omit(
          Object.fromEntries([...keys].filter((k) => k in insert.shape).map((k) => [k, true])) as Record<string, true> &
            Record<number, never>,
        )
        .strict();
    return { create: omit(serverAssigned), replace: omit(readOnly) };
  });

  return {
    name,
    path,
    table: source,
    readOnlyKind: key.length === 0,
    fields,
    key,
    ...keyCodec(key, path),
    serverAssigned,
    get createSchema() {
      return bodySchemas().create;
    },
    get replaceSchema() {
      return bodySchemas().replace;
    },
    foreignKeys: [],
    referencedBy: [],
    references: [],
    compositeReferences: [],
    readOnly,
    fieldOfColumn: new Map(fields.map((f) => [f.column.name, f.key])),
    expansions: new Map(),
    searchable: [],
  };
}

/**
 * Relation names given explicitly with drizzle `relations()`, by the child's foreign-key column: the
 * parent's `many()` key (a related path, and a to-many expansion) and the child's `one()` key (a to-one expansion).
 */
function explicitRelationNames(schema: Record<string, unknown>): { many: Map<SQLiteColumn, string>; one: Map<SQLiteColumn, string> } {
  const many = new Map<SQLiteColumn, string>();
  const one = new Map<SQLiteColumn, string>();
  const { tables, tableNamesMap } = extractTablesRelationalConfig(schema, createTableRelationsHelpers);
  for (const config of Object.values(tables)) {
    for (const [name, relation] of Object.entries(config.relations)) {
      try {
        if (is(relation, Many)) {
          const { references } = normalizeRelation(tables, tableNamesMap, relation);
          if (references.length === 1) many.set(references[0] as SQLiteColumn, name);
        } else if (is(relation, One) && relation.config?.fields.length === 1) {
          one.set(relation.config.fields[0] as SQLiteColumn, name);
        }
      } catch (error) {
        throw new RegistryError(`relation "${config.dbName}.${name}": ${(error as Error).message}`);
      }
    }
  }
  return { many, one };
}

/** The default name of a to-one expansion: the foreign key's field without its `Id` suffix (`ownerId` → `owner`). */
const toOneName = (field: string) => /^(.+?)_?I[dD]$/.exec(field)?.[1];

/**
 * Registers the expansions of a relation on both kinds. Names that `expand=` cannot carry (with
 * `,` or `.`, its separators) are left out; a name that is also a field, or two relations of one
 * kind with one name, are start-up errors.
 */
function addExpansions(relation: Relation, toOne: string | undefined): void {
  const add = (on: Resource, expansion: Expansion) => {
    if (/[,.]/.test(expansion.name)) return;
    if (on.fields.some((f) => f.key === expansion.name)) {
      throw new RegistryError(
        `"${on.name}" has a field and a relation both named "${expansion.name}"; name the relation otherwise with drizzle relations()`,
      );
    }
    const taken = on.expansions.get(expansion.name);
    // Two related paths of one name are the route table's error (toRoutes says which path).
    if (taken?.cardinality === 'many' && expansion.cardinality === 'many') return;
    if (taken) {
      throw new RegistryError(`"${on.name}" has two relations named "${expansion.name}"; name one otherwise with drizzle relations()`);
    }
    on.expansions.set(expansion.name, expansion);
  };
  const { parent, child, field, name } = relation;
  add(parent, { name, cardinality: 'many', target: child, field });
  if (toOne) add(child, { name: toOne, cardinality: 'one', target: parent, field });
}

/** Whether a foreign key names its parent by the parent's one key column: then it is a related path. */
const namesKey = (ref: ReturnType<DrizzleForeignKey['reference']>, parent: Resource) =>
  ref.columns.length === 1 && parent.key.length === 1 && ref.foreignColumns[0] === parent.key[0]?.column;

function toRelations(resources: Resource[], schema: Record<string, unknown>): Relation[] {
  const byTable = new Map(resources.map((r) => [r.table as SQLiteTable, r]));
  const explicit = explicitRelationNames(schema);
  const relations: Relation[] = [];
  for (const child of resources) {
    if (is(child.table, SQLiteView)) continue;
    const foreignKeys = getTableConfig(child.table).foreignKeys.map((fk) => ({ fk, ref: fk.reference() }));
    for (const { fk, ref } of foreignKeys) {
      const parent = byTable.get(ref.foreignTable);
      if (!parent) continue;
      const column = ref.columns[0] as SQLiteColumn;
      const field = child.fieldOfColumn.get(column.name) as string;
      const onDelete = fk.onDelete ?? 'no action';
      const byKey = namesKey(ref, parent);
      const fields = ref.columns.map((c) => child.fieldOfColumn.get(c.name) as string);
      parent.referencedBy.push({ child, field: fields.join(', '), onDelete, byKey });
      const targets = ref.foreignColumns.map((c) => parent.fields.find((f) => f.column === c));
      if (targets.every((target) => target !== undefined)) {
        if (ref.columns.length === 1) child.references.push({ field, parent, target: targets[0] as Field });
        else child.compositeReferences.push({ fields, parent, targets: targets as Field[] });
      }
      // A related path needs a parent element named by one key column (a composite reference names no single path).
      if (!byKey) continue;
      child.foreignKeys.push({ field, parent, onDelete });
      // Only the others that are related paths too: a reference to another unique field (an e-mail) needs no name.
      const siblings = foreignKeys.filter((other) => other.ref.foreignTable === ref.foreignTable && namesKey(other.ref, parent));
      const name = explicit.many.get(column) ?? (siblings.length === 1 ? child.name : undefined);
      if (!name) {
        throw new RegistryError(
          `table "${child.name}" has ${siblings.length} foreign keys to "${parent.name}"; name each related path ` +
            `with drizzle relations(): many(${child.name}, { relationName }) on "${parent.name}"`,
        );
      }
      checkSegment(name, `related path of "${parent.name}"`);
      const relation = { name, parent, child, field };
      relations.push(relation);
      addExpansions(relation, explicit.one.get(column) ?? toOneName(field));
    }
  }
  return relations;
}

function toRoutes(resources: Resource[], relations: Relation[]): Route[] {
  const route = (shape: RouteShape, resource: Resource, path: string, relation?: Relation): Route => {
    return { shape, path, methods: resource.readOnlyKind ? READ_METHODS : METHODS[shape], resource, relation };
  };
  const routes = [
    ...resources.flatMap((r) =>
      r.readOnlyKind ? [route('collection', r, r.path)] : [route('collection', r, r.path), route('element', r, `${r.path}/{id}`)],
    ),
    ...relations.map((rel) => route('related', rel.child, `${rel.parent.path}/{id}/${encodeURIComponent(rel.name)}`, rel)),
  ];
  const seen = new Map<string, Route>();
  /** What makes a route, for the error that names both: its table, or the foreign key of a related path. */
  const origin = ({ resource, relation }: Route) =>
    relation ? `the foreign key ${relation.child.name}.${relation.field} → ${relation.parent.name}` : `the table ${resource.name}`;
  for (const route of routes) {
    const first = seen.get(route.path);
    if (first) {
      throw new RegistryError(
        `two routes would both be ${route.path}; give one of them another name (${origin(first)}, and ${origin(route)})`,
      );
    }
    seen.set(route.path, route);
  }
  return routes;
}

/**
 * Sets each kind's searchable fields from the schema's `searchable()` declarations: text fields of a
 * table whose key is its SQLite rowid (the FTS5 index is keyed by it), one declaration per table.
 */
function addSearchable(resources: Resource[], schema: Record<string, unknown>): void {
  for (const declaration of Object.values(schema).filter(isSearchDeclaration)) {
    const resource = resources.find((r) => r.table === declaration.table);
    const what = `searchable(${resource?.name ?? 'a table'}, …)`;
    if (!resource) throw new RegistryError(`${what} names a table the schema does not export`);
    if (resource.searchable.length > 0)
      throw new RegistryError(`${resource.name} is declared searchable twice; keep one searchable() for it`);
    const key = resource.key[0];
    if (resource.key.length !== 1 || key?.column.columnType !== 'SQLiteInteger') {
      throw new RegistryError(`${what}: a searchable table needs a sole integer primary key (its index is keyed by the SQLite rowid)`);
    }
    if (declaration.fields.length === 0) throw new RegistryError(`${what} names no field`);
    for (const name of declaration.fields) {
      const field = resource.fields.find((f) => f.key === name);
      if (!field) throw new RegistryError(`${what} names "${name}", which is not a field of ${resource.name}`);
      if (field.column.dataType !== 'string' || customKindOf(field.column) !== undefined || field === key) {
        throw new RegistryError(`${what}: "${name}" is not a text field; only text fields can be searched`);
      }
      if (resource.searchable.includes(field)) throw new RegistryError(`${what} names "${name}" twice`);
      resource.searchable.push(field);
    }
  }
}

/**
 * Derives the registry from a schema module's exports (drizzle tables and optional relations).
 * @throws {RegistryError} when the schema cannot be served (name collisions, ambiguous relations)
 */
export function createRegistry(schema: Record<string, unknown>): Registry {
  const sources = Object.values(schema).filter(
    (value): value is SQLiteTable | SQLiteView => is(value, SQLiteTable) || is(value, SQLiteView),
  );
  if (sources.length === 0) throw new RegistryError('the schema declares no tables');
  const resources = sources.map(toResource);
  addSearchable(resources, schema);
  const relations = toRelations(resources, schema);
  return { resources, relations, routes: toRoutes(resources, relations) };
}

// The SQLite store: raw better-sqlite3 statements per resource kind, their SQL built once with drizzle
// and read back with toSQL(), rows keyed by field (no per-row mapping but for columns that need it).
import type Database from 'better-sqlite3';
import {
  and,
  asc,
  Column,
  count,
  desc,
  eq,
  gt,
  gte,
  inArray,
  is,
  isNotNull,
  isNull,
  lt,
  lte,
  or,
  Param,
  Placeholder,
  SQL,
  sql,
} from 'drizzle-orm';
import { type SQLiteColumn, SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import { Digest, digestOf } from '../cursor.js';
import type { Db } from '../db/client.js';
import { idempotencyKeys } from '../db/internal-schema.js';
import { ApiError } from '../errors.js';
import { KEY_TTL_MS, reusedKey } from '../idempotency.js';
import type { Filter, ListQuery, SortKey } from '../query.js';
import { type Field, type Id, type Resource, SERVER_MANAGED_FIELDS } from '../resources.js';
import type { Row } from '../validation.js';
import { createGroupCommit, type GroupCommit } from './group-commit.js';
import { type KindStore, notFound, type Page, type Scope, type Store } from './store.js';

/** The better-sqlite3 error under any wrapper, if any. */
function sqliteErrorOf(error: unknown): (Error & { code: string }) | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_')) return e as Error & { code: string };
  }
  return undefined;
}

type Failure = 'unique' | 'foreignKey' | 'constraint' | 'unavailable';

/** What kind of failure a SQLite error is; RESTRICT reports itself as a trigger constraint. */
function classify(error: { code: string; message: string }): Failure | undefined {
  const { code, message } = error;
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'unique';
  if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || message.startsWith('FOREIGN KEY constraint failed')) return 'foreignKey';
  if (code.startsWith('SQLITE_CONSTRAINT')) return 'constraint';
  if (/^SQLITE_(BUSY|LOCKED|READONLY|FULL|IOERR|CANTOPEN)/.test(code)) return 'unavailable';
  return undefined;
}

/**
 * The 503 for a write the database cannot take right now (busy, disk full, read-only, I/O error),
 * or undefined for any other error. Shared by every writer (resources, idempotency keys, secrets).
 */
export function unavailableFrom(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error.code === 'unavailable' ? error : undefined;
  const sqliteError = sqliteErrorOf(error);
  if (!sqliteError || classify(sqliteError) !== 'unavailable') return undefined;
  return new ApiError('unavailable', 'The database cannot accept writes right now; try again later.', {
    headers: { 'Retry-After': '1' },
    cause: sqliteError,
  });
}

/** Field keys named in a constraint message such as "UNIQUE constraint failed: users.email". */
function constrainedFields(resource: Resource, message: string): string[] {
  const columns = message.split(':')[1]?.split(',') ?? [];
  return columns.map((c) => resource.fieldOfColumn.get(c.trim().split('.')[1] ?? '') ?? '').filter(Boolean);
}

/** A drizzle query whose SQL can be read back. */
interface Buildable {
  toSQL(): { sql: string; params: unknown[] };
}

/** A raw statement with its parameters in SQL order: each a named placeholder or a constant. */
interface Prepared {
  statement: Database.Statement;
  args: (values: Record<string, unknown>) => unknown[];
}

/** Prepares a drizzle-built query as a raw statement (read back once with toSQL()). */
function prepare(sqlite: Database.Database, query: Buildable): Prepared {
  const { sql: text, params } = query.toSQL();
  const slots = params.map((p): { name: string } | { value: unknown } => {
    if (is(p, Placeholder)) return { name: p.name };
    if (is(p, Param) && is(p.value, Placeholder)) return { name: p.value.name };
    return { value: is(p, Param) ? p.value : p };
  });
  return {
    statement: sqlite.prepare(text),
    args: (values) => slots.map((slot) => ('name' in slot ? values[slot.name] : slot.value)),
  };
}

/**
 * The row maker of a selection: builds a row object from a raw result (an array in selection
 * order), decoding only the columns that need it. It is compiled once per kind: an object literal
 * with fixed keys, which V8 builds and JSON.stringify walks faster than the objects better-sqlite3
 * makes (a first page of 100 rows: ~1.5× faster). Keys are the schema's field names, quoted.
 */
function rowMaker(fields: Field[]): (values: unknown[]) => Row {
  const decoders = fields.map(({ column }) =>
    decodes(column) ? (value: unknown) => (value === null ? null : column.mapFromDriverValue(value)) : undefined,
  );
  const members = fields.map(({ key }, i) => `${JSON.stringify(key)}: ${decoders[i] ? `d[${i}](v[${i}])` : `v[${i}]`}`);
  return new Function('d', `return (v) => ({ ${members.join(', ')} });`)(decoders);
}

/** Whether a column's values change between JS and SQLite (booleans, dates, JSON, bigints…). */
const decodes = (column: SQLiteColumn) => column.mapFromDriverValue !== Column.prototype.mapFromDriverValue;
const encodes = (column: SQLiteColumn) => column.mapToDriverValue !== Column.prototype.mapToDriverValue;

/** A value as its column stores it (null stays null). */
function encoded(column: SQLiteColumn, value: unknown): unknown {
  return value === null || value === undefined ? null : encodes(column) ? column.mapToDriverValue(value) : value;
}

/**
 * Collects the parameters of a statement being built: each value becomes a named placeholder,
 * encoded for its column (booleans, dates, JSON) as drizzle would, null left as null.
 */
class Binder {
  readonly params: Record<string, unknown> = {};
  private n = 0;
  bind(value: unknown, column: SQLiteColumn): Placeholder {
    const name = `p${this.n++}`;
    this.params[name] = encoded(column, value);
    return sql.placeholder(name);
  }
}

/** Binds a filter's values (none for `null`, each for `in`, else one): the placeholders conditionOf uses. */
function bindFilter({ field: { column }, op, value }: Filter, b: Binder): Placeholder[] {
  if (op === 'null') return [];
  if (op === 'in') return (value as unknown[]).map((v) => b.bind(v, column));
  return [b.bind(value, column)];
}

/** One filter as SQL over its placeholders. `ne` is null-safe (IS NOT); `contains`/`startsWith` are literal. */
function conditionOf({ field: { column }, op, value }: Filter, params: Placeholder[]): SQL | undefined {
  const p = params[0] as Placeholder;
  switch (op) {
    case 'eq':
      return eq(column, p);
    case 'ne':
      return sql`${column} IS NOT ${p}`;
    case 'gt':
      return gt(column, p);
    case 'gte':
      return gte(column, p);
    case 'lt':
      return lt(column, p);
    case 'lte':
      return lte(column, p);
    case 'in':
      return inArray(column, params);
    case 'contains':
      return sql`instr(${column}, ${p}) > 0`;
    case 'startsWith':
      return sql`substr(${column}, 1, length(${p})) = ${p}`;
    case 'null':
      return value ? isNull(column) : isNotNull(column);
  }
}

/** Rows strictly after the cursor's value `p` in the key's order (SQLite sorts NULL first ascending, last descending). */
function strictlyAfter({ field: { column }, descending }: SortKey, p: Placeholder | undefined): SQL | undefined {
  if (p === undefined) return descending ? sql`0` : isNotNull(column);
  return descending ? or(lt(column, p), isNull(column)) : gt(column, p);
}

/**
 * The keyset predicate "after the cursor row" for a total order, over the cursor's placeholders
 * (undefined for a null value): a row-value comparison when it can use an index (one direction, no
 * NULLs), else the expanded OR of prefixes.
 */
function afterCursor(sort: SortKey[], params: (Placeholder | undefined)[]): SQL | undefined {
  const first = sort[0] as SortKey;
  if (sort.every((k, i) => k.descending === first.descending && params[i] !== undefined)) {
    const columns = sql.join(
      sort.map((k) => sql`${k.field.column}`),
      sql`, `,
    );
    const values = sql.join(params as Placeholder[], sql`, `);
    return first.descending ? sql`(${columns}) < (${values})` : sql`(${columns}) > (${values})`;
  }
  return or(
    ...sort.map((key, i) =>
      and(
        ...sort.slice(0, i).map((k, j) => (params[j] === undefined ? isNull(k.field.column) : sql`${k.field.column} IS ${params[j]}`)),
        strictlyAfter(key, params[i]),
      ),
    ),
  );
}

/**
 * What makes two list queries the same prepared statement: fields, operators, list lengths,
 * null tests, scope, order, which cursor values are null and the limit (other values are parameters).
 */
function shapeOf(query: ListQuery, scope: Scope | undefined, counting: boolean, after = query.after): string {
  let filters = '';
  for (const { field, op, value } of query.filters) {
    filters += `${field.key}:${op}${op === 'in' ? (value as unknown[]).length : op === 'null' ? value : ''},`;
  }
  const parts = `${filters}|${scope ? `scope:${scope.field}` : ''}`;
  if (counting) return `count|${parts}`;
  let order = '';
  for (const k of query.sort) order += `${k.descending ? '-' : ''}${k.field.key},`;
  const cursor = after ? after.map((v) => (v === null ? 'n' : 'v')).join('') : '';
  return `rows|${parts}|${order}|${cursor}|${query.limit}`;
}

/** Prepared statements per query shape; bounded, since clients choose the shapes. */
const MAX_CACHED_SHAPES = 256;

/** The statement of a shape, prepared on first use (the cache is reset when it is full). */
function cached(cache: Map<string, Prepared>, shape: string, prepare: () => Prepared): Prepared {
  let statement = cache.get(shape);
  if (!statement) {
    if (cache.size >= MAX_CACHED_SHAPES) cache.clear();
    statement = prepare();
    cache.set(shape, statement);
  }
  return statement;
}

/** The selection of every field under its key: `"owner_id" as "ownerId"`. */
const selectionOf = (resource: Resource) => Object.fromEntries(resource.fields.map(({ key, column }) => [key, sql`${column}`.as(key)]));

function createKindStore(sqlite: Database.Database, db: Db, group: GroupCommit, keys: KeyStatements, resource: Resource): KindStore {
  const { table } = resource;
  const pk = resource.primaryKey.column;
  const selection = selectionOf(resource);
  const writable = resource.fields.filter((f) => !f.readOnly);
  const stampedOnCreate = resource.fields.filter((f) => (SERVER_MANAGED_FIELDS as readonly string[]).includes(f.key));
  const stampedOnUpdate = stampedOnCreate.filter((f) => f.key === 'updatedAt');
  const columnOf = new Map(resource.fields.map((f) => [f.key, f.column]));
  /** A row from the raw values of a statement that selects `selection`. */
  const toRow = rowMaker(resource.fields);
  /** A statement over `selection` that answers raw arrays (see rowMaker). */
  const selecting = (query: Buildable): Prepared => {
    const prepared = prepare(sqlite, query);
    prepared.statement.raw();
    return prepared;
  };

  /** Server-managed timestamps from one clock reading, so createdAt = updatedAt on create. */
  function stamp(row: Row, fields: Field[]): void {
    const now = new Date();
    for (const { key, column } of fields) row[key] = column.dataType === 'date' ? now : now.toISOString();
  }

  const byId = selecting(
    db
      .select(selection)
      .from(table)
      .where(eq(pk, sql.placeholder('id'))),
  ).statement;
  const deleteRow = prepare(sqlite, db.delete(table).where(eq(pk, sql.placeholder('id')))).statement;
  /** The values of `fields` as placeholders named by their keys. */
  const placeholders = (fields: Field[]) => Object.fromEntries(fields.map((f) => [f.key, sql.placeholder(f.key)]));

  /** Columns an INSERT sets: all but a key the database assigns. */
  const inserted = resource.fields.filter((f) => f !== resource.primaryKey || !resource.serverAssigned.has(f.key));
  const updated = [...writable, ...stampedOnUpdate];
  /** Columns whose default is an SQL expression: left out of an INSERT that has no value for them, so SQLite computes it. */
  const sqlDefaults = new Set(inserted.filter(({ column }) => is(column.default, SQL)).map((f) => f.key));
  /**
   * The value of a column's SQL-expression default, computed by SQLite (prepared on first use): an
   * INSERT leaves such a column out, but a PUT that leaves the field out must still set its default.
   */
  const sqlDefaultStatements = new Map<string, Database.Statement>();
  const sqlDefaultOf = ({ key, column }: Field): unknown => {
    let statement = sqlDefaultStatements.get(key);
    if (!statement) {
      const query = new SQLiteSyncDialect().sqlToQuery(column.default as SQL);
      statement = sqlite.prepare(`select ${query.sql}`).pluck();
      if (query.params.length > 0) statement.bind(...query.params);
      sqlDefaultStatements.set(key, statement);
    }
    return statement.get();
  };
  const inserts = new Map<string, Prepared>();
  /** The INSERT for the columns this row sets (one statement unless some default is an SQL expression). */
  const insertFor = (row: Row): { fields: Field[]; prepared: Prepared } => {
    const fields = sqlDefaults.size === 0 ? inserted : inserted.filter((f) => !sqlDefaults.has(f.key) || row[f.key] !== undefined);
    const shape = fields.map((f) => f.key).join(',');
    const prepared = cached(inserts, shape, () =>
      selecting(
        db
          .insert(table)
          .values(placeholders(fields) as never)
          .returning(selection as never),
      ),
    );
    return { fields, prepared };
  };
  const updateRow = selecting(
    db
      .update(table)
      .set(placeholders(updated) as never)
      .where(eq(pk, sql.placeholder('__id')))
      .returning(selection as never),
  );
  const listStatements = new Map<string, Prepared>();
  const countStatements = new Map<string, Prepared>();
  /** Prepared on first use: only the 422 after a foreign-key failure reads them. */
  let parentStatements: Map<string, Database.Statement> | undefined;

  /** Every writable field: the given value, else the column's default, else null. */
  function withDefaults(row: Row): Row {
    const full: Row = {};
    for (const { key, column } of writable) {
      // An SQL-expression default is SQLite's to compute: the field stays unset (insertFor leaves it out; update asks sqlDefaultOf).
      full[key] = key in row ? row[key] : (column.defaultFn?.() ?? (sqlDefaults.has(key) ? undefined : (column.default ?? null)));
    }
    return full;
  }

  /** The row's values for `fields`, encoded, under their keys. */
  function valuesOf(fields: Field[], row: Row): Record<string, unknown> {
    const values: Record<string, unknown> = {};
    for (const { key, column } of fields) values[key] = encoded(column, row[key]);
    return values;
  }

  /** The kinds whose foreign keys may block a delete of this kind (all but SET NULL / CASCADE ones). */
  function referrers(): string {
    const blocking = resource.referencedBy.filter((r) => !['set null', 'set default', 'cascade'].includes(r.onDelete));
    return blocking.map((r) => `${r.child.name} (${r.field})`).join(' or ') || 'other elements';
  }

  /** After SQLite refused a foreign key: the fields of `row` that name no parent, for a 422 that says which. */
  function missingParents(row: Row): { path: string; message: string }[] {
    parentStatements ??= new Map(
      resource.foreignKeys.map(({ field, parent }) => [
        field,
        prepare(
          sqlite,
          db
            .select({ one: sql`1` })
            .from(parent.table)
            .where(eq(parent.primaryKey.column, sql.placeholder('id'))),
        ).statement,
      ]),
    );
    return resource.foreignKeys
      .filter(({ field, parent }) => {
        const value = row[field];
        return value !== null && value !== undefined && !parentStatements?.get(field)?.get(encoded(parent.primaryKey.column, value));
      })
      .map(({ field, parent }) => ({ path: field, message: `names no ${parent.name} element` }));
  }

  /** The 422 of a write SQLite refused for a foreign key: the fields that point at nothing, when they can be named. */
  function referenceError(errors: { path: string; message: string }[], cause: unknown): ApiError {
    return new ApiError('unprocessable', 'A reference points at an element that does not exist.', {
      ...(errors.length > 0 && { errors }),
      cause,
    });
  }

  /** A constraint failure of a write as the client's error; anything else unchanged. */
  function toApiError(action: 'write' | 'remove', error: unknown, row?: Row): unknown {
    const sqliteError = sqliteErrorOf(error);
    switch (sqliteError && classify(sqliteError)) {
      case 'unique': {
        const fields = constrainedFields(resource, (sqliteError as Error).message);
        return new ApiError('conflict', `A ${resource.name} element with the same ${fields.join(', ') || 'key'} already exists.`, {
          errors: fields.map((path) => ({ path, message: 'is already taken' })),
          cause: error,
        });
      }
      case 'foreignKey':
        return action === 'remove'
          ? new ApiError('conflict', `This ${resource.name} element is still referenced by ${referrers()}; remove those first.`, {
              cause: error,
            })
          : referenceError(row ? missingParents(row) : [], error);
      case 'constraint':
        return new ApiError('unprocessable', `The ${resource.name} element breaks a constraint of its table.`, { cause: error });
      case 'unavailable':
        return unavailableFrom(error);
      default:
        return error;
    }
  }

  /** Runs `work` in the group's transaction, in its own savepoint, mapping constraint failures. */
  function write<T>(action: 'write' | 'remove', work: () => T, rowOf: () => Row | undefined = () => undefined): Promise<T> {
    return group.submit(() => {
      try {
        return work();
      } catch (error) {
        if (error instanceof ApiError) throw error;
        throw toApiError(action, error, rowOf());
      }
    });
  }

  /** The row with key `id`, or undefined. */
  function find(id: Id): Row | undefined {
    const values = byId.get(id) as unknown[] | undefined;
    return values && toRow(values);
  }

  /** The current row inside a write, or a 404. */
  function current(id: Id): Row {
    const row = find(id);
    if (!row) throw notFound(resource, id);
    return row;
  }

  /** Prepared on first use: only a cursor after a long text value needs them (and a WITHOUT ROWID table has no rowid). */
  let rowidStatements: { byRowid: Database.Statement; rowidByKey: Database.Statement } | undefined;
  const rowid = () =>
    (rowidStatements ??= {
      byRowid: selecting(
        db
          .select(selection)
          .from(table)
          .where(sql`rowid = ${sql.placeholder('rowid')}`),
      ).statement,
      rowidByKey: prepare(
        sqlite,
        db
          .select({ rowid: sql<number>`rowid` })
          .from(table)
          .where(eq(pk, sql.placeholder('id'))),
      ).statement.pluck(),
    });

  /**
   * The cursor's sort values, with each long text value (a Digest) read back from the cursor's
   * row; a 400 when that row is gone or the value changed, as the position is then unknown.
   */
  function positionOf({ sort, after, afterRowid }: ListQuery): unknown[] | undefined {
    if (!after?.some((value) => value instanceof Digest)) return after;
    const values = afterRowid === undefined ? undefined : (rowid().byRowid.get(afterRowid) as unknown[] | undefined);
    const row = values && toRow(values);
    return after.map((value, i) => {
      if (!(value instanceof Digest)) return value;
      const current = row?.[(sort[i] as SortKey).field.key];
      if (typeof current === 'string' && digestOf(current) === value.digest) return current;
      throw new ApiError(
        'badRequest',
        'Query parameter "cursor" continues after a row that has since changed or been deleted; start again without it.',
        {
          errors: [{ path: 'cursor', message: 'continues after a row that has since changed or been deleted' }],
        },
      );
    });
  }

  const rowidOf = (row: Row) => rowid().rowidByKey.get(encoded(pk, row[resource.primaryKey.key])) as number;

  return {
    get: find,
    exists: (id) => byId.get(id) !== undefined,
    list(query, scope): Page {
      const after = positionOf(query);
      // Values first, in one fixed order (filters, scope, cursor); the SQL is built only for a shape not yet prepared.
      const b = new Binder();
      const bound = query.filters.map((f) => bindFilter(f, b));
      const scopeColumn = scope && (columnOf.get(scope.field) as SQLiteColumn);
      const scopeParam = scope && b.bind(scope.value, scopeColumn as SQLiteColumn);
      const countParams = query.count ? { ...b.params } : undefined;
      const cursorParams = after?.map((value, i) => (value === null ? undefined : b.bind(value, (query.sort[i] as SortKey).field.column)));
      const filters = () =>
        and(...query.filters.map((f, i) => conditionOf(f, bound[i] as Placeholder[])), scopeColumn && eq(scopeColumn, scopeParam));
      const rows = cached(listStatements, shapeOf(query, scope, false, after), () =>
        selecting(
          db
            .select(selection)
            .from(table)
            .where(and(filters(), cursorParams && afterCursor(query.sort, cursorParams)))
            .orderBy(...query.sort.map(({ field, descending }) => (descending ? desc(field.column) : asc(field.column))))
            // A literal, not a parameter: SQLite (with STAT4, as better-sqlite3 builds it) re-prepares a
            // statement at every run when its LIMIT is a bound value (2.3x the cost of a 100-row page).
            .limit(sql.raw(String(query.limit + 1)) as never),
        ),
      );
      const values = rows.statement.all(rows.args(b.params)) as unknown[][];
      const more = values.length > query.limit;
      const found: Row[] = new Array(more ? query.limit : values.length);
      for (let i = 0; i < found.length; i++) found[i] = toRow(values[i] as unknown[]);
      let total: number | undefined;
      if (countParams) {
        const counter = cached(countStatements, shapeOf(query, scope, true), () => {
          const prepared = prepare(sqlite, db.select({ n: count() }).from(table).where(filters()));
          prepared.statement.pluck();
          return prepared;
        });
        total = (counter.statement.get(counter.args(countParams)) as number | undefined) ?? 0;
      }
      return { rows: found, more, total, rowidOf };
    },
    create(row, respond, once) {
      const stamped = { ...withDefaults(row), ...row };
      stamp(stamped, stampedOnCreate);
      return write(
        'write',
        () => {
          if (once) {
            const stored = keys.find(once.key);
            if (stored) {
              if (stored.fingerprint !== once.fingerprint) throw reusedKey();
              return { response: { status: stored.status, headers: JSON.parse(stored.headers), body: stored.body }, replayed: true };
            }
          }
          const { fields, prepared } = insertFor(stamped);
          const response = respond(toRow(prepared.statement.get(prepared.args(valuesOf(fields, stamped))) as unknown[]));
          if (once) keys.save(once, response);
          return { response, replayed: false };
        },
        () => stamped,
      );
    },
    update(id, change) {
      let next: Row | undefined;
      return write(
        'write',
        () => {
          next = withDefaults(change(current(id)));
          for (const field of writable)
            if (next[field.key] === undefined && sqlDefaults.has(field.key)) next[field.key] = sqlDefaultOf(field);
          stamp(next, stampedOnUpdate);
          const values = valuesOf(updated, next);
          values.__id = id;
          return toRow(updateRow.statement.get(updateRow.args(values)) as unknown[]);
        },
        () => next,
      );
    },
    remove(id, check) {
      return write('remove', () => {
        check(current(id));
        deleteRow.run(id);
      });
    },
  };
}

/** The stored answers to Idempotency-Keys, read and written inside a write's savepoint. */
interface KeyStatements {
  find(key: string): { fingerprint: string; status: number; headers: string; body: string } | undefined;
  save(once: { key: string; fingerprint: string }, response: { status: number; headers: Record<string, string>; body: string }): void;
  purgeExpired(batch: number): number;
}

function createKeyStatements(sqlite: Database.Database, db: Db, now: () => number): KeyStatements {
  let statements: ReturnType<typeof prepareKeyStatements> | undefined;
  /** Prepared on first use: a database without the service's own tables serves every request but these. */
  const prepared = () => (statements ??= prepareKeyStatements(sqlite, db));
  return {
    find(key) {
      const { find } = prepared();
      return find.statement.get(find.args({ key, since: now() - KEY_TTL_MS })) as ReturnType<KeyStatements['find']>;
    },
    save({ key, fingerprint }, { status, headers, body }) {
      const { save } = prepared();
      save.statement.run(save.args({ key, fingerprint, status, headers: JSON.stringify(headers), body, createdAt: now() }));
    },
    purgeExpired(batch) {
      const { purge } = prepared();
      return purge.statement.run(purge.args({ before: now() - KEY_TTL_MS, batch })).changes;
    },
  };
}

function prepareKeyStatements(sqlite: Database.Database, db: Db) {
  const t = idempotencyKeys;
  const find = prepare(
    sqlite,
    db
      .select({ fingerprint: t.fingerprint, status: t.status, headers: t.headers, body: t.body })
      .from(t)
      .where(and(eq(t.key, sql.placeholder('key')), gt(t.createdAt, sql.placeholder('since')))),
  );
  const row = {
    fingerprint: sql.placeholder('fingerprint'),
    status: sql.placeholder('status'),
    headers: sql.placeholder('headers'),
    body: sql.placeholder('body'),
    createdAt: sql.placeholder('createdAt'),
  };
  const save = prepare(
    sqlite,
    db
      .insert(t)
      .values({ key: sql.placeholder('key'), ...row } as never)
      .onConflictDoUpdate({ target: t.key, set: row as never }),
  );
  const purge = prepare(
    sqlite,
    db.delete(t).where(
      inArray(
        t.key,
        db
          .select({ key: t.key })
          .from(t)
          .where(lte(t.createdAt, sql.placeholder('before')))
          .limit(sql.placeholder('batch')),
      ),
    ),
  );
  return { find, save, purge };
}

/** The most writes one group commit holds. */
const MAX_GROUP = 128;

/** The SQLite store over one open connection: a kind store per resource, one group commit for all writes. */
export function createSqliteStore(sqlite: Database.Database, db: Db, resources: Resource[], now: () => number = Date.now): Store {
  const group = createGroupCommit(sqlite, { maxGroup: MAX_GROUP, unavailable: unavailableFrom });
  const keys = createKeyStatements(sqlite, db, now);
  const kinds = new Map(resources.map((r) => [r, createKindStore(sqlite, db, group, keys, r)]));
  return {
    of: (resource) => kinds.get(resource) as KindStore,
    purgeExpiredKeys: (batch) => keys.purgeExpired(batch),
    flush: group.flush,
  };
}

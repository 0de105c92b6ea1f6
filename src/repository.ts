// Data access for one resource kind: list / get / create / replace / patch / remove over drizzle.
// It maps SQLite's constraint errors to ApiErrors (once, here) and knows nothing of HTTP.
import { and, asc, count, desc, eq, gt, gte, inArray, is, isNotNull, isNull, lt, lte, or, SQL, sql } from 'drizzle-orm';
import type { SQLiteColumn } from 'drizzle-orm/sqlite-core';
import { Digest, digestOf } from './cursor.js';
import type { Db } from './db/client.js';
import { ApiError } from './errors.js';
import type { Filter, ListQuery, SortKey } from './query.js';
import { type Field, type Resource, SERVER_MANAGED_FIELDS } from './resources.js';
import { type Row, toPatchedRow, toReplacementRow } from './validation.js';

export type Id = number | string;

/** Rows whose `field` equals `value`: the children of a related path. */
export interface Scope {
  field: string;
  value: unknown;
}

export interface Page {
  rows: Row[];
  /** True when rows follow the last one of this page. */
  more: boolean;
  /** Rows matching the filters on all pages, when the query asked for a count. */
  total?: number;
  /** The rowid of one of `rows` (for a cursor that cannot carry a long sort value). */
  rowidOf: (row: Row) => number;
}

/** Runs against the current row inside the write transaction; throws to stop the write (e.g. a 412). */
export type Check = (current: Row) => void;

export interface Repository {
  list(query: ListQuery, scope?: Scope): Page;
  get(id: Id): Row | undefined;
  create(row: Row): Row;
  replace(id: Id, body: unknown, check?: Check): Row;
  patch(id: Id, patch: unknown, check?: Check): Row;
  remove(id: Id, check?: Check): void;
}

/** The better-sqlite3 error under drizzle's DrizzleQueryError wrapper, if any. */
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
 * or undefined for any other error. Shared by every writer (resources, idempotency keys).
 */
export function unavailableFrom(error: unknown): ApiError | undefined {
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

/**
 * Collects the parameters of a statement being built: each value becomes a named placeholder,
 * encoded for its column (booleans, dates, JSON) the way drizzle would, null left as null.
 */
class Binder {
  readonly params: Record<string, unknown> = {};
  private n = 0;
  bind(value: unknown, column: SQLiteColumn): SQL.Aliased | ReturnType<typeof sql.placeholder> {
    const name = `p${this.n++}`;
    this.params[name] = value === null ? null : column.mapToDriverValue(value);
    return sql.placeholder(name);
  }
}

/** One filter as SQL over placeholders. `ne` is null-safe (IS NOT); `contains`/`startsWith` are literal. */
function toCondition({ field: { column }, op, value }: Filter, b: Binder): SQL | undefined {
  switch (op) {
    case 'eq':
      return eq(column, b.bind(value, column));
    case 'ne':
      return sql`${column} IS NOT ${b.bind(value, column)}`;
    case 'gt':
      return gt(column, b.bind(value, column));
    case 'gte':
      return gte(column, b.bind(value, column));
    case 'lt':
      return lt(column, b.bind(value, column));
    case 'lte':
      return lte(column, b.bind(value, column));
    case 'in':
      return inArray(
        column,
        (value as unknown[]).map((v) => b.bind(v, column)),
      );
    case 'contains':
      return sql`instr(${column}, ${b.bind(value, column)}) > 0`;
    case 'startsWith': {
      const prefix = b.bind(value, column);
      return sql`substr(${column}, 1, length(${prefix})) = ${prefix}`;
    }
    case 'null':
      return value ? isNull(column) : isNotNull(column);
  }
}

/** Rows strictly after `value` in the key's order (SQLite sorts NULL first ascending, last descending). */
function strictlyAfter({ field: { column }, descending }: SortKey, value: unknown, b: Binder): SQL | undefined {
  if (value === null) return descending ? sql`0` : isNotNull(column);
  const bound = b.bind(value, column);
  return descending ? or(lt(column, bound), isNull(column)) : gt(column, bound);
}

/**
 * The keyset predicate "after the cursor row" for a total order: a row-value comparison when it
 * can use an index (one direction, no NULLs), else the expanded OR of prefixes.
 */
function afterCursor(sort: SortKey[], values: unknown[], b: Binder): SQL | undefined {
  const first = sort[0] as SortKey;
  if (sort.every((k, i) => k.descending === first.descending && values[i] !== null)) {
    const columns = sql.join(
      sort.map((k) => sql`${k.field.column}`),
      sql`, `,
    );
    const params = sql.join(
      sort.map((k, i) => b.bind(values[i], k.field.column)),
      sql`, `,
    );
    return first.descending ? sql`(${columns}) < (${params})` : sql`(${columns}) > (${params})`;
  }
  return or(
    ...sort.map((key, i) =>
      and(
        ...sort.slice(0, i).map((k, j) => sql`${k.field.column} IS ${b.bind(values[j], k.field.column)}`),
        strictlyAfter(key, values[i], b),
      ),
    ),
  );
}

/**
 * What makes two list queries the same prepared statement: fields, operators, list lengths,
 * null tests, scope, order and which cursor values are null (values themselves are parameters).
 */
function shapeOf(query: ListQuery, scope: Scope | undefined, counting: boolean, after = query.after): string {
  const filters = query.filters.map(
    ({ field, op, value }) => `${field.key}:${op}${op === 'in' ? (value as unknown[]).length : op === 'null' ? value : ''}`,
  );
  const parts = [filters.join(','), scope ? `scope:${scope.field}` : ''];
  if (counting) return `count|${parts.join('|')}`;
  const order = query.sort.map((k) => `${k.descending ? '-' : ''}${k.field.key}`).join(',');
  const cursor = after ? after.map((v) => (v === null ? 'n' : 'v')).join('') : '';
  return `rows|${parts.join('|')}|${order}|${cursor}`;
}

/** Prepared statements per query shape; bounded, since clients choose the shapes. */
const MAX_CACHED_SHAPES = 256;

export function createRepository(db: Db, resource: Resource): Repository {
  const { table } = resource;
  const pk = resource.primaryKey.column;
  const writable = resource.fields.filter((f) => !f.readOnly);
  const stampedOnCreate = resource.fields.filter((f) => (SERVER_MANAGED_FIELDS as readonly string[]).includes(f.key));
  const stampedOnUpdate = stampedOnCreate.filter((f) => f.key === 'updatedAt');

  /** Server-managed timestamps from one clock reading, so createdAt = updatedAt on create. */
  function stamps(fields: Field[]): Row {
    const now = new Date();
    return Object.fromEntries(fields.map(({ key, column }) => [key, column.dataType === 'date' ? now : now.toISOString()]));
  }

  const byId = db
    .select()
    .from(table)
    .where(eq(pk, sql.placeholder('id')))
    .prepare();

  /** The values of `fields` as placeholders named by their keys (encoded by `encode`). */
  const placeholders = (fields: Field[]) => Object.fromEntries(fields.map((f) => [f.key, sql.placeholder(f.key)]));
  const encode = (fields: Field[], row: Row) =>
    Object.fromEntries(
      fields.map(({ key, column }) => [key, row[key] === null || row[key] === undefined ? null : column.mapToDriverValue(row[key])]),
    );

  /** Columns an INSERT sets: all but a key the database assigns. */
  const inserted = resource.fields.filter((f) => f !== resource.primaryKey || !resource.serverAssigned.has(f.key));
  const updated = [...writable, ...stampedOnUpdate];
  /** A prepared INSERT needs every default computable here; an SQL-expression default is left to SQLite. */
  const sqlDefault = writable.some(({ column }) => is(column.default, SQL));
  const insertRow = db.insert(table).values(placeholders(inserted)).returning().prepare();
  const updateRow = db
    .update(table)
    .set(placeholders(updated))
    .where(eq(pk, sql.placeholder('__id')))
    .returning()
    .prepare();
  const deleteRow = db
    .delete(table)
    .where(eq(pk, sql.placeholder('id')))
    .prepare();
  const parentExists = new Map(
    resource.foreignKeys.map(({ field, parent }) => [
      field,
      db
        .select({ one: sql`1` })
        .from(parent.table)
        .where(eq(parent.primaryKey.column, sql.placeholder('id')))
        .prepare(),
    ]),
  );
  const listStatements = new Map<string, { all: (params: Record<string, unknown>) => Row[] }>();
  const countStatements = new Map<string, { get: (params: Record<string, unknown>) => { n: number } | undefined }>();

  /** The statement of a shape, prepared on first use (the cache is reset when it is full). */
  function cached<T>(cache: Map<string, T>, shape: string, prepare: () => T): T {
    let statement = cache.get(shape);
    if (!statement) {
      if (cache.size >= MAX_CACHED_SHAPES) cache.clear();
      statement = prepare();
      cache.set(shape, statement);
    }
    return statement;
  }

  /** Runs `work` in an IMMEDIATE transaction and maps constraint failures to client errors. */
  function write<T>(action: 'write' | 'remove', work: () => T): T {
    try {
      return db.transaction(work, { behavior: 'immediate' });
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw toApiError(action, error);
    }
  }

  function toApiError(action: 'write' | 'remove', error: unknown): unknown {
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
          : new ApiError('unprocessable', 'A reference points at an element that does not exist.', { cause: error });
      case 'constraint':
        return new ApiError('unprocessable', `The ${resource.name} element breaks a constraint of its table.`, { cause: error });
      case 'unavailable':
        return unavailableFrom(error);
      default:
        return error;
    }
  }

  /** The kinds whose foreign keys may block a delete of this kind (all but SET NULL / CASCADE ones). */
  function referrers(): string {
    const blocking = resource.referencedBy.filter((r) => !['set null', 'set default', 'cascade'].includes(r.onDelete));
    return blocking.map((r) => `${r.child.name} (${r.field})`).join(' or ') || 'other elements';
  }

  /** Names each foreign key of `row` that points at no parent (a clearer 422 than SQLite's). */
  function checkReferences(row: Row): void {
    const errors = resource.foreignKeys
      .filter(({ field, parent }) => {
        const value = row[field];
        if (value === null || value === undefined) return false;
        return !parentExists.get(field)?.get({ id: parent.primaryKey.column.mapToDriverValue(value) });
      })
      .map(({ field, parent }) => ({ path: field, message: `names no ${parent.name} element` }));
    if (errors.length > 0) throw new ApiError('unprocessable', 'A reference points at an element that does not exist.', { errors });
  }

  /** Every writable field: the given value, else the column's default, else null. */
  function withDefaults(row: Row): Record<string, unknown> {
    const full: Record<string, unknown> = {};
    for (const { key, column } of writable) {
      full[key] = key in row ? row[key] : (column.defaultFn?.() ?? column.default ?? null);
    }
    return full;
  }

  /** The current row, checked, inside a write transaction; 404 when it is gone. */
  function current(id: Id, check?: Check): Row {
    const row = byId.get({ id });
    if (!row) throw notFound(resource, id);
    check?.(row);
    return row;
  }

  function update(id: Id, toRow: (current: Row) => Row, check?: Check): Row {
    return write('write', () => {
      const row = withDefaults(toRow(current(id, check)));
      checkReferences(row);
      return updateRow.get({ ...encode(updated, { ...row, ...stamps(stampedOnUpdate) }), __id: id }) as Row;
    });
  }

  /** Prepared on first use: only a cursor after a long text value needs them (and a WITHOUT ROWID table has no rowid). */
  let rowidQueries: ReturnType<typeof prepareRowidQueries> | undefined;
  function prepareRowidQueries() {
    return {
      byRowid: db
        .select()
        .from(table)
        .where(sql`rowid = ${sql.placeholder('rowid')}`)
        .prepare(),
      rowidByKey: db
        .select({ rowid: sql<number>`rowid` })
        .from(table)
        .where(eq(pk, sql.placeholder('id')))
        .prepare(),
    };
  }
  const rowid = () => (rowidQueries ??= prepareRowidQueries());

  /**
   * The cursor's sort values, with each long text value (a Digest) read back from the cursor's
   * row; a 400 when that row is gone or the value changed, as the position is then unknown.
   */
  function positionOf({ sort, after, afterRowid }: ListQuery): unknown[] | undefined {
    if (!after?.some((value) => value instanceof Digest)) return after;
    const row = afterRowid === undefined ? undefined : rowid().byRowid.get({ rowid: afterRowid });
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

  return {
    list(query, scope) {
      const after = positionOf(query);
      const b = new Binder();
      const column = (key: string) => resource.fields.find((f) => f.key === key)?.column as SQLiteColumn;
      const filters = and(
        ...query.filters.map((f) => toCondition(f, b)),
        scope && eq(column(scope.field), b.bind(scope.value, column(scope.field))),
      );
      const filterParams = { ...b.params };
      const position = after && afterCursor(query.sort, after, b);
      const order = query.sort.map(({ field, descending }) => (descending ? desc(field.column) : asc(field.column)));
      const rows = cached(listStatements, shapeOf(query, scope, false, after), () =>
        db
          .select()
          .from(table)
          .where(and(filters, position))
          .orderBy(...order)
          .limit(sql.placeholder('limit'))
          .prepare(),
      ).all({ ...b.params, limit: query.limit + 1 });
      const total = query.count
        ? (cached(countStatements, shapeOf(query, scope, true), () => db.select({ n: count() }).from(table).where(filters).prepare()).get(
            filterParams,
          )?.n ?? 0)
        : undefined;
      const rowidOf = (row: Row) =>
        (rowid().rowidByKey.get({ id: pk.mapToDriverValue(row[resource.primaryKey.key]) }) as { rowid: number }).rowid;
      return { rows: rows.slice(0, query.limit), more: rows.length > query.limit, total, rowidOf };
    },
    get: (id) => byId.get({ id }),
    create(row) {
      return write('write', () => {
        checkReferences(row);
        const stamped = { ...row, ...stamps(stampedOnCreate) };
        if (sqlDefault) return db.insert(table).values(stamped).returning().get() as Row;
        return insertRow.get(encode(inserted, { ...stamped, ...withDefaults(row) })) as Row;
      });
    },
    replace: (id, body, check) => update(id, (row) => toReplacementRow(resource, body, row), check),
    patch: (id, patch, check) => update(id, (row) => toPatchedRow(resource, patch, row), check),
    remove(id, check) {
      write('remove', () => {
        current(id, check);
        deleteRow.run({ id });
      });
    },
  };
}

/** The 404 for an id that names no element of `resource`. */
export function notFound(resource: Resource, id: unknown): ApiError {
  return new ApiError('notFound', `There is no ${resource.name} element with id ${JSON.stringify(id)}.`);
}

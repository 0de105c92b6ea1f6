// What every SQL store shares: queries built once with drizzle and read back with toSQL(), rows made
// from raw arrays, and the list language of docs/http-api.md#query-parameters-collections-and-related-lists as SQL (filters, keyset, order) per dialect.
import { and, Column, eq, gt, gte, inArray, is, isNotNull, isNull, lt, lte, or, Param, Placeholder, SQL, sql } from 'drizzle-orm';
import { keepsSeconds, wholeSecond } from '../db/columns.js';
import { ApiError } from '../errors.js';
import { type Field, type Id, type Resource, SERVER_MANAGED_FIELDS } from '../model/registry.js';
import { Digest, digestOf } from '../request/cursor.js';
import type { Filter, ListQuery, SortKey } from '../request/list-query.js';
import type { Row } from '../request/validation.js';
import { type MaybePromise, type Page, type Scope, then } from './store.js';

/** A drizzle query whose SQL can be read back. */
export interface Buildable {
  toSQL(): { sql: string; params: unknown[] };
}

/** A query's SQL and its parameters in SQL order, each read from named values or a constant. */
export interface Statement {
  text: string;
  args: (values: Record<string, unknown>) => unknown[];
}

/** Reads a drizzle-built query back once: its SQL, and where each parameter comes from. */
export function toStatement(query: Buildable): Statement {
  const { sql: text, params } = query.toSQL();
  const slots = params.map((p): { name: string } | { value: unknown } => {
    if (is(p, Placeholder)) return { name: p.name };
    if (is(p, Param) && is(p.value, Placeholder)) return { name: p.value.name };
    return { value: is(p, Param) ? p.value : p };
  });
  return { text, args: (values) => slots.map((slot) => ('name' in slot ? values[slot.name] : slot.value)) };
}

/** Whether a column's values change between JS and the driver (booleans, dates, JSON, bigints…). */
const decodes = (column: Column) => column.mapFromDriverValue !== Column.prototype.mapFromDriverValue;
export const encodes = (column: Column) => column.mapToDriverValue !== Column.prototype.mapToDriverValue;

/** A value as its column stores it (null stays null). */
export function encoded(column: Column, value: unknown): unknown {
  return value === null || value === undefined ? null : encodes(column) ? column.mapToDriverValue(value) : value;
}

/**
 * The row maker of a selection: builds a row object from a raw result (an array in selection
 * order), decoding only the columns that need it. It is compiled once per kind: an object literal
 * with fixed keys, which V8 builds and JSON.stringify walks faster than generic row objects
 * (a first page of 100 rows: ~1.5× faster). Keys are the schema's field names, quoted.
 */
export function rowMaker(fields: { key: string; column: Column }[]): (values: unknown[]) => Row {
  const decoders = fields.map(({ column }) =>
    decodes(column) ? (value: unknown) => (value === null ? null : column.mapFromDriverValue(value)) : undefined,
  );
  const members = fields.map(({ key }, i) => `${JSON.stringify(key)}: ${decoders[i] ? `d[${i}](v[${i}])` : `v[${i}]`}`);
  return new Function('d', `return (v) => ({ ${members.join(', ')} });`)(decoders);
}

/** The selection of every field under its key: `"owner_id" as "ownerId"`. */
export function selectionOf(fields: { key: string; column: Column }[]): Record<string, SQL.Aliased> {
  return Object.fromEntries(fields.map(({ key, column }) => [key, sql`${column}`.as(key)]));
}

/**
 * How a backend writes what SQLite and PostgreSQL spell differently, so that a list means the same
 * on both: the same operators, NULLs sorted first ascending and last descending, text compared by
 * code point (SQLite's binary collation).
 */
export interface ListDialect {
  /** The backend's column of a field. */
  column(field: Field): Column;
  /** The field as compared for equality with a value (its column, unless the column would convert the value). */
  compared(field: Field): SQL;
  /** The field as text, for `contains` and `startsWith` (a numeric column is text in SQLite, not in PostgreSQL). */
  text(field: Field): SQL;
  /** `text` holds `p` literally (no pattern characters). */
  contains(text: SQL, p: Placeholder): SQL;
  /** `text` begins with `p` literally. */
  startsWith(text: SQL, p: Placeholder): SQL;
  /** The column as it is compared and sorted (a text column in binary order). */
  ordered(field: Field): SQL;
  /** ORDER BY terms for one key. */
  orderBy(key: SortKey): SQL;
  /** `column` is one of the list bound to `p` (one statement, whatever the list's length). */
  among(column: Column, p: Placeholder): SQL;
  /** The value to bind to `among`'s placeholder for `values`. */
  amongValue(values: unknown[]): unknown;
}

/**
 * Collects the parameters of a statement being built: each value becomes a named placeholder,
 * encoded for its column as drizzle would, null left as null.
 */
export class Binder {
  readonly params: Record<string, unknown> = {};
  private n = 0;
  /**
   * A placeholder for `value`, encoded for `column` (as it is without one). An instant compared with a
   * column kept in whole seconds is bound exactly (seconds with a fraction), not cut to its second as a
   * write is: `at[lt]=…:21.500Z` keeps a row at `…:21Z`, `at=…:21.400Z` does not find it.
   */
  bind(value: unknown, column?: Column): Placeholder {
    const name = `p${this.n++}`;
    if (!column) this.params[name] = value;
    else this.params[name] = value instanceof Date && keepsSeconds(column) ? value.getTime() / 1000 : encoded(column, value);
    return sql.placeholder(name);
  }
}

/**
 * How a store searches one kind (docs/search.md), over the placeholder of `q`'s words in the
 * engine's query syntax: which rows match, and how well (the relevance order, best first).
 */
export interface SearchSql {
  /** `q`'s words as the bound value (every word literal: quoted, never syntax). */
  value(words: readonly string[]): string;
  match(p: Placeholder): SQL;
  rank(p: Placeholder): SQL;
  /** A higher rank is a better match (PostgreSQL's ts_rank), or a lower one (FTS5's bm25). */
  higherIsBetter: boolean;
  /**
   * The kind's sole key as the index orders its matches, when it does (FTS5's rowid): ordering and
   * paging by it lets the index hand back a page's matches in order and stop, instead of every
   * match being fetched and sorted.
   */
  key?: SQL;
}

/** One term of a list's order, as the keyset predicate compares it. */
interface OrderTerm {
  /** The value as ordered (text in binary order). */
  ordered: SQL;
  /** The value as tested for equality and NULL. */
  value: SQL | Column;
  notNull: boolean;
  descending: boolean;
  /** Its ORDER BY term. */
  orderBy: SQL;
}

const fieldTerm = (d: ListDialect, key: SortKey): OrderTerm => {
  const column = d.column(key.field);
  return { ordered: d.ordered(key.field), value: column, notNull: column.notNull, descending: key.descending, orderBy: d.orderBy(key) };
};

/** A term that is never NULL, ordered as it is. */
const plainTerm = (value: SQL, descending: boolean): OrderTerm => ({
  ordered: value,
  value,
  notNull: true,
  descending,
  orderBy: sql`${value} ${sql.raw(descending ? 'DESC' : 'ASC')}`,
});

/** One filter as SQL over its placeholders. `ne` is null-safe; `contains`/`startsWith` are literal. */
function conditionOf(d: ListDialect, { field, op, value }: Filter, params: Placeholder[]): SQL | undefined {
  const p = params[0] as Placeholder;
  const column = d.column(field);
  const equal = d.compared(field);
  const compared = d.ordered(field);
  switch (op) {
    case 'eq':
      return eq(equal, p);
    case 'ne':
      return sql`${equal} IS DISTINCT FROM ${p}`; // null-safe (SQLite ≥ 3.39 and PostgreSQL spell it alike)
    case 'gt':
      return gt(compared, p);
    case 'gte':
      return gte(compared, p);
    case 'lt':
      return lt(compared, p);
    case 'lte':
      return lte(compared, p);
    case 'in':
      return inArray(equal, params);
    case 'contains':
      return d.contains(d.text(field), p);
    case 'startsWith':
      return d.startsWith(d.text(field), p);
    case 'null':
      return value ? isNull(column) : isNotNull(column);
  }
}

/** Rows strictly after the cursor's value `p` in the term's order (NULL first ascending, last descending). */
function strictlyAfter({ ordered, value, notNull, descending }: OrderTerm, p: Placeholder | undefined): SQL | undefined {
  if (p === undefined) return descending ? sql`1 = 0` : isNotNull(value);
  if (!descending) return gt(ordered, p);
  return notNull ? lt(ordered, p) : or(lt(ordered, p), isNull(value));
}

/**
 * The keyset predicate "after the cursor row" for a total order, over the cursor's placeholders
 * (undefined for a null value): a row-value comparison when it can use an index (one direction, no
 * NULLs in the cursor nor, descending, in the columns), else the expanded OR of prefixes.
 */
function afterCursor(terms: OrderTerm[], params: (Placeholder | undefined)[]): SQL | undefined {
  const first = terms[0] as OrderTerm;
  // Descending, a NULL sorts after every value but a row-value comparison with it is NULL: only keys
  // that cannot hold NULL may take the shortcut then (ascending, NULLs come first and are passed already).
  const shortcut = terms.every((t, i) => t.descending === first.descending && params[i] !== undefined && (!t.descending || t.notNull));
  if (shortcut) {
    const columns = sql.join(
      terms.map((t) => t.ordered),
      sql`, `,
    );
    const values = sql.join(params as Placeholder[], sql`, `);
    return first.descending ? sql`(${columns}) < (${values})` : sql`(${columns}) > (${values})`;
  }
  return or(
    ...terms.map((term, i) =>
      and(
        ...terms.slice(0, i).map((t, j) => (params[j] === undefined ? isNull(t.value) : sql`${t.value} IS NOT DISTINCT FROM ${params[j]}`)),
        strictlyAfter(term, params[i]),
      ),
    ),
  );
}

/**
 * What makes two list queries the same prepared statement: fields, operators, list lengths,
 * null tests, scope, order, which cursor values are null and the limit (other values are parameters).
 */
function shapeOf(query: ListQuery, scope: Scope | undefined, counting: boolean, after: unknown[] | undefined): string {
  let filters = '';
  for (const { field, op, value } of query.filters) {
    filters += `${field.key}:${op}${op === 'in' ? (value as unknown[]).length : op === 'null' ? value : ''},`;
  }
  // A field may reference two kinds (two related paths): the parent checked is part of the shape.
  const parts = `${filters}|${scope ? `scope:${scope.field}${scope.parent ? `^${scope.parent.name}` : ''}` : ''}|${query.search ? 'q' : ''}`;
  if (counting) return `count|${parts}`;
  let order = query.relevance ? 'relevance,' : '';
  for (const k of query.sort) order += `${k.descending ? '-' : ''}${k.field.key},`;
  const cursor = after ? after.map((v) => (v === null ? 'n' : 'v')).join('') : query.offset !== undefined ? 'offset' : '';
  return `rows|${parts}|${order}|${cursor}|${query.limit}`;
}

/** Prepared statements per query shape; bounded, since clients choose the shapes. */
const MAX_CACHED_SHAPES = 256;

/** The statement of a shape, prepared on first use (the cache is reset when it is full). */
export function cached<T>(cache: Map<string, T>, shape: string, prepare: () => T): T {
  let statement = cache.get(shape);
  if (!statement) {
    if (cache.size >= MAX_CACHED_SHAPES) cache.clear();
    statement = prepare();
    cache.set(shape, statement);
  }
  return statement;
}

/** A list query bound to values: its shapes and parameters, and the WHERE / ORDER BY / LIMIT to build on a miss. */
export interface ListPlan {
  shape: string;
  params: Record<string, unknown>;
  where: () => SQL | undefined;
  orderBy: () => SQL[];
  /** A literal, not a parameter: SQLite (with STAT4, as better-sqlite3 builds it) re-prepares a
   * statement at every run when its LIMIT is a bound value (2.3× the cost of a 100-row page). */
  limit: SQL;
  /** The position of the page's first row, bound as `offset` (a kind without a key pages by position). */
  offset?: Placeholder;
  /** The count's shape, parameters and WHERE, when the query asks for a count. */
  count?: { shape: string; params: Record<string, unknown>; where: () => SQL | undefined };
  /** By relevance: the rank to select after the fields (the next cursor carries the last row's). */
  rank?: () => SQL;
  /** The query has `q`: the store lists from the kind joined to its search index, if it keeps one apart. */
  searching: boolean;
}

/**
 * The element of `parent` whose key is `p` exists. Its table and key column by their SQL names, which
 * are the same on every backend; inside the subquery they name the parent even when it is the listed kind.
 */
const parentExists = (parent: Resource, p: Placeholder): SQL =>
  sql`exists (select 1 from ${sql.identifier(parent.name)} where ${sql.identifier((parent.key[0] as Field).column.name)} = ${p})`;

/**
 * Binds a list query's values first, in one fixed order (filters, scope, search, cursor), so the SQL
 * tree is built only for a shape not yet prepared. `after` is the cursor's position (long values
 * read back); `search` is how the store searches the kind, when the query has `q`.
 */
export function planList(
  d: ListDialect,
  resource: Resource,
  query: ListQuery,
  scope: Scope | undefined,
  after: unknown[] | undefined,
  search?: SearchSql,
): ListPlan {
  const b = new Binder();
  const bound = query.filters.map((f) => {
    const column = d.column(f.field);
    if (f.op === 'null') return [];
    if (f.op === 'in') return (f.value as unknown[]).map((v) => b.bind(v, column));
    return [b.bind(f.value, column)];
  });
  const scopeField = scope && (resource.fields.find((f) => f.key === scope.field) as Field);
  const scopeParam = scope && b.bind(scope.value, d.column(scopeField as Field));
  if (query.search && !search) throw new Error(`${resource.name} has no search index`);
  const searchParam = query.search && search && b.bind(search.value(query.search.words));
  const countParams = query.count ? { ...b.params } : undefined;
  // By relevance the first cursor value is the rank, then one per sort key.
  const sortOf = (i: number) => query.sort[query.relevance ? i - 1 : i] as SortKey;
  const cursorParams = after?.map((value, i) =>
    value === null ? undefined : query.relevance && i === 0 ? b.bind(value) : b.bind(value, d.column(sortOf(i).field)),
  );
  if (query.offset !== undefined) b.params.offset = query.offset;
  const filters = () =>
    and(
      ...query.filters.map((f, i) => conditionOf(d, f, bound[i] as Placeholder[])),
      scopeField && eq(d.column(scopeField), scopeParam as Placeholder),
      scope?.parent && parentExists(scope.parent, scopeParam as Placeholder),
      searchParam && search?.match(searchParam),
    );
  const rank = query.relevance && search && searchParam ? () => search.rank(searchParam) : undefined;
  /** The sole key in the index's order, when the list searches an index that orders by it. */
  const indexKey = (field: Field) =>
    searchParam && search?.key && resource.key.length === 1 && field === resource.key[0] ? search.key : undefined;
  const terms = (): OrderTerm[] => {
    const fields = query.sort.map((key) => {
      const byIndex = indexKey(key.field);
      return byIndex ? plainTerm(byIndex, key.descending) : fieldTerm(d, key);
    });
    return rank && search ? [plainTerm(rank(), search.higherIsBetter), ...fields] : fields;
  };
  return {
    shape: shapeOf(query, scope, false, after),
    params: b.params,
    where: () => and(filters(), cursorParams && afterCursor(terms(), cursorParams)),
    orderBy: () => terms().map((term) => term.orderBy),
    limit: sql.raw(String(query.limit + 1)),
    offset: query.offset === undefined ? undefined : sql.placeholder('offset'),
    count: countParams && { shape: shapeOf(query, scope, true, undefined), params: countParams, where: filters },
    rank,
    searching: query.search !== undefined,
  };
}

/** Every key column equal to its placeholder, in key order (`__k0`, `__k1`…): the WHERE of one element. */
export function keyCondition(columns: Column[]): SQL {
  return and(...columns.map((column, i) => eq(column, sql.placeholder(`__k${i}`)))) as SQL;
}

/** The key's values under the placeholders of keyCondition. */
export function keyParams(resource: Resource, id: Id): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  resource.keyValues(id).forEach((value, i) => {
    params[`__k${i}`] = value;
  });
  return params;
}

/**
 * The order of a kind's rows when no sort is asked for: its key, or every field for a kind without
 * one (as a list orders them).
 */
export function naturalOrder(resource: Resource): Field[] {
  return resource.key.length > 0 ? resource.key : resource.fields;
}

/** The window that ranks a kind's rows per value of `partition`, in its natural order (`expand`'s to-many cap). */
export function rankWithin(partition: Column, order: Column[]): SQL {
  return sql`row_number() OVER (PARTITION BY ${partition} ORDER BY ${sql.join(order, sql`, `)})`;
}

/**
 * The page of a list's raw result (one row more than the limit was asked for, to tell whether more
 * follow); by relevance, each raw row ends with its rank (after the fields), and the last one's is kept.
 * Every page has the same members in the same order (`total` is set by the store when counted): an
 * object spread here (`{ ...page, total, rowidOf }`) cost a related list ~10 µs of its ~40 µs of CPU.
 */
export function pageOf(
  values: unknown[][],
  query: { limit: number; relevance: boolean },
  toRow: (values: unknown[]) => Row,
  rowidOf: (row: Row) => number,
): Page {
  const more = values.length > query.limit;
  const rows: Row[] = new Array(more ? query.limit : values.length);
  for (let i = 0; i < rows.length; i++) rows[i] = toRow(values[i] as unknown[]);
  const last = values[rows.length - 1];
  return { rows, more, total: undefined, rowidOf, rank: query.relevance && last ? (last.at(-1) as number) : undefined };
}

/** The selection of a list: every field, then the rank when it is ordered by relevance. */
export function listSelection(selection: Record<string, SQL.Aliased>, plan: ListPlan): Record<string, SQL.Aliased> {
  return plan.rank ? { ...selection, __rank: plan.rank().as('__rank') } : selection;
}

/** What a store writes for a kind: which fields each statement sets, and the defaults and timestamps it fills in. */
export interface RowRules {
  /** Fields a client may set. */
  writable: Field[];
  /** Fields an UPDATE sets: the writable ones and updatedAt. */
  updated: Field[];
  /** Fields whose default is an SQL expression: the database computes it (see forCreate and forUpdate). */
  sqlDefaults: Set<string>;
  /** The fields an INSERT of `row` sets: all but a key the database assigns and an SQL default the row leaves out. */
  insertedFor(row: Row): Field[];
  /** A create's row: every writable field (the given value, else its default), timestamps from one clock reading (`now`: a bulk create's one). */
  forCreate(row: Row, now?: Date): Row;
  /** An update's row: as forCreate, an SQL-expression default from `sqlDefaultOf`, only updatedAt stamped. */
  forUpdate(row: Row, sqlDefaultOf: (field: Field) => unknown): Row;
}

export function rowRules(resource: Resource): RowRules {
  const writable = resource.fields.filter((f) => !f.readOnly);
  const stampedOnCreate = resource.fields.filter((f) => (SERVER_MANAGED_FIELDS as readonly string[]).includes(f.key));
  const stampedOnUpdate = stampedOnCreate.filter((f) => f.key === 'updatedAt');
  // A key the server assigns by a JS function (`$defaultFn(() => crypto.randomUUID())`) is made here for each
  // row: left to drizzle, the function would run once, when the statement is built, giving every row that value.
  const madeKeys = resource.key.filter((f) => resource.serverAssigned.has(f.key) && f.column.defaultFn !== undefined);
  const inserted = resource.fields.filter((f) => !resource.key.includes(f) || !resource.serverAssigned.has(f.key) || madeKeys.includes(f));
  const sqlDefaults = new Set(inserted.filter(({ column }) => is(column.default, SQL)).map((f) => f.key));
  /** Server-managed timestamps from one clock reading, so createdAt = updatedAt on create. */
  let last: { now: Date; text: string } | undefined;
  const stamp = (row: Row, fields: Field[], now = new Date()) => {
    // A bulk create stamps every row with one reading: its text is made once.
    if (last?.now !== now) last = { now, text: now.toISOString() };
    for (const { key, column } of fields) {
      // A timestamp column kept as a number takes the Date (in whole seconds, on every engine, for one kept so).
      row[key] = column.dataType !== 'date' ? last.text : keepsSeconds(column) ? wholeSecond(now) : now;
    }
  };
  /** Every writable field: the given value, else the column's default, else null; an SQL-expression default stays unset. */
  const withDefaults = (row: Row): Row => {
    const full: Row = {};
    for (const { key, column } of writable) {
      full[key] = key in row ? row[key] : (column.defaultFn?.() ?? (sqlDefaults.has(key) ? undefined : (column.default ?? null)));
    }
    return full;
  };
  return {
    writable,
    updated: [...writable, ...stampedOnUpdate],
    sqlDefaults,
    insertedFor: (row) => (sqlDefaults.size === 0 ? inserted : inserted.filter((f) => !sqlDefaults.has(f.key) || row[f.key] !== undefined)),
    forCreate(row, now) {
      const full = withDefaults(row);
      for (const { key, column } of madeKeys) full[key] = column.defaultFn?.();
      for (const key in row) if (!(key in full)) full[key] = row[key]; // the read-only fields a body may echo
      stamp(full, stampedOnCreate, now);
      return full;
    },
    forUpdate(row, sqlDefaultOf) {
      const full = withDefaults(row);
      for (const field of writable) if (full[field.key] === undefined && sqlDefaults.has(field.key)) full[field.key] = sqlDefaultOf(field);
      stamp(full, stampedOnUpdate);
      return full;
    },
  };
}

/** The row's values for `fields`, encoded for `columnOf`'s columns, under their keys. */
export function valuesOf(fields: Field[], row: Row, columnOf: (field: Field) => Column = (f) => f.column): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const field of fields) values[field.key] = encoded(columnOf(field), row[field.key]);
  return values;
}

/**
 * A cursor's sort values, with each long text value (a Digest) read back from the cursor's row
 * (`readRow`, by the rowid the cursor carries); a 400 when that row is gone or the value changed,
 * as the position is then unknown.
 */
export function positionOf(
  { sort, after, afterRowid, relevance }: ListQuery,
  readRow: (rowid: number) => MaybePromise<Row | undefined>,
): MaybePromise<unknown[] | undefined> {
  if (!after?.some((value) => value instanceof Digest)) return after;
  return then(afterRowid === undefined ? undefined : readRow(afterRowid), (row) =>
    after.map((value, i) => {
      if (!(value instanceof Digest)) return value;
      const current = row?.[(sort[relevance ? i - 1 : i] as SortKey).field.key];
      if (typeof current === 'string' && digestOf(current) === value.digest) return current;
      throw new ApiError(
        'badRequest',
        'Query parameter "cursor" continues after a row that has since changed or been deleted; start again without it.',
        {
          errors: [{ path: 'cursor', message: 'continues after a row that has since changed or been deleted' }],
          problemCode: 'bad-cursor',
        },
      );
    }),
  );
}

/** One multi-row INSERT of a bulk create: `size` rows from `start` that set the same `fields`. */
export interface InsertPiece {
  start: number;
  size: number;
  fields: Field[];
}

/** The most rows one multi-row INSERT holds (fewer when the kind is wide: see insertPieces). */
export const MAX_ROWS_PER_INSERT = 1024;

/**
 * Cuts a bulk create's rows into multi-row INSERTs: runs of consecutive rows that set the same
 * fields, each in pieces whose sizes are powers of two (so a kind needs at most ten multi-row statements
 * per shape), every piece within `maxParameters` bound values.
 */
export function insertPieces(rows: Row[], insertedFor: (row: Row) => Field[], maxParameters: number): InsertPiece[] {
  const pieces: InsertPiece[] = [];
  const shapeOf = (fields: Field[]) => fields.map((f) => f.key).join(',');
  for (let start = 0; start < rows.length; ) {
    const fields = insertedFor(rows[start] as Row);
    const shape = shapeOf(fields);
    let end = start + 1;
    while (end < rows.length && shapeOf(insertedFor(rows[end] as Row)) === shape) end++;
    let most = MAX_ROWS_PER_INSERT;
    while (most > 1 && most * Math.max(1, fields.length) > maxParameters) most /= 2;
    for (let left = end - start; left > 0; ) {
      let size = most;
      while (size > left) size /= 2;
      pieces.push({ start, size, fields });
      start += size;
      left -= size;
    }
  }
  return pieces;
}

/** The VALUES of a piece as placeholders: `r:key` for row r's field `key`. */
export function pieceValues(fields: Field[], size: number): Record<string, Placeholder>[] {
  return Array.from({ length: size }, (_, r) => Object.fromEntries(fields.map((f) => [f.key, sql.placeholder(`${r}:${f.key}`)])));
}

/**
 * The bound values of a piece's statement, each as its column stores it: straight from the rows
 * when the statement binds them row by row in `fields` order (as drizzle writes a multi-row VALUES;
 * checked once per statement by `rowMajor`), else through pieceValues' placeholder names.
 */
export function pieceArgs(
  statement: Pick<Statement, 'args'> & { rowMajor?: boolean },
  { start, size, fields }: InsertPiece,
  rows: Row[],
  columnOf: (field: Field) => Column = (f) => f.column,
): unknown[] {
  if (statement.rowMajor === undefined) {
    const names = statement.args(new Proxy({}, { get: (_, name) => name }));
    const expected = Array.from({ length: size }, (_, r) => fields.map((f) => `${r}:${f.key}`)).flat();
    statement.rowMajor = names.length === expected.length && names.every((name, i) => name === expected[i]);
  }
  const columns = fields.map(columnOf);
  if (statement.rowMajor) {
    const args: unknown[] = [];
    for (let r = start; r < start + size; r++) {
      const row = rows[r] as Row;
      for (let f = 0; f < fields.length; f++) args.push(encoded(columns[f] as Column, row[(fields[f] as Field).key]));
    }
    return args;
  }
  const values: Record<string, unknown> = {};
  for (let r = 0; r < size; r++) {
    const row = rows[start + r] as Row;
    fields.forEach((field, f) => {
      values[`${r}:${field.key}`] = encoded(columns[f] as Column, row[field.key]);
    });
  }
  return statement.args(values);
}

/**
 * Whether the database assigns a kind's key from a growing counter (an INTEGER PRIMARY KEY rowid
 * on SQLite, the identity derived from it on PostgreSQL): then a bulk create may use multi-row
 * INSERTs, their returned rows put in order by inInsertOrder.
 */
export function assignsRowid(resource: Resource): boolean {
  const [key, ...rest] = resource.key;
  return key !== undefined && rest.length === 0 && resource.serverAssigned.has(key.key) && key.column.columnType === 'SQLiteInteger';
}

/**
 * Puts the rows a multi-row INSERT returned in the order of its VALUES. Neither SQLite nor
 * PostgreSQL promises RETURNING's order, but a key the database assigns from a rowid or a sequence
 * grows with each row inserted: sorted by it, the rows are in insertion order.
 */
export function inInsertOrder(rows: Row[], key: string): Row[] {
  return rows.sort((a, b) => (a[key] as number) - (b[key] as number));
}

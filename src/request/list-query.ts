// Pure parsing of collection query strings (docs/http-api.md#query-parameters-collections-and-related-lists): limit, cursor, sort, count, filters, shaping
// and search words, converted to each field's type and bounded. Every failure is a 400 ApiError naming the parameter; no I/O.

import { isInteger, isText } from '../db/columns.js';
import { hasWordCharacters } from '../db/search.js';
import { ApiError, badQuery, echo, type FieldError } from '../errors.js';
import { toInstant } from '../model/instant.js';
import {
  CANONICAL_INTEGER,
  DECIMAL,
  type Expansion,
  type Field,
  NUMERIC_DIGITS,
  type Resource,
  SERVER_MANAGED_FIELDS,
  significantDigits,
} from '../model/registry.js';
import { type CursorCodec, type CursorValue, Digest, toCursorValue } from './cursor.js';
import { firstParameter } from './query-string.js';

export const OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'contains', 'startsWith', 'null'] as const;
export type Operator = (typeof OPERATORS)[number];

export const RESERVED = ['limit', 'cursor', 'sort', 'count', 'fields', 'expand', 'q'] as const;
/** Parameters that shape each element (docs/http-api.md#query-parameters-collections-and-related-lists): an element's GET takes these and no other. */
export const SHAPING = ['fields', 'expand'] as const;
export const LIMIT = { min: 1, max: 1000, default: 100 } as const;

/**
 * What one list query may ask for. Generous for real use, and far inside SQLite's limits (an
 * expression depth of 1000, 32766 bound values): a test runs the SQL of the largest query allowed.
 */
export const QUERY_LIMITS = {
  /** Filter parameters (`field=…`, `field[op]=…`, repeats included). */
  filters: 50,
  /** Values of one `in` list. */
  inValues: 500,
  /** Values of all `in` lists together. */
  inValuesTotal: 2000,
  /** Fields named by `sort` (the primary key, added to break ties, is not counted). */
  sortFields: 8,
  /** Relation paths named by `expand`, and how deep one may go (`orders.pet.owner` is 3). */
  expandPaths: 20,
  expandDepth: 3,
  /** Words of `q`, and the characters of one word (a tsquery lexeme must stay under 2 KB). */
  searchWords: 32,
  searchWordLength: 100,
} as const;

/** The `sort` name of the order by search relevance (best match first). */
export const RELEVANCE = 'relevance';

export interface Filter {
  field: Field;
  op: Operator;
  /** The converted value; an array for `in`, a boolean for `null`. */
  value: unknown;
}

export interface SortKey {
  field: Field;
  descending: boolean;
  /** A field of the primary key: a cursor carries its value whole, however long. */
  key?: boolean;
}

export interface ListQuery {
  limit: number;
  /** The requested order, always ending with the primary key so that it is total. */
  sort: SortKey[];
  filters: Filter[];
  /** Sort-key values of the last row of the previous page; a long text value is a Digest to read back by `afterRowid`. */
  after?: unknown[];
  /** The rowid of that row, when `after` holds a Digest. */
  afterRowid?: number;
  /** Where the page starts, by position: set (0 on the first page) for a kind without a key, which has no keyset. */
  offset?: number;
  count: boolean;
  /** Names the list a cursor belongs to: collection, scope, order and filters (computed only when a cursor is made or read). */
  binding: () => string;
  /** How each element is shaped (`fields`). */
  shape: Shape;
  /** `q`: the elements whose searchable fields hold every word. */
  search?: Search;
  /** `sort=relevance`: best match first, before `sort`'s keys (and the cursor's first value is the rank). */
  relevance: boolean;
}

/** `q`'s words, folded as the index folds them (lower case, no accents); the last one also matches as a prefix. */
export interface Search {
  words: string[];
}

/** What each element of an answer carries: only `fields` (in schema order) when given, else every field; plus its `expand`ed relations. */
export interface Shape {
  fields?: Field[];
  expand?: ExpandNode[];
}

/** One relation to add to each element, and what to add to the elements it brings. */
export interface ExpandNode {
  expansion: Expansion;
  children: ExpandNode[];
}

export type RawQuery = Record<string, string | string[] | undefined>;

export interface ListQueryOptions {
  /** What fixes the list beyond the query (a related path's parent), for cursor binding. */
  scope?: string;
  /** Seals and opens cursors; without it, any cursor is refused. */
  cursors?: CursorCodec;
}

const FILTER_NAME = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[([A-Za-z]+)\])?$/;
/** A number as JSON writes one (RFC 8259 §6). */
export const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
const TEXT_ONLY: readonly Operator[] = ['contains', 'startsWith'];

/** A 400 naming a parameter; the name is cut short like any client text echoed in an error. */
function bad(path: string, message: string): ApiError {
  const named = echo(path);
  return badQuery([{ path: named, message }]);
}

/** What an instant is written as when it is not one, or not one a stored value can equal or be compared with exactly. */
const INSTANT = 'an ISO 8601 date or date-time between 0000-01-01 and 9999-12-31 UTC, to the millisecond';

/**
 * Scalar kinds a field can be filtered and sorted by; others (json, blobs) cannot. A server-managed
 * timestamp is stored as ISO 8601 text in UTC: a `timestamp`, compared as such (docs/http-api.md#routes).
 */
export function scalarTypeOf(field: Field): 'integer' | 'number' | 'decimal' | 'boolean' | 'string' | 'date' | 'timestamp' | undefined {
  const { dataType, columnType } = field.column;
  if (isInteger(field.column)) return 'integer';
  if (dataType === 'number') return 'number';
  // NUMERIC: exact decimal text, compared as a number by both engines (SQLite's affinity, PostgreSQL's numeric).
  if (columnType === 'SQLiteNumeric') return 'decimal';
  if (dataType === 'string' && (SERVER_MANAGED_FIELDS as readonly string[]).includes(field.key)) return 'timestamp';
  if (dataType === 'boolean' || dataType === 'string' || dataType === 'date') return dataType;
  if (isText(field.column)) return 'string'; // dateText(): text, compared as text
  return undefined;
}

/** The filter operators of a field that is not text. */
const NOT_TEXT_OPERATORS = OPERATORS.filter((op) => !TEXT_ONLY.includes(op));
/** A filter's 400 on a field that is no scalar, but for `[null]`. */
const NOT_COMPARABLE = 'names a field that cannot be compared or sorted, only tested with [null]';

/** The one operator of a field that is no scalar (JSON, BLOB, untyped): whether it is null. */
const NULL_ONLY: readonly Operator[] = ['null'];

/** Whether a field takes every comparison and can be sorted by: a scalar type (not JSON, BLOB or untyped). */
export const isComparable = (field: Field): boolean => scalarTypeOf(field) !== undefined;

/**
 * The filter operators a field takes: `contains` and `startsWith` only on text (timestamps too: `2026-11` is a
 * useful prefix); `null` alone on a field that is no scalar.
 */
export function operatorsOf(field: Field): readonly Operator[] {
  const type = scalarTypeOf(field);
  if (type === undefined) return NULL_ONLY;
  return type === 'string' || type === 'timestamp' ? OPERATORS : NOT_TEXT_OPERATORS;
}

/** Converts one raw query value to the field's type, or throws a 400 naming `path`. */
export function toFieldValue(field: Field, raw: string, path: string): unknown {
  const kind = scalarTypeOf(field);
  const fail = (expected: string) => bad(path, `must be ${expected}, not ${JSON.stringify(echo(raw))}`);
  switch (kind) {
    case 'integer': {
      const value = Number(raw);
      if (!CANONICAL_INTEGER.test(raw)) throw fail('an integer');
      if (!Number.isSafeInteger(value)) throw fail(`an integer from -${Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`);
      return value;
    }
    case 'number': {
      // Written as JSON writes a number (no 0x1, 0b1, 1. or spaces, which Number() would also read).
      const value = Number(raw);
      if (!JSON_NUMBER.test(raw) || !Number.isFinite(value)) throw fail('a number, written as in JSON');
      return value;
    }
    case 'decimal':
      // As many digits as a NUMERIC value keeps: SQLite compares a longer one as a rounded double (wrong rows).
      if (!DECIMAL.test(raw) || !Number.isFinite(Number(raw)) || significantDigits(raw) > NUMERIC_DIGITS) {
        throw fail(`a decimal number of at most ${NUMERIC_DIGITS} significant digits such as 12.50`);
      }
      return raw;
    case 'boolean':
      if (raw !== 'true' && raw !== 'false') throw fail('true or false');
      return raw === 'true';
    case 'date': {
      const value = toInstant(raw);
      if (!value) throw fail(INSTANT);
      return value;
    }
    case 'timestamp': {
      // Compared as stored: the same instant in UTC with milliseconds, whatever offset the client wrote.
      const value = toInstant(raw);
      if (!value) throw fail(INSTANT);
      return value.toISOString();
    }
    case 'string': {
      const allowed = field.column.enumValues;
      if (allowed?.length && !allowed.includes(raw)) throw fail(`one of ${allowed.join(', ')}`);
      return raw;
    }
    default:
      throw bad(path, NOT_COMPARABLE);
  }
}

function single(name: string, value: string | string[] | undefined): string {
  if (Array.isArray(value)) throw bad(name, 'is given more than once');
  return value ?? '';
}

function fieldNamed(resource: Resource, key: string, path: string): Field {
  const field = resource.fields.find((f) => f.key === key);
  if (!field) throw bad(path, `names no field of ${resource.name}`);
  return field;
}

export function parseLimit(raw: string): number {
  const value = Number(raw);
  if (!CANONICAL_INTEGER.test(raw) || value < LIMIT.min || value > LIMIT.max) {
    throw bad('limit', `must be an integer from ${LIMIT.min} to ${LIMIT.max}`);
  }
  return value;
}

/**
 * `sort=a,-b`: the order (the key appended), and whether it starts with relevance, which only a
 * search has and which comes first (a field named `relevance` is that field).
 */
function parseSort(resource: Resource, raw: string | undefined, searching: boolean): { keys: SortKey[]; relevance: boolean } {
  const keys: SortKey[] = [];
  let parts = raw === undefined ? [] : raw.split(',');
  const byRelevance = (part: string) => part.replace(/^-/, '') === RELEVANCE && !resource.fields.some((f) => f.key === RELEVANCE);
  const relevance = parts.length > 0 && byRelevance(parts[0] as string);
  if (relevance) {
    if (parts[0] !== RELEVANCE) throw bad('sort', `orders by ${RELEVANCE} best match first only; write ${RELEVANCE}, not -${RELEVANCE}`);
    if (!searching) throw bad('sort', `names ${RELEVANCE}, which only a search has; add q=<words>`);
    parts = parts.slice(1);
  }
  if (parts.some(byRelevance)) {
    throw bad('sort', relevance ? `names ${RELEVANCE} twice` : `names ${RELEVANCE} after a field; ${RELEVANCE} comes first`);
  }
  if (parts.length > QUERY_LIMITS.sortFields) {
    throw bad('sort', `names ${parts.length} fields; at most ${QUERY_LIMITS.sortFields} are allowed`);
  }
  for (const part of parts) {
    const descending = part.startsWith('-');
    const field = fieldNamed(resource, descending ? part.slice(1) : part, 'sort');
    if (scalarTypeOf(field) === undefined) throw bad('sort', `cannot order by ${field.key}`);
    if (keys.some((k) => k.field === field)) throw bad('sort', `names ${field.key} twice`);
    keys.push({ field, descending, ...(resource.key.includes(field) && { key: true }) });
  }
  // Ties are broken by the key, so the order is total; a kind without a key is ordered by every field
  // (rows equal in all of them are interchangeable), so its pages by position are the same each time.
  for (const field of resource.key.length > 0 ? resource.key : resource.fields) {
    if (!keys.some((k) => k.field === field)) keys.push({ field, descending: false, ...(resource.key.length > 0 && { key: true }) });
  }
  return { keys, relevance };
}

/** `q=words`: the words that hold a letter or digit, each literal; a 400 when none does or the kind has no searchable fields. */
function parseSearch(resource: Resource, raw: string): Search {
  if (resource.searchable.length === 0) throw bad('q', `cannot be used here: ${resource.name} has no searchable fields`);
  // Control characters (NUL among them: it would end the engine's query text) separate words like white space.
  const words = raw.split(/[\s\p{Cc}]+/u).filter(hasWordCharacters);
  if (words.length === 0) throw bad('q', 'holds no word to search for (letters or digits)');
  if (words.length > QUERY_LIMITS.searchWords)
    throw bad('q', `holds ${words.length} words; at most ${QUERY_LIMITS.searchWords} are allowed`);
  // Characters are code points: an emoji is one (two UTF-16 units), an accent written as a combining mark one more.
  if (words.some((w) => w.length > QUERY_LIMITS.searchWordLength && [...w].length > QUERY_LIMITS.searchWordLength)) {
    throw bad('q', `holds a word longer than ${QUERY_LIMITS.searchWordLength} characters`);
  }
  return { words };
}

function parseFilter(resource: Resource, name: string, raw: string): Filter {
  const match = FILTER_NAME.exec(name);
  if (!match) throw bad(name, 'is not a field name or field[operator]');
  const [, key, op = 'eq'] = match as unknown as [string, string, string | undefined];
  const field = fieldNamed(resource, key, name);
  if (!(OPERATORS as readonly string[]).includes(op)) throw bad(name, `uses an unknown operator; use one of ${OPERATORS.join(', ')}`);
  const operator = op as Operator;
  if (operator === 'null') {
    if (raw !== 'true' && raw !== 'false') throw bad(name, 'must be true or false');
    return { field, op: operator, value: raw === 'true' };
  }
  if (!isComparable(field)) throw bad(name, NOT_COMPARABLE);
  if (!operatorsOf(field).includes(operator)) throw bad(name, 'applies to text fields only');
  if (operator === 'in') {
    const parts = raw.split(',');
    if (raw === '') throw bad(name, 'needs at least one value');
    if (parts.length > QUERY_LIMITS.inValues) throw bad(name, `lists ${parts.length} values; at most ${QUERY_LIMITS.inValues} are allowed`);
    return { field, op: operator, value: parts.map((part) => toFieldValue(field, part, name)) };
  }
  return { field, op: operator, value: TEXT_ONLY.includes(operator) ? raw : toFieldValue(field, raw, name) };
}

/** `fields=a,b`: known fields, each once, returned in schema order. */
function parseFields(resource: Resource, raw: string): Field[] {
  const keys = raw.split(',');
  const named = new Set<string>();
  for (const key of keys) {
    if (key === '') throw bad('fields', 'names an empty field; list field names separated by ","');
    fieldNamed(resource, key, 'fields');
    if (named.has(key)) throw bad('fields', `names ${echo(key)} twice`);
    named.add(key);
  }
  return resource.fields.filter((f) => named.has(f.key));
}

/** `expand=a,b.c`: relation paths of known relations, at most expandDepth deep; shared prefixes merge. */
function parseExpand(resource: Resource, raw: string): ExpandNode[] {
  const paths = raw.split(',');
  if (paths.length > QUERY_LIMITS.expandPaths)
    throw bad('expand', `names ${paths.length} relations; at most ${QUERY_LIMITS.expandPaths} are allowed`);
  const roots: ExpandNode[] = [];
  const given = new Set<string>();
  for (const path of paths) {
    // Like fields: a path named twice is a mistake to say, not one to merge silently (uniqueItems in OpenAPI).
    if (given.has(path)) throw bad('expand', `names ${echo(path)} twice`);
    given.add(path);
    const names = path.split('.');
    if (names.length > QUERY_LIMITS.expandDepth)
      throw bad('expand', `goes ${names.length} levels deep; at most ${QUERY_LIMITS.expandDepth} are allowed`);
    let kind = resource;
    let level = roots;
    for (const name of names) {
      const expansion = kind.expansions.get(name);
      if (!expansion) {
        const known = [...kind.expansions.keys()];
        throw bad(
          'expand',
          `names no relation ${JSON.stringify(echo(name))} of ${kind.name}${known.length ? `; use ${known.join(', ')}` : ''}`,
        );
      }
      let node = level.find((n) => n.expansion === expansion);
      if (!node) {
        node = { expansion, children: [] };
        level.push(node);
      }
      kind = expansion.target;
      level = node.children;
    }
  }
  return roots;
}

/**
 * Runs one parameter's parse; a refusal adds its field errors to `errors` and gives undefined, so that
 * one 400 names every bad parameter of the query, not only the first.
 */
function attempt<T>(errors: FieldError[], work: () => T): T | undefined {
  try {
    return work();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    errors.push(...(error.errors ?? []));
    return undefined;
  }
}

/**
 * The shaping parameters of a query (the others are left to the caller).
 * @throws {ApiError} 400 naming each of `fields` and `expand` that is bad
 */
function parseShaping(resource: Resource, query: RawQuery): Shape {
  const shape: Shape = {};
  const errors: FieldError[] = [];
  if (query.fields !== undefined) shape.fields = attempt(errors, () => parseFields(resource, single('fields', query.fields)));
  if (query.expand !== undefined) shape.expand = attempt(errors, () => parseExpand(resource, single('expand', query.expand)));
  if (errors.length > 0) throw badQuery(errors);
  return shape;
}

/** The shape of an element asked for without parameters: every field, nothing expanded. */
const WHOLE: Shape = Object.freeze({});

/**
 * Parses the query string of an element's GET: shaping parameters only.
 * @throws {ApiError} 400 naming an unknown parameter or a malformed value
 */
export function parseElementQuery(resource: Resource, query: RawQuery): Shape {
  if (firstParameter(query) === undefined) return WHOLE; // the common case: no parameter, the whole element
  const unknown = Object.keys(query).filter((name) => !(SHAPING as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw badQuery(unknown.map((name) => ({ path: echo(name), message: 'is not a query parameter of an element; use fields or expand' })));
  }
  return parseShaping(resource, query);
}

/**
 * The elements of `rows` with only the shape's fields, and then its expanded relations (the rows
 * themselves when it names no fields): `fields` applies to the top level only.
 */
export function shaped<T extends Record<string, unknown>>(shape: Shape, rows: T[]): Record<string, unknown>[] {
  const { fields, expand = [] } = shape;
  if (!fields) return rows;
  const keys = [...fields.map((f) => f.key), ...expand.map((node) => node.expansion.name)];
  return rows.map((row) => {
    const out: Record<string, unknown> = {};
    for (const key of keys) out[key] = row[key];
    return out;
  });
}

/** Names the list a cursor belongs to: collection, fixed scope, order and filters (not limit or count). */
function bindingOf(resource: Resource, scope: string, query: RawQuery): string {
  const pairs = Object.entries(query)
    .filter(([name]) => !['limit', 'cursor', 'count', ...SHAPING].includes(name))
    .flatMap(([name, value]) => [value ?? ''].flat().map((v) => JSON.stringify([name, v])))
    .sort();
  return JSON.stringify([resource.name, scope, pairs]);
}

/**
 * The cursor of the position after `row` in `query`'s order.
 * @param locate the row's rowid, asked for only when a sort value is too long to carry
 * @param rank the row's search rank, when the order is by relevance
 */
export function encodeCursor(
  query: ListQuery,
  row: Record<string, unknown>,
  cursors: CursorCodec,
  locate: () => number,
  rank?: number,
): string {
  if (query.offset !== undefined) return cursors.seal(query.binding(), { values: [], offset: query.offset + query.limit });
  const values = query.sort.map(({ field, key }) => toCursorValue(row[field.key], key));
  if (query.relevance) values.unshift(rank as number);
  const rowid = values.some((value) => value instanceof Digest) ? locate() : undefined;
  return cursors.seal(query.binding(), { values, rowid });
}

const FOREIGN_CURSOR =
  'is not a cursor of this list: it was edited, or made for another collection, order, filter or server; start again without it';

function parseCursor(
  raw: string,
  sort: SortKey[],
  relevance: boolean,
  binding: () => string,
  cursors: CursorCodec | undefined,
  byOffset: boolean,
): Pick<ListQuery, 'after' | 'afterRowid' | 'offset'> {
  const position = raw === '' ? undefined : cursors?.open(binding(), raw);
  if (byOffset) {
    if (position?.offset === undefined || position.values.length > 0) throw bad('cursor', FOREIGN_CURSOR);
    return { offset: position.offset };
  }
  if (!position || position.offset !== undefined || position.values.length !== sort.length + Number(relevance)) {
    throw bad('cursor', FOREIGN_CURSOR);
  }
  // By relevance, the first value is the last row's rank (a number), then come the sort keys' values.
  const rank = relevance ? position.values[0] : undefined;
  if (relevance && (typeof rank !== 'number' || !Number.isFinite(rank))) throw bad('cursor', FOREIGN_CURSOR);
  const values = relevance ? position.values.slice(1) : position.values;
  const after = sort.map(({ field }, i): unknown => {
    const value = values[i] as CursorValue;
    if (value === null && !field.column.notNull) return null;
    const type = scalarTypeOf(field);
    if (value instanceof Digest && (type === 'string' || type === 'timestamp') && position.rowid !== undefined) return value;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') throw bad('cursor', FOREIGN_CURSOR);
    // The value is the last row's own (the cursor is sealed): one the API would not take from a client, but
    // other software stored (1.5 or text in an INTEGER column), is compared as stored, except in an INTEGER
    // PRIMARY KEY, which holds integers only. An integer beyond 2^53 was rounded when read: compared as it
    // is, the next page could repeat this one for ever, so the list cannot be paged past it.
    // A timestamp is text, ordered as its text: one another program wrote (`….765000Z`, `+01:00`) is compared as
    // it is, not as the canonical form of its instant, which sorts elsewhere (the next page would repeat rows).
    if (typeof value === 'string' && type === 'timestamp') return value;
    if (typeof value === 'number' && Number.isInteger(value) && type === 'integer') {
      if (Number.isSafeInteger(value)) return value;
      throw bad(
        'cursor',
        `continues after ${field.key} ${value}, beyond ±(2^53 − 1), which JSON numbers do not hold exactly: this order cannot be paged past it; filter such values out or sort by another field`,
      );
    }
    try {
      return toFieldValue(field, String(value), 'cursor');
    } catch (error) {
      if (field.column.primary && field.column.columnType === 'SQLiteInteger') throw error;
      return value;
    }
  });
  return { after: relevance ? [rank, ...after] : after, afterRowid: position.rowid };
}

/** Each kind's list query without parameters. */
const DEFAULT_LISTS = new WeakMap<Resource, ListQuery>();

/**
 * Parses the query string of a collection or related list.
 * @throws {ApiError} 400 for any unknown, malformed or out-of-range parameter, or one past QUERY_LIMITS
 */
export function parseListQuery(resource: Resource, query: RawQuery, { scope = '', cursors }: ListQueryOptions = {}): ListQuery {
  if (firstParameter(query) !== undefined) return parseGivenListQuery(resource, query, scope, cursors);
  // No parameter: the kind's default page, parsed once (nothing downstream changes a query).
  let plain = DEFAULT_LISTS.get(resource);
  if (!plain) {
    plain = parseGivenListQuery(resource, query, '', undefined);
    DEFAULT_LISTS.set(resource, plain);
  }
  return listQuery(plain, () => bindingOf(resource, scope, query));
}

/**
 * A list query with every member present, in one order, whatever the query asked: one object shape
 * for all of them on the request path (see pageOf in src/engine/sql.ts for what a spread cost).
 */
function listQuery(q: ListQuery, binding = q.binding): ListQuery {
  return {
    limit: q.limit,
    sort: q.sort,
    filters: q.filters,
    after: q.after,
    afterRowid: q.afterRowid,
    offset: q.offset,
    count: q.count,
    binding,
    shape: q.shape,
    search: q.search,
    relevance: q.relevance,
  };
}

function parseGivenListQuery(resource: Resource, query: RawQuery, scope: string, cursors: CursorCodec | undefined): ListQuery {
  const errors: FieldError[] = [];
  const tried = <T>(work: () => T): T | undefined => attempt(errors, work);
  const limit = tried(() => (query.limit === undefined ? LIMIT.default : parseLimit(single('limit', query.limit))));
  const search = query.q === undefined ? undefined : tried(() => parseSearch(resource, single('q', query.q)));
  const order = tried(() => parseSort(resource, query.sort === undefined ? undefined : single('sort', query.sort), query.q !== undefined));
  const sort = order?.keys;
  const shape = tried(() => parseShaping(resource, query));
  const count = tried(() => {
    const raw = query.count === undefined ? 'false' : single('count', query.count);
    if (raw !== 'true' && raw !== 'false') throw bad('count', 'must be true or false');
    return raw === 'true';
  });
  const given = Object.entries(query)
    .filter(([name]) => !(RESERVED as readonly string[]).includes(name))
    .flatMap(([name, value]) => [value ?? ''].flat().map((raw) => [name, raw] as const));
  for (const [name] of given.slice(QUERY_LIMITS.filters)) {
    errors.push({ path: name, message: `is past the ${QUERY_LIMITS.filters} filters a query may have` });
  }
  const filters = given.slice(0, QUERY_LIMITS.filters).map(([name, raw]) => tried(() => parseFilter(resource, name, raw)));
  let inValues = 0;
  for (const [i, filter] of filters.entries()) {
    if (filter?.op !== 'in') continue;
    inValues += (filter.value as unknown[]).length;
    if (inValues > QUERY_LIMITS.inValuesTotal) {
      errors.push({
        path: given[i]?.[0] as string,
        message: `takes the in lists past the ${QUERY_LIMITS.inValuesTotal} values a query may have`,
      });
      break;
    }
  }
  let memo: string | undefined;
  const binding = () => (memo ??= bindingOf(resource, scope, query));
  const byOffset = resource.key.length === 0;
  const position =
    query.cursor === undefined || !sort
      ? byOffset
        ? { offset: 0 }
        : {}
      : tried(() => parseCursor(single('cursor', query.cursor), sort, order?.relevance === true, binding, cursors, byOffset));
  if (errors.length > 0) throw badQuery(errors);
  return listQuery({
    limit: limit as number,
    sort: sort as SortKey[],
    filters: filters as Filter[],
    ...position,
    count: count as boolean,
    binding,
    shape: shape as Shape,
    search,
    relevance: order?.relevance === true,
  });
}

// Pure parsing of collection query strings (API.md §5): limit, cursor, sort, count and filters,
// converted to each field's type. Every failure is a 400 ApiError naming the parameter; no I/O.
import { createHash } from 'node:crypto';
import { ApiError, type FieldError } from './errors.js';
import type { Field, Resource } from './resources.js';

export const OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'contains', 'startsWith', 'null'] as const;
export type Operator = (typeof OPERATORS)[number];

export const RESERVED = ['limit', 'cursor', 'sort', 'count'] as const;
export const LIMIT = { min: 1, max: 1000, default: 100 } as const;

export interface Filter {
  field: Field;
  op: Operator;
  /** The converted value; an array for `in`, a boolean for `null`. */
  value: unknown;
}

export interface SortKey {
  field: Field;
  descending: boolean;
}

export interface ListQuery {
  limit: number;
  /** The requested order, always ending with the primary key so that it is total. */
  sort: SortKey[];
  filters: Filter[];
  /** Sort-key values of the last row of the previous page. */
  after?: unknown[];
  count: boolean;
  /** Binds cursors to this collection, order and filter set (computed only when a cursor is made or read). */
  fingerprint: () => string;
}

export type RawQuery = Record<string, string | string[] | undefined>;

const FILTER_NAME = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[([A-Za-z]+)\])?$/;
const CANONICAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;
const TEXT_ONLY: readonly Operator[] = ['contains', 'startsWith'];

function bad(path: string, message: string): ApiError {
  return new ApiError('badRequest', `Query parameter "${path}" ${message}.`, { errors: [{ path, message }] });
}

/** Scalar kinds a field can be filtered and sorted by; others (json, blobs) cannot. */
function kindOf(field: Field): 'integer' | 'number' | 'boolean' | 'string' | 'date' | undefined {
  const { dataType, columnType } = field.column;
  if (dataType === 'number') return columnType === 'SQLiteInteger' ? 'integer' : 'number';
  if (dataType === 'boolean' || dataType === 'string' || dataType === 'date') return dataType;
  return undefined;
}

/** Converts one raw query value to the field's type, or throws a 400 naming `path`. */
export function toFieldValue(field: Field, raw: string, path: string): unknown {
  const kind = kindOf(field);
  const fail = (expected: string) => bad(path, `must be ${expected}, not ${JSON.stringify(raw)}`);
  switch (kind) {
    case 'integer': {
      const value = Number(raw);
      if (!CANONICAL_INTEGER.test(raw) || !Number.isSafeInteger(value)) throw fail('an integer');
      return value;
    }
    case 'number': {
      const value = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(value)) throw fail('a number');
      return value;
    }
    case 'boolean':
      if (raw !== 'true' && raw !== 'false') throw fail('true or false');
      return raw === 'true';
    case 'date': {
      const value = new Date(raw);
      if (Number.isNaN(value.getTime())) throw fail('an ISO 8601 date');
      return value;
    }
    case 'string': {
      const allowed = field.column.enumValues;
      if (allowed?.length && !allowed.includes(raw)) throw fail(`one of ${allowed.join(', ')}`);
      return raw;
    }
    default:
      throw bad(path, 'names a field that cannot be filtered or sorted');
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

function parseLimit(raw: string): number {
  const value = Number(raw);
  if (!CANONICAL_INTEGER.test(raw) || value < LIMIT.min || value > LIMIT.max) {
    throw bad('limit', `must be an integer from ${LIMIT.min} to ${LIMIT.max}`);
  }
  return value;
}

function parseSort(resource: Resource, raw: string | undefined): SortKey[] {
  const keys: SortKey[] = [];
  for (const part of raw === undefined ? [] : raw.split(',')) {
    const descending = part.startsWith('-');
    const field = fieldNamed(resource, descending ? part.slice(1) : part, 'sort');
    if (kindOf(field) === undefined) throw bad('sort', `cannot order by ${field.key}`);
    if (keys.some((k) => k.field === field)) throw bad('sort', `names ${field.key} twice`);
    keys.push({ field, descending });
  }
  if (!keys.some((k) => k.field === resource.primaryKey)) {
    keys.push({ field: resource.primaryKey, descending: false });
  }
  return keys;
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
  if (TEXT_ONLY.includes(operator) && kindOf(field) !== 'string') throw bad(name, `applies to text fields only`);
  if (operator === 'in') {
    const parts = raw.split(',');
    if (raw === '') throw bad(name, 'needs at least one value');
    return { field, op: operator, value: parts.map((part) => toFieldValue(field, part, name)) };
  }
  return { field, op: operator, value: TEXT_ONLY.includes(operator) ? raw : toFieldValue(field, raw, name) };
}

/** The fingerprint of everything a cursor depends on: collection, fixed scope, order and filters. */
function fingerprintOf(resource: Resource, scope: string, query: RawQuery): string {
  const parts = Object.entries(query)
    .filter(([name]) => !['limit', 'cursor', 'count'].includes(name))
    .map(([name, value]) => `${name}=${[value].flat().join('\u0000')}`)
    .sort();
  return createHash('sha256')
    .update([resource.name, scope, ...parts].join('\n'))
    .digest('base64url')
    .slice(0, 16);
}

/** Encodes the position after `row` for the next page of `query`. */
export function encodeCursor(query: ListQuery, row: Record<string, unknown>): string {
  const values = query.sort.map(({ field }) => {
    const value = row[field.key];
    return value instanceof Date ? value.toISOString() : value;
  });
  return Buffer.from(JSON.stringify({ q: query.fingerprint(), v: values })).toString('base64url');
}

function parseCursor(raw: string, sort: SortKey[], fingerprint: () => string): unknown[] {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw bad('cursor', 'is not a cursor this service issued');
  }
  const { q, v } = (decoded ?? {}) as { q?: unknown; v?: unknown };
  if (typeof q !== 'string' || !Array.isArray(v) || v.length !== sort.length) throw bad('cursor', 'is not a cursor this service issued');
  if (q !== fingerprint()) throw bad('cursor', 'belongs to another collection, order or filter; start again without it');
  return sort.map(({ field }, i) => {
    const value = v[i];
    if (value === null && !field.column.notNull) return null;
    const scalar = typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
    if (!scalar) throw bad('cursor', 'is not a cursor this service issued');
    return toFieldValue(field, String(value), 'cursor');
  });
}

/**
 * Parses the query string of a collection or related list.
 * @param scope what fixes the list beyond the query (a related path's parent), for cursor binding
 * @throws {ApiError} 400 for any unknown, malformed or out-of-range parameter
 */
export function parseListQuery(resource: Resource, query: RawQuery, scope = ''): ListQuery {
  const errors: FieldError[] = [];
  const attempt = <T>(work: () => T): T | undefined => {
    try {
      return work();
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      errors.push(...(error.errors ?? []));
      return undefined;
    }
  };
  const limit = attempt(() => (query.limit === undefined ? LIMIT.default : parseLimit(single('limit', query.limit))));
  const sort = attempt(() => parseSort(resource, query.sort === undefined ? undefined : single('sort', query.sort)));
  const count = attempt(() => {
    const raw = query.count === undefined ? 'false' : single('count', query.count);
    if (raw !== 'true' && raw !== 'false') throw bad('count', 'must be true or false');
    return raw === 'true';
  });
  const filters = Object.entries(query)
    .filter(([name]) => !(RESERVED as readonly string[]).includes(name))
    .flatMap(([name, value]) => [value ?? ''].flat().map((raw) => attempt(() => parseFilter(resource, name, raw))));
  let memo: string | undefined;
  const fingerprint = () => (memo ??= fingerprintOf(resource, scope, query));
  const after =
    query.cursor === undefined || !sort ? undefined : attempt(() => parseCursor(single('cursor', query.cursor), sort, fingerprint));
  if (errors.length > 0) {
    const first = errors[0] as FieldError;
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    throw new ApiError('badRequest', `Query parameter "${first.path}" ${first.message}${more}.`, { errors });
  }
  return { limit: limit as number, sort: sort as SortKey[], filters: filters as Filter[], after, count: count as boolean, fingerprint };
}

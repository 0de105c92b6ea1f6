// The data-layer seam: what the HTTP layer asks of a backend, per resource kind. SQLite answers
// reads synchronously; another backend may answer with promises (T | Promise<T>) behind the same calls.
import { Column, is, SQL, StringChunk } from 'drizzle-orm';
import { getTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core';
import { ApiError, echo } from '../errors.js';
import type { JsonResponse } from '../http/messages.js';
import { foreignKeysOf, type Id, type Resource } from '../model/registry.js';
import type { ListQuery } from '../request/list-query.js';
import type { Row } from '../request/validation.js';
import type { ChangeLog } from './changes.js';

export type MaybePromise<T> = T | Promise<T>;

/** Rows whose `field` equals `value`: the children of a related path. */
export interface Scope {
  field: string;
  value: unknown;
  /**
   * The kind `value` is a key of: rows are listed only while that element exists (checked in the same
   * statement), so a page with rows needs no read of the parent, and only an empty one asks whether it is gone.
   */
  parent?: Resource;
}

export interface Page {
  rows: Row[];
  /** True when rows follow the last one of this page. */
  more: boolean;
  /** Rows matching the filters on all pages, when the query asked for a count. */
  total?: number;
  /** The rowid of one of `rows` (for a cursor that cannot carry a long sort value). */
  rowidOf: (row: Row) => number;
  /** By relevance: the search rank of the last row (the next page's cursor carries it). */
  rank?: number;
}

/**
 * What a write makes of the current row, run inside the write's transaction on the row read there:
 * the preconditions and the validation of a replacement or patch. It throws to stop the write.
 */
export type Rewrite = (current: Row) => Row;
export type Check = (current: Row) => void;

/** An Idempotency-Key and the fingerprint of the request that used it. */
export interface Once {
  key: string;
  fingerprint: string;
}

export interface Created {
  response: JsonResponse;
  /** True when the response is the stored answer to an earlier request with the same key. */
  replayed: boolean;
}

/**
 * One resource kind's data. Writes take rows already validated (or a pure Rewrite that validates),
 * run in a transaction, map constraint failures to ApiErrors (409, 422; 503 when the database
 * cannot write) and settle only after their commit.
 */
export interface ResourceStore {
  get(id: Id): MaybePromise<Row | undefined>;
  exists(id: Id): MaybePromise<boolean>;
  list(query: ListQuery, scope?: Scope): MaybePromise<Page>;
  /** The rows whose (sole) key is one of `values`, in no particular order: the to-one side of `expand`. */
  withKeys(values: unknown[]): MaybePromise<Row[]>;
  /** The rows whose `field` is one of `values`, at most `cap` per value, each value's in key order: the to-many side of `expand`. */
  withParents(field: string, values: unknown[], cap: number): MaybePromise<Row[]>;
  /**
   * Inserts `row`, or every row of an array (a bulk create: one transaction, all or none; a refusal
   * names the failing element, see atElement); `respond` gets what was created, in the same shape.
   * With `once`, the response is stored under the key in the same transaction, or the stored one replayed.
   */
  create(row: Row | Row[], respond: (created: Row | Row[]) => JsonResponse, once?: Once): MaybePromise<Created>;
  /** Replaces the row with what `change` makes of it; 404 when it is gone. */
  update(id: Id, rewrite: Rewrite): MaybePromise<Row>;
  /** Deletes the row after `check` passes on it; 404 when it is gone, 409 while others refer to it. */
  remove(id: Id, check: Check): MaybePromise<void>;
}

/** The kind stores inside a batch's transaction: reads see the batch's writes; writes run at once (SQLite: synchronously). */
export interface Transaction {
  of(resource: Resource): ResourceStore;
}

export interface Store {
  of(resource: Resource): ResourceStore;
  /** The change feed's log: every committed write, recorded by the database in the write's transaction. */
  changes: ChangeLog;
  /** Deletes up to `batch` expired Idempotency-Keys; returns how many. */
  purgeExpiredKeys(batch: number): MaybePromise<number>;
  /** Commits every write queued now (before a shutdown closes the database). */
  flush(): void;
  /**
   * Runs `work` in one transaction of its own, all or nothing (an error it throws rolls back every
   * write it made), serialized with every other batch; its answer is committed with it under `once`'s
   * key, or the stored answer replayed. On SQLite `work` must answer synchronously.
   */
  batch(work: (tx: Transaction) => MaybePromise<JsonResponse>, once?: Once): Promise<Created>;
}

/** The 404 for an id that names no element of `resource` (every backend and the HTTP layer use it). */
export function notFound(resource: Resource, id: unknown): ApiError {
  return new ApiError('notFound', `There is no ${resource.name} element with id ${JSON.stringify(echo(String(id)))}.`);
}

/** Applies `next` to a value now, or once its promise settles: a synchronous store stays synchronous. */
export function then<T, R>(value: MaybePromise<T>, next: (value: T) => R): MaybePromise<R> | R {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** A foreign key (of one column or several) whose values name no element: its fields, and the kind they should name. */
export interface Dangling {
  fields: string[];
  /** Undefined when the foreign key is not one the registry knows (its parent is not served). */
  parent?: Resource;
}

/** The foreign key of `resource` whose fields are exactly `fields` (in its order), as a Dangling. */
export function danglingOf(resource: Resource, fields: string[]): Dangling {
  const same = (others: string[]) => others.length === fields.length && others.every((f, i) => f === fields[i]);
  return { fields, parent: foreignKeysOf(resource).find((r) => same(r.fields))?.parent };
}

/**
 * The client's errors for what a database refused, worded once for every backend so that both
 * answer the same: a unique value taken (409), a delete blocked by references (409), a reference
 * to nothing (422), another constraint (422).
 */
export const refusals = {
  /**
   * `fields`: those of the unique constraint, when the engine named them all; none for one it cannot tell
   * (a unique index on an expression such as lower(email)), which is then not said to be the key.
   */
  taken: (resource: Resource, fields: string[], cause: unknown) =>
    fields.length > 0
      ? new ApiError('conflict', `A ${resource.name} element with the same ${fields.join(', ')} already exists.`, {
          errors: fields.map((path) => ({ path, message: 'is already taken' })),
          cause,
        })
      : new ApiError('conflict', `Another ${resource.name} element already has the same values for a unique constraint of its table.`, {
          cause,
        }),
  stillReferenced(resource: Resource, cause: unknown) {
    // The kinds whose foreign keys may block a delete of this kind: all but SET NULL / SET DEFAULT / CASCADE ones.
    const blocking = resource.referencedBy.filter((r) => !['set null', 'set default', 'cascade'].includes(r.onDelete));
    const referrers = blocking.map((r) => `${r.child.name} (${r.field})`).join(' or ') || 'other elements';
    return new ApiError('conflict', `This ${resource.name} element is still referenced by ${referrers}; change or remove those first.`, {
      problemCode: 'still-referenced',
      cause,
    });
  },
  /**
   * `dangling`: the foreign keys that name no element, when they can be told. Each of their fields is named
   * once, in the kind's field order (whichever order the engine found them in), with the kind it names no element of.
   */
  missingParent(resource: Resource, dangling: Dangling[], cause: unknown) {
    const parentOf = new Map<string, string>();
    for (const { fields, parent } of dangling) {
      for (const field of fields) if (!parentOf.has(field)) parentOf.set(field, parent?.name ?? 'parent');
    }
    const errors = resource.fields
      .filter((f) => parentOf.has(f.key))
      .map(({ key }) => ({ path: key, message: `names no ${parentOf.get(key)} element` }));
    return new ApiError('unprocessable', 'A reference points at an element that does not exist.', {
      ...(errors.length > 0 && { errors }),
      problemCode: 'missing-parent',
      cause,
    });
  },
  /** A NOT NULL column left without a value: its fields (none when the engine did not say which). */
  missingValue: (resource: Resource, fields: string[], cause: unknown) =>
    new ApiError('unprocessable', `The ${resource.name} element is missing a required value.`, {
      ...(fields.length > 0 && { errors: fields.map((path) => ({ path, message: 'is required' })) }),
      problemCode: 'constraint',
      cause,
    }),
  /** A batch whose commit broke a foreign key checked only there (DEFERRABLE INITIALLY DEFERRED): which operation did is not known. */
  brokenAtCommit: (cause: unknown) =>
    new ApiError(
      'unprocessable',
      'The batch breaks a foreign key that the database checks when it commits (DEFERRABLE INITIALLY DEFERRED): ' +
        'a reference names an element that does not exist, or an element still referenced was removed. Nothing was written.',
      { problemCode: 'deferred-reference', cause },
    ),
  /**
   * A CHECK (or another constraint of the table's own) the element breaks: `rule` as the engine names it
   * (its expression, or its name), and the fields it is about when they can be told (each gets an entry).
   */
  constraint: (resource: Resource, cause: unknown, rule?: string, fields: readonly string[] = []) =>
    new ApiError('unprocessable', `The ${resource.name} element breaks a constraint of its table${rule ? ` (${rule})` : ''}.`, {
      ...(rule && fields.length > 0 && { errors: fields.map((path) => ({ path, message: `breaks ${rule}` })) }),
      problemCode: 'constraint',
      cause,
    }),
  /** A searchable kind whose index its migrations have not built yet (the service started before they ran). */
  searchIndexMissing: (resource: Resource, cause: unknown) =>
    new ApiError('unavailable', `Search on ${resource.name} is unavailable: its search index is not built; apply the migrations.`, {
      headers: { 'Retry-After': '60' },
      problemCode: 'search-index-missing',
      cause,
    }),
  /** A table or column the schema declares and no applied migration made (a schema change without its migration). */
  schemaAhead: (cause: unknown) =>
    new ApiError(
      'unavailable',
      'The database lacks a table or column the schema declares: a schema change has no migration applied (`npm run db:generate`, then `npm run migrate`).',
      { headers: { 'Retry-After': '60' }, problemCode: 'schema-ahead', cause },
    ),
  /** The database is unreachable, overloaded or cannot write now: retry shortly. */
  unavailable: (detail: string, cause?: unknown) => new ApiError('unavailable', detail, { headers: { 'Retry-After': '1' }, cause }),
};

/** A quoted SQL string literal ('it''s'): its words are data, never columns. */
const STRING_LITERAL = /'(?:[^']|'')*'/g;

/** The fields whose columns a CHECK's expression names as words (outside string literals), in field order. */
export function fieldsNamedIn(resource: Resource, expression: string, columns: ReadonlySet<string> = new Set()): string[] {
  const words = new Set(expression.replace(STRING_LITERAL, ' ').match(/[\p{L}\p{N}_$]+/gu));
  return resource.fields.filter((f) => words.has(f.column.name) || columns.has(f.column.name)).map((f) => f.key);
}

/** The columns a drizzle SQL expression refers to (`${t.low}`), and its literal text (`sql\`low <= high\``). */
function readExpression(value: SQL, columns: Set<string>, text: string[]): void {
  for (const chunk of value.queryChunks) {
    if (is(chunk, Column)) columns.add(chunk.name);
    else if (is(chunk, SQL)) readExpression(chunk, columns, text);
    else if (is(chunk, StringChunk)) text.push(...chunk.value);
  }
}

/** Per kind, the fields of each CHECK its schema declares by name (drizzle's check('name', sql`…`)): read on a first refusal. */
const DECLARED_CHECKS = new WeakMap<Resource, Map<string, string[]>>();

/**
 * The fields a named CHECK of the kind's schema refers to, or none for a name the schema does not declare
 * (a database's own constraint, as an introspected schema has: its expression is the database's alone).
 * Both engines name a declared check as the schema does, so one lookup serves both.
 */
export function fieldsOfCheck(resource: Resource, name: string): string[] {
  let checks = DECLARED_CHECKS.get(resource);
  if (checks === undefined) {
    checks = new Map();
    if (is(resource.table, SQLiteTable)) {
      for (const check of getTableConfig(resource.table).checks) {
        const columns = new Set<string>();
        const text: string[] = [];
        readExpression(check.value, columns, text);
        checks.set(check.name, fieldsNamedIn(resource, text.join(' '), columns));
      }
    }
    DECLARED_CHECKS.set(resource, checks);
  }
  return checks.get(name) ?? [];
}

// PostgreSQL's errors as the API's, mapped in one place: constraint violations (SQLSTATE class 23)
// as 409/422, unreachable or overloaded servers as 503, races (40001, 40P01) as retryable.
import { getTableConfig, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import { ApiError } from '../../errors.js';
import type { Resource } from '../../model/registry.js';
import { danglingOf, fieldsOfCheck, refusals } from '../store.js';

/** The fields node-postgres gives a server error (and the errno `code` of a socket error). */
export interface PgError extends Error {
  code?: string;
  detail?: string;
  column?: string;
  /** The table of the constraint that failed (for a foreign key: the referencing table). */
  table?: string;
  /** The name of the constraint that failed. */
  constraint?: string;
}

/**
 * SQLSTATE classes of a server that cannot serve now: connection exceptions (08), insufficient
 * resources (53: too many connections, out of memory or disk), operator intervention (57: shutdown,
 * statement timeout) and system errors (58).
 */
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58'];
/** Read-only transaction (a standby), lock not available, authentication or database gone after a change of the server. */
const UNAVAILABLE_CODES = new Set(['25006', '55P03', '28000', '28P01', '3D000']);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
]);
/** node-postgres's own errors for a lost, never-made or closed connection carry no code. */
const NO_CONNECTION =
  /Connection terminated|timeout exceeded when trying to connect|connection error|Connection ended|Client was closed|after calling end on the pool|is not queryable/i;

/** Whether an error says the database is unreachable or refusing work (not that the request is wrong). */
export function isUnavailable(error: PgError): boolean {
  // The service's own errors quote clients' words (an id in a 404): never read as the driver's.
  if (error instanceof ApiError) return false;
  const code = error.code ?? '';
  if (UNAVAILABLE_CLASSES.includes(code.slice(0, 2)) || UNAVAILABLE_CODES.has(code) || NETWORK_CODES.has(code)) return true;
  return NO_CONNECTION.test(error.message);
}

/** The 503 of an unreachable or overloaded database, or undefined for any other error. */
export function pgUnavailableFrom(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error.code === 'unavailable' ? error : undefined;
  if (!(error instanceof Error) || !isUnavailable(error as PgError)) return undefined;
  // Cancelled by the service's own bound on a statement (the server is there, it was slow).
  if ((error as PgError).code === '57014') {
    return refusals.unavailable('A statement took longer than the database may take (PG_STATEMENT_TIMEOUT_MS); try again later.', error);
  }
  return refusals.unavailable('The database cannot be reached right now; try again later.', error);
}

/** The 503 for undefined_table or undefined_column: a schema change whose migration was not applied; else undefined. */
export function pgSchemaAheadFrom(error: unknown): ApiError | undefined {
  const ahead = error instanceof Error && ['42P01', '42703'].includes((error as PgError).code ?? '');
  return ahead ? refusals.schemaAhead(error) : undefined;
}

/** A serialization failure or a deadlock: the transaction may simply be run again. */
export const isRetryable = (error: unknown) => ['40001', '40P01'].includes((error as PgError).code ?? '');

/** The 503 of a write that kept losing serialization races or deadlocks; else the error, a 503 if it is one. */
export function afterRetries(error: unknown): unknown {
  if (!isRetryable(error)) return pgUnavailableFrom(error) ?? error;
  return refusals.unavailable('The write kept conflicting with concurrent writes; try again.', error);
}

/** Column names in a constraint's detail: `Key (user_id, pet_id)=(1, 2) already exists.` */
function columnsInDetail(detail: string | undefined): string[] {
  const match = /^Key \((.+?)\)=/.exec(detail ?? '');
  return match ? (match[1] as string).split(', ').map((c) => c.replace(/^"|"$/g, '')) : [];
}

/** What a value PostgreSQL refused to store or compare is, by SQLSTATE (22xxx data exceptions, 54000 program limit). */
export const UNSTORABLE: Readonly<Record<string, string>> = {
  '22021': 'text PostgreSQL cannot store (a NUL character, \\u0000)',
  '22P05': 'text PostgreSQL cannot store (a NUL character, \\u0000)',
  '22001': 'a text value longer than its column allows',
  '22003': "a number out of its column's range",
  '22007': 'a date or time its column cannot store',
  '22008': "a date or time out of its column's range",
  '54000': 'a value too long for PostgreSQL to index (a unique index holds about 2,700 bytes of a row, a search index about 1 MB of text)',
};

/** A write's failure as the client's error (409, 422, 503); anything else (a bug) unchanged. */
export function writeError(resource: Resource, action: 'write' | 'remove', error: unknown): unknown {
  if (error instanceof ApiError) return error;
  const e = error as PgError;
  const fieldsOf = (columns: string[]) => columns.map((c) => resource.fieldOfColumn.get(c)).filter((f): f is string => f !== undefined);
  const code = e.code ?? '';
  switch (code) {
    case '23505': {
      // All of the key's columns, or none: a unique index on an expression names `lower(email)`, no field.
      const columns = columnsInDetail(e.detail);
      const fields = fieldsOf(columns);
      return refusals.taken(resource, fields.length === columns.length ? fields : [], error);
    }
    case '23503': {
      // A write that changes a field other elements name (not the key: no write changes it) breaks their
      // constraint, not its own: refused like a delete. Told by the constraint's table, or (a kind that
      // refers to itself) by the columns named being none of this kind's foreign-key columns.
      const columns = columnsInDetail(e.detail);
      const own = new Set(
        getTableConfig(resource.table as SQLiteTable).foreignKeys.flatMap((fk) => fk.reference().columns.map((c) => c.name)),
      );
      const underReferences = (e.table !== undefined && e.table !== resource.name) || columns.some((c) => !own.has(c));
      const named = fieldsOf(columns);
      return action === 'remove' || underReferences
        ? refusals.stillReferenced(resource, error)
        : refusals.missingParent(resource, named.length > 0 ? [danglingOf(resource, named)] : [], error);
    }
    case '23502':
      return refusals.missingValue(resource, fieldsOf(e.column ? [e.column] : []), error);
  }
  // 23514 (check), 23P01 (exclusion); 22xxx: a value the column cannot hold (a NUL character in text);
  // 54000: a value too long for its index (PostgreSQL's btree rows hold ~2.7 kB; SQLite has no such bound).
  // A CHECK by its name, as SQLite names a named one (PostgreSQL names every CHECK; its expression is in the catalog
  // only), with the fields the schema's declaration of it refers to.
  if (code === '23514' && e.constraint) {
    return refusals.constraint(resource, error, `CHECK ${e.constraint}`, fieldsOfCheck(resource, e.constraint));
  }
  if (code.startsWith('23')) return refusals.constraint(resource, error);
  if (code.startsWith('22') || code === '54000') {
    // In words of the contract, not PostgreSQL's own (which name its indexes and encodings).
    const what = UNSTORABLE[code] ?? 'a value its column cannot store';
    return new ApiError('unprocessable', `The ${resource.name} element holds ${what}.`, { cause: error, problemCode: 'constraint' });
  }
  return pgUnavailableFrom(error) ?? error;
}

// The PostgreSQL store: the same kind stores over a node-postgres pool, SQL built once per statement
// with drizzle on the derived pg tables; PostgreSQL's errors are mapped to the API's here, once.
import { createHash, randomBytes } from 'node:crypto';
import { and, count, eq, getTableColumns, gt, inArray, lte, type SQL, sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { getTableConfig, type PgColumn, PgDialect, type PgTable } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import { CURSOR_SECRET_NAME } from '../cursor.js';
import type { PostgresHandle } from '../db/postgres.js';
import { ApiError } from '../errors.js';
import { KEY_TTL_MS, reusedKey } from '../idempotency.js';
import type { Field, Id, Resource } from '../resources.js';
import type { Row } from '../validation.js';
import {
  type Buildable,
  cached,
  encoded,
  type ListDialect,
  pageOf,
  planList,
  positionOf,
  rowMaker,
  rowRules,
  type Statement,
  selectionOf,
  toStatement,
  valuesOf,
} from './sql.js';
import { type KindStore, notFound, type Page, type Store } from './store.js';

/** A transaction that lost a serialization race or a deadlock is run again this many times in all, then a 503. */
const MAX_ATTEMPTS = 3;

/** SQLSTATE classes and codes that mean the server cannot be reached or cannot serve now. */
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', '57014', '25006', '55P03', '53100', '53200']);
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);

interface PgError extends Error {
  code?: string;
  detail?: string;
  column?: string;
  constraint?: string;
}

/** Whether an error says the database is unreachable or refusing work (not that the request is wrong). */
function isUnavailable(error: PgError): boolean {
  const code = error.code ?? '';
  if (code.startsWith('08') || UNAVAILABLE_CODES.has(code) || NETWORK_CODES.has(code)) return true;
  // node-postgres's own errors for a lost or never-made connection carry no code.
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended/i.test(
    error.message,
  );
}

/** The 503 of an unreachable or overloaded database, or undefined for any other error. */
export function pgUnavailableFrom(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error.code === 'unavailable' ? error : undefined;
  if (!(error instanceof Error) || !isUnavailable(error as PgError)) return undefined;
  return new ApiError('unavailable', 'The database cannot be reached right now; try again later.', {
    headers: { 'Retry-After': '1' },
    cause: error,
  });
}

/** A serialization failure or a deadlock: the transaction may simply be run again. */
const isRetryable = (error: unknown) => ['40001', '40P01'].includes((error as PgError).code ?? '');

/** Column names in a constraint's detail: `Key (user_id, pet_id)=(1, 2) already exists.` */
function columnsInDetail(detail: string | undefined): string[] {
  const match = /^Key \((.+?)\)=/.exec(detail ?? '');
  return match ? (match[1] as string).split(', ').map((c) => c.replace(/^"|"$/g, '')) : [];
}

/** PostgreSQL's spelling of the list language: NULLs and text ordered as SQLite orders them. */
function listDialect(columnOf: (field: Field) => PgColumn): ListDialect {
  /** Text compared byte by byte (SQLite's BINARY collation), whatever the database's locale. */
  const ordered = (field: Field) => {
    const column = columnOf(field);
    return column.dataType === 'string' ? sql`${column} COLLATE "C"` : sql`${column}`;
  };
  return {
    column: columnOf,
    contains: (column, p) => sql`strpos(${column}, ${p}) > 0`,
    ordered,
    // SQLite sorts NULL before every value: first ascending, last descending.
    orderBy: ({ field, descending }) => (descending ? sql`${ordered(field)} DESC NULLS LAST` : sql`${ordered(field)} ASC NULLS FIRST`),
  };
}

/** Runs statements on the pool or on a transaction's client, rows as arrays, each statement prepared once per connection. */
type Queryable = pg.Pool | pg.PoolClient;
type Named = Statement & { name: string };

/**
 * A statement that each connection prepares once: its name is its SQL's digest, so the same SQL is
 * one prepared statement however often a shape cache forgets it (the pool's maxUses bounds what a
 * long-lived connection accumulates from clients' many list shapes).
 */
const named = (query: Buildable): Named => {
  const statement = toStatement(query);
  return { ...statement, name: `restable_${createHash('sha1').update(statement.text).digest('hex').slice(0, 24)}` };
};

async function rowsOf(on: Queryable, statement: Named, values: Record<string, unknown>): Promise<unknown[][]> {
  const result = await on.query({ name: statement.name, text: statement.text, values: statement.args(values), rowMode: 'array' });
  return result.rows as unknown[][];
}

/** Runs `work` in a transaction on one connection; a serialization failure or deadlock runs it again. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw pgUnavailableFrom(error) ?? error;
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (error instanceof Error && isUnavailable(error as PgError)) broken = error;
      else await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      if (isRetryable(error) && attempt < MAX_ATTEMPTS) continue;
      if (isRetryable(error)) {
        throw new ApiError('unavailable', 'The write kept conflicting with concurrent writes; try again.', {
          headers: { 'Retry-After': '1' },
          cause: error,
        });
      }
      throw pgUnavailableFrom(error) ?? error;
    } finally {
      // A connection that failed mid-transaction is closed, not handed to the next request.
      client.release(broken);
    }
  }
}

/** The stored answers to Idempotency-Keys, read and written inside a create's transaction. */
function keyStatements(db: NodePgDatabase, internal: Record<string, PgTable>) {
  const t = getTableColumns(internal.idempotencyKeys as PgTable) as Record<string, PgColumn>;
  const table = internal.idempotencyKeys as PgTable;
  const c = (key: string) => t[key] as PgColumn;
  return {
    lock: { text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', name: 'restable_key_lock' },
    find: named(
      db
        .select({ fingerprint: c('fingerprint'), status: c('status'), headers: c('headers'), body: c('body') })
        .from(table)
        .where(and(eq(c('key'), sql.placeholder('key')), gt(c('createdAt'), sql.placeholder('since')))),
    ),
    save: named(
      db
        .insert(table)
        .values({
          key: sql.placeholder('key'),
          fingerprint: sql.placeholder('fingerprint'),
          status: sql.placeholder('status'),
          headers: sql.placeholder('headers'),
          body: sql.placeholder('body'),
          createdAt: sql.placeholder('createdAt'),
        } as never)
        .onConflictDoUpdate({
          target: c('key'),
          set: {
            fingerprint: sql`excluded.fingerprint`,
            status: sql`excluded.status`,
            headers: sql`excluded.headers`,
            body: sql`excluded.body`,
            createdAt: sql`excluded.created_at`,
          } as never,
        }),
    ),
    purge: named(
      db.delete(table).where(
        inArray(
          c('key'),
          db
            .select({ key: c('key') })
            .from(table)
            .where(lte(c('createdAt'), sql.placeholder('before')))
            .limit(sql.placeholder('batch')),
        ),
      ),
    ),
  };
}
type Keys = ReturnType<typeof keyStatements>;

function createKindStore(pool: pg.Pool, db: NodePgDatabase, keys: Keys, resource: Resource, table: PgTable, now: () => number): KindStore {
  const pgColumns = getTableColumns(table) as Record<string, PgColumn>;
  const columnOf = (field: Field) => pgColumns[field.key] as PgColumn;
  const fields = resource.fields.map((f) => ({ ...f, column: columnOf(f) }));
  const pk = columnOf(resource.primaryKey);
  const selection = selectionOf(fields);
  const toRow = rowMaker(fields);
  const dialect = listDialect(columnOf);
  const rules = rowRules(resource);
  const encodedId = (id: Id) => encoded(pk, id);

  const byId = named(
    db
      .select(selection)
      .from(table)
      .where(eq(pk, sql.placeholder('id'))),
  );
  const lockById = named(
    db
      .select(selection)
      .from(table)
      .where(eq(pk, sql.placeholder('id')))
      .for('update'),
  );
  const existsById = named(
    db
      .select({ one: sql`1` })
      .from(table)
      .where(eq(pk, sql.placeholder('id'))),
  );
  const deleteById = named(db.delete(table).where(eq(pk, sql.placeholder('id'))));
  const placeholders = (of: Field[]) => Object.fromEntries(of.map((f) => [f.key, sql.placeholder(f.key)]));
  const updateById = named(
    db
      .update(table)
      .set(placeholders(rules.updated) as never)
      .where(eq(pk, sql.placeholder('__id')))
      .returning(selection as never),
  );
  const inserts = new Map<string, Named>();
  const insertFor = (row: Row) => {
    const inserted = rules.insertedFor(row);
    const statement = cached(inserts, inserted.map((f) => f.key).join(','), () =>
      named(
        db
          .insert(table)
          .values(placeholders(inserted) as never)
          .returning(selection as never),
      ),
    );
    return { inserted, statement };
  };
  const listStatements = new Map<string, Named>();
  const countStatements = new Map<string, Named>();
  /** A column's SQL-expression default, computed by PostgreSQL (for a PUT that leaves the field out). */
  const sqlDefaultStatements = new Map<string, { text: string; values: unknown[] }>();
  const sqlDefaultOf = async (client: pg.PoolClient, field: Field): Promise<unknown> => {
    let statement = sqlDefaultStatements.get(field.key);
    if (!statement) {
      const query = new PgDialect().sqlToQuery(field.column.default as SQL);
      statement = { text: `select ${query.sql}`, values: query.params };
      sqlDefaultStatements.set(field.key, statement);
    }
    const result = await client.query({ text: statement.text, values: statement.values, rowMode: 'array' });
    return columnOf(field).mapFromDriverValue((result.rows[0] as unknown[])[0]);
  };

  /** Reads with connection failures as 503s. */
  /**
   * Reads with connection failures as 503s. A value PostgreSQL cannot hold (a NUL character, which
   * SQLite text may contain) is a data exception (22xxx): no row has it, so an id names nothing
   * (`missing`) and a filter value is refused with a 400.
   */
  const reading = async <T>(work: () => Promise<T>, missing?: () => T): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if ((error as PgError).code?.startsWith('22')) {
        if (missing) return missing();
        throw new ApiError('badRequest', `A query value cannot be compared with ${resource.name}'s fields: ${(error as Error).message}.`);
      }
      throw pgUnavailableFrom(error) ?? error;
    }
  };
  const find = (on: Queryable, statement: Named, id: Id) =>
    rowsOf(on, statement, { id: encodedId(id) }).then((rows) => (rows[0] ? toRow(rows[0]) : undefined));

  /** The kinds whose foreign keys may block a delete of this kind (all but SET NULL / CASCADE ones). */
  const referrers = () =>
    resource.referencedBy
      .filter((r) => !['set null', 'set default', 'cascade'].includes(r.onDelete))
      .map((r) => `${r.child.name} (${r.field})`)
      .join(' or ') || 'other elements';

  /** A constraint failure as the client's error (409, 422), anything else unchanged. */
  const toApiError = (action: 'write' | 'remove', error: unknown): unknown => {
    if (error instanceof ApiError) return error;
    const e = error as PgError;
    const fieldsOf = (columns: string[]) => columns.map((c) => resource.fieldOfColumn.get(c)).filter((f): f is string => f !== undefined);
    switch (e.code) {
      case '23505': {
        const keys = fieldsOf(columnsInDetail(e.detail));
        return new ApiError('conflict', `A ${resource.name} element with the same ${keys.join(', ') || 'key'} already exists.`, {
          errors: keys.map((path) => ({ path, message: 'is already taken' })),
          cause: error,
        });
      }
      case '23503': {
        if (action === 'remove') {
          return new ApiError('conflict', `This ${resource.name} element is still referenced by ${referrers()}; remove those first.`, {
            cause: error,
          });
        }
        const keys = fieldsOf(columnsInDetail(e.detail));
        const parentOf = (key: string) => resource.foreignKeys.find((fk) => fk.field === key)?.parent.name ?? 'parent';
        return new ApiError('unprocessable', 'A reference points at an element that does not exist.', {
          ...(keys.length > 0 && { errors: keys.map((path) => ({ path, message: `names no ${parentOf(path)} element` })) }),
          cause: error,
        });
      }
      case '23502': {
        const keys = fieldsOf(e.column ? [e.column] : []);
        return new ApiError('unprocessable', `The ${resource.name} element is missing a required value.`, {
          ...(keys.length > 0 && { errors: keys.map((path) => ({ path, message: 'is required' })) }),
          cause: error,
        });
      }
      default:
        // 23514 (check), 23P01 (exclusion) and data exceptions (22xxx: a value the column cannot hold).
        if (e.code?.startsWith('23')) {
          return new ApiError('unprocessable', `The ${resource.name} element breaks a constraint of its table.`, { cause: error });
        }
        if (e.code?.startsWith('22')) {
          return new ApiError('unprocessable', `The ${resource.name} element holds a value its table cannot store: ${e.message}.`, {
            cause: error,
          });
        }
        return error;
    }
  };
  const write = async <T>(action: 'write' | 'remove', work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    try {
      return await inTransaction(pool, work);
    } catch (error) {
      throw toApiError(action, error);
    }
  };
  /** The current row, locked until the transaction ends (a concurrent write waits, then sees this one's result), or a 404. */
  const current = async (client: pg.PoolClient, id: Id): Promise<Row> => {
    const row = await find(client, lockById, id);
    if (!row) throw notFound(resource, id);
    return row;
  };
  /** A cursor after a long text value carries the row's key as its "rowid" (integer keys only). */
  const rowidOf = (row: Row) => {
    const key = row[resource.primaryKey.key];
    if (typeof key !== 'number')
      throw new ApiError('badRequest', `Sorting ${resource.name} by long text values cannot be paged on this backend.`);
    return key;
  };

  return {
    get: (id) =>
      reading(
        () => find(pool, byId, id),
        () => undefined,
      ),
    exists: (id) =>
      reading(
        () => rowsOf(pool, existsById, { id: encodedId(id) }).then((rows) => rows.length > 0),
        () => false,
      ),
    list: (query, scope) =>
      reading(async (): Promise<Page> => {
        const after = await positionOf(query, (rowid) => find(pool, byId, rowid));
        const plan = planList(dialect, resource, query, scope, after);
        const rows = cached(listStatements, plan.shape, () =>
          named(
            db
              .select(selection)
              .from(table)
              .where(plan.where())
              .orderBy(...plan.orderBy())
              .limit(plan.limit as never),
          ),
        );
        const page = pageOf(await rowsOf(pool, rows, plan.params), query.limit, toRow);
        let total: number | undefined;
        if (plan.count) {
          const { shape, params, where } = plan.count;
          const counter = cached(countStatements, shape, () => named(db.select({ n: count() }).from(table).where(where())));
          total = Number((await rowsOf(pool, counter, params))[0]?.[0] ?? 0);
        }
        return { ...page, total, rowidOf };
      }),
    create: (row, respond, once) =>
      write('write', async (client) => {
        if (once) {
          // One transaction at a time per key, across every instance: the second waits, then replays.
          await client.query({ ...keys.lock, values: [once.key] });
          const [stored] = await rowsOf(client, keys.find, { key: once.key, since: now() - KEY_TTL_MS });
          if (stored) {
            const [fingerprint, status, headers, body] = stored as [string, number, string, string];
            if (fingerprint !== once.fingerprint) throw reusedKey();
            return { response: { status, headers: JSON.parse(headers), body }, replayed: true };
          }
        }
        const full = rules.forCreate(row);
        const { inserted, statement } = insertFor(full);
        const [created] = await rowsOf(client, statement, valuesOf(inserted, full, columnOf));
        const response = respond(toRow(created as unknown[]));
        if (once) {
          const { key, fingerprint } = once;
          const { status, headers, body } = response;
          await rowsOf(client, keys.save, { key, fingerprint, status, headers: JSON.stringify(headers), body, createdAt: now() });
        }
        return { response, replayed: false };
      }),
    update: (id, change) =>
      write('write', async (client) => {
        const changed = change(await current(client, id));
        const defaults = new Map<string, unknown>();
        for (const field of rules.writable) {
          if (changed[field.key] === undefined && rules.sqlDefaults.has(field.key))
            defaults.set(field.key, await sqlDefaultOf(client, field));
        }
        const next = rules.forUpdate(changed, (field) => defaults.get(field.key));
        const [updated] = await rowsOf(client, updateById, { ...valuesOf(rules.updated, next, columnOf), __id: encodedId(id) });
        return toRow(updated as unknown[]);
      }),
    remove: (id, check) =>
      write('remove', async (client) => {
        check(await current(client, id));
        await rowsOf(client, deleteById, { id: encodedId(id) });
      }),
  };
}

/**
 * The PostgreSQL store of `resources`, whose tables are `tables` (toPgTables of the schema, with
 * the service's own tables under their export names).
 */
export function createPostgresStore(
  { pool }: PostgresHandle,
  resources: Resource[],
  tables: Record<string, PgTable>,
  now: () => number = Date.now,
): Store {
  const db = drizzle({ client: pool });
  const keys = keyStatements(db, tables);
  const byName = new Map(Object.values(tables).map((t) => [getTableConfig(t).name, t]));
  const kinds = new Map(resources.map((r) => [r, createKindStore(pool, db, keys, r, byName.get(r.name) as PgTable, now)]));
  return {
    of: (resource) => kinds.get(resource) as KindStore,
    purgeExpiredKeys: async (batch) => {
      const result = await pool.query({
        name: keys.purge.name,
        text: keys.purge.text,
        values: keys.purge.args({ before: now() - KEY_TTL_MS, batch }),
      });
      return result.rowCount ?? 0;
    },
    flush: () => undefined,
  };
}

/**
 * The key that signs cursors when CURSOR_SECRET is not set: made once and stored in the database
 * (insert-if-absent, then read back), so every instance signs and accepts the same cursors.
 */
export async function readPgCursorKey({ pool }: PostgresHandle, configured: string | undefined): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  await pool.query('INSERT INTO restable_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    CURSOR_SECRET_NAME,
    randomBytes(32).toString('base64url'),
  ]);
  const result = await pool.query('SELECT value FROM restable_secrets WHERE name = $1', [CURSOR_SECRET_NAME]);
  return Buffer.from(result.rows[0].value as string, 'base64url');
}

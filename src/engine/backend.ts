// A database as the app sees it, whichever engine: its store, whether it can serve (/readyz), and the
// key that signs paging cursors. SQLite answers synchronously; PostgreSQL after a round trip.
import type { Config } from '../config.js';
import * as internalSchema from '../db/internal-schema.js';
import type { ApiError } from '../errors.js';
import { onFirstUse } from '../first-use.js';
import type { Resource } from '../model/registry.js';
import { readCursorKey } from '../request/cursor.js';
import { pgSchemaAheadFrom, pgUnavailableFrom } from './postgres/errors.js';
import { PG_MIGRATIONS_FOLDER, pgMigrationStatus } from './postgres/migrate.js';
import { isPostgres, type PostgresHandle, readPgColumnTypes } from './postgres/pool.js';
import type * as PostgresStore from './postgres/store.js';
import { type PgColumnTypes, toPgTables } from './postgres/tables.js';
import { firstNames, missingFrom, pgColumns, sqliteColumns } from './schema-gap.js';
import { type DatabaseHandle, probeWrite, replacedFileCheck } from './sqlite/connection.js';
import { MIGRATIONS_FOLDER, migrationStatus } from './sqlite/migrate.js';
import { createSqliteStore, DAMAGED, schemaAheadFrom, unavailableFrom } from './sqlite/store.js';
import { type MaybePromise, refusals, type Store, then } from './store.js';

export interface Backend {
  store: Store;
  /** False once the database's owner has closed it (timers stop touching it). */
  isOpen(): boolean;
  /** Why the database cannot serve (closed, unreachable, writes failing, migrations pending), or undefined. */
  notReady(): MaybePromise<string | undefined>;
  /** The key that signs cursors (a 503 while the database cannot give it). */
  cursorKey(): Buffer;
  /** Settles once what the backend reads at start (the cursor key) is read, retried on use; rejects when the change feed cannot be set up. */
  ready: Promise<void>;
  /** The 503 an error means (the database unreachable, or unable to write), or undefined. */
  unavailableFrom(error: unknown): ApiError | undefined;
}

export interface BackendOptions {
  schema: Record<string, unknown>;
  resources: Resource[];
  config: Pick<Config, 'cursorSecret'>;
  /** Where this code's migrations for the engine live (for /readyz); the committed folder of the engine by default. */
  migrationsFolder?: string;
}

/** SQLite: one connection, writes group-committed; a write that failed for the disk keeps /readyz at 503 until a probe write succeeds. */
function sqliteBackend(database: DatabaseHandle, { resources, config, migrationsFolder = MIGRATIONS_FOLDER }: BackendOptions): Backend {
  let writeFailure: string | undefined;
  const unavailable = (error: unknown) => {
    const found = unavailableFrom(error);
    // A damaged file is not a failing write (a read finds it as well): /readyz's write probe says nothing of it.
    const cause = found?.cause as (Error & { code?: string }) | undefined;
    if (cause instanceof Error && !DAMAGED.test(cause.code ?? '')) writeFailure = cause.message;
    return found ?? schemaAheadFrom(error);
  };
  const schemaAhead = schemaCheck(resources, () => sqliteColumns(database.sqlite, resources));
  const readKey = onFirstUse(() => readCursorKey(database.db, config.cursorSecret));
  const replaced = replacedFileCheck(database);
  try {
    // Read (on a new database: made and committed) now, never first inside a batch that may roll it back.
    readKey();
  } catch {
    // Read again on first use (a 503 until the database can give it).
  }
  return {
    store: createSqliteStore(database.sqlite, database.db, resources),
    isOpen: () => database.sqlite.open,
    notReady() {
      if (!database.sqlite.open) return 'the database is closed';
      const gone = replaced();
      if (gone) return gone;
      if (writeFailure && probeWrite(database) === undefined) writeFailure = undefined;
      if (writeFailure) return `writes are failing (${writeFailure}); reads still work`;
      return pendingOf(migrationStatus(database, migrationsFolder).pending) ?? schemaAhead();
    },
    cursorKey() {
      try {
        return readKey();
      } catch (error) {
        throw unavailable(error) ?? error;
      }
    },
    ready: Promise.resolve(),
    unavailableFrom: unavailable,
  };
}

/**
 * The PostgreSQL store and its driver (node-postgres, drizzle's node-postgres session: ~8 MB of
 * RSS), loaded only for a PostgreSQL database, and the database's column types (what a column
 * without a declared type is there: src/engine/postgres/tables.ts): await loadPostgresStore(handle) once the
 * migrations are applied, before createApp.
 */
let postgresStore: typeof PostgresStore | undefined;
const columnTypes = new WeakMap<PostgresHandle, PgColumnTypes>();
export async function loadPostgresStore(handle: PostgresHandle): Promise<void> {
  postgresStore ??= await import('./postgres/store.js');
  columnTypes.set(handle, await readPgColumnTypes(handle));
}

/** PostgreSQL: a pool shared by every request; any number of instances may serve one database. */
function postgresBackend(
  handle: PostgresHandle,
  { schema, resources, config, migrationsFolder = PG_MIGRATIONS_FOLDER }: BackendOptions,
): Backend {
  const types = columnTypes.get(handle);
  if (!postgresStore || !types) throw new Error('the PostgreSQL store is not loaded: await loadPostgresStore(handle) before createApp');
  const { createPostgresStore, readPgCursorKey } = postgresStore;
  let key: Buffer | undefined;
  const load = () =>
    readPgCursorKey(handle, config.cursorSecret).then((read) => {
      key = read;
    });
  const store = createPostgresStore(handle, resources, toPgTables({ ...schema, ...internalSchema }, types));
  const schemaAhead = schemaCheck(resources, () => pgColumns(handle.pool));
  return {
    store,
    isOpen: () => !handle.pool.ending,
    async notReady() {
      if (handle.pool.ended) return 'the database pool is closed';
      try {
        return pendingOf((await pgMigrationStatus(handle, migrationsFolder)).pending) ?? (await schemaAhead());
      } catch {
        // The driver's message names hosts and addresses: /readyz is open to anyone, so it says no more.
        return `the database cannot be reached (or no connection of the pool came free within PG_CONNECT_TIMEOUT_MS)`;
      }
    },
    cursorKey() {
      if (key) return key;
      void load().catch(() => undefined);
      throw refusals.unavailable('The database cannot be reached right now; try again later.');
    },
    // The cursor key, and the change feed's tables and triggers (made by the first instance to start).
    // A feed that cannot be set up stops the start: writes would go unrecorded.
    ready: Promise.all([load().catch(() => undefined), store.changes.bounds()]).then(() => undefined),
    unavailableFrom: (error) => pgUnavailableFrom(error) ?? pgSchemaAheadFrom(error),
  };
}

/** /readyz's reason while migrations are pending, else undefined. */
const pendingOf = (pending: string[]) => (pending.length > 0 ? `${pending.length} migration(s) pending: ${pending.join(', ')}` : undefined);

/** How long /readyz trusts a schema check that found everything: a table changed behind the service shows within it. */
const SCHEMA_RECHECK_MS = 5000;

/**
 * /readyz's check that the database holds every table and column of the schema, over a reader of the
 * database's `table.column` names: the reason when it does not (a few named), else undefined. Once
 * everything was there, the database is read again at most every SCHEMA_RECHECK_MS.
 */
function schemaCheck(resources: readonly Resource[], columns: () => MaybePromise<Set<string>>): () => MaybePromise<string | undefined> {
  let fits = false;
  let checkedAt = 0;
  return () => {
    if (fits && performance.now() - checkedAt < SCHEMA_RECHECK_MS) return undefined;
    checkedAt = performance.now();
    return then(columns(), (present) => {
      const missing = missingFrom(resources, present);
      fits = missing.length === 0;
      if (fits) return undefined;
      return `the schema declares what no applied migration made (${firstNames(missing)}): run npm run db:generate, then npm run migrate`;
    });
  };
}

export function createBackend(database: DatabaseHandle | PostgresHandle, options: BackendOptions): Backend {
  return isPostgres(database) ? postgresBackend(database, options) : sqliteBackend(database, options);
}

// Applies the PostgreSQL migrations in migrations/pg (found relative to this module): drizzle's files
// and bookkeeping, under an advisory lock, all pending ones in one transaction; never generates any.
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type pg from 'pg';
import {
  changedSince,
  MigrationError,
  type MigrationStatus,
  type Recorded,
  readJournal,
  refusedStatement,
  refuseUnknown,
  StatementError,
  statusOf,
} from '../sqlite/migrate.js';
import type { PostgresHandle } from './pool.js';

/** The committed PostgreSQL migrations; the same from src/db (tsx) and dist/db (compiled). */
export const PG_MIGRATIONS_FOLDER = fileURLToPath(new URL('../../../migrations/pg', import.meta.url));

/** drizzle's pg migrator keeps its bookkeeping here, so drizzle-kit and drizzle agree with this module. */
const MIGRATIONS_TABLE = '"drizzle"."__drizzle_migrations"';

/** The advisory lock every instance takes to migrate: the ASCII bytes of "restable" as one 64-bit key. */
const LOCK_KEY = '8243121636658801765';

type Queryable = pg.Pool | pg.PoolClient;

/** drizzle's bookkeeping of the migrations the database applied (none before its first). */
async function recordedMigrations(db: Queryable): Promise<Recorded[]> {
  const { rows } = await db.query<{ exists: boolean }>("SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS exists");
  if (!rows[0]?.exists) return [];
  const recorded = await db.query<{ created_at: string | number; hash: string }>(`SELECT created_at, hash FROM ${MIGRATIONS_TABLE}`);
  return recorded.rows.map((row) => ({ when: Number(row.created_at), hash: row.hash }));
}

const appliedMillis = async (db: Queryable) => (await recordedMigrations(db)).map((r) => r.when);

/** The applied migrations whose files changed since they ran (changedSince), changing nothing. */
export async function pgChangedMigrations({ pool }: PostgresHandle, folder = PG_MIGRATIONS_FOLDER): Promise<string[]> {
  return changedSince(await recordedMigrations(pool), folder);
}

/** Lists applied, pending and unknown migrations of `folder`, changing nothing. */
export async function pgMigrationStatus({ pool }: PostgresHandle, folder = PG_MIGRATIONS_FOLDER): Promise<MigrationStatus> {
  return statusOf(await appliedMillis(pool), folder);
}

/** PostgreSQL's message, with its detail when it has one: the detail names what failed (`Key (name)=(Rex) is duplicated.`), as SQLite's message does. */
function reasonOf(error: unknown): string {
  const { detail } = error as { detail?: string };
  return `${(error as Error).message}${detail ? ` (${detail})` : ''}`;
}

/** Runs the pending migrations (those not in `done`) in journal order and records each, in one transaction: all of them or none. */
async function applyPending(
  client: pg.PoolClient,
  folder: string,
  done: ReadonlySet<number>,
  afterApplied?: (client: pg.PoolClient) => Promise<void>,
): Promise<string[]> {
  const tags = new Map(readJournal(folder).map((e) => [e.when, e.tag]));
  const applied: string[] = [];
  await client.query('BEGIN');
  try {
    await client.query('CREATE SCHEMA IF NOT EXISTS "drizzle"');
    await client.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
    for (const migration of readMigrationFiles({ migrationsFolder: folder }).filter((m) => !done.has(m.folderMillis))) {
      const tag = tags.get(migration.folderMillis) ?? String(migration.folderMillis);
      for (const [i, statement] of migration.sql.entries()) {
        if (!statement.trim()) continue;
        try {
          await client.query(statement);
        } catch (error) {
          throw refusedStatement(folder, tag, migration.sql, i, reasonOf(error), error);
        }
      }
      await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES ($1, $2)`, [migration.hash, migration.folderMillis]);
      applied.push(tag);
    }
    if (applied.length > 0) await afterApplied?.(client);
    await client.query('COMMIT');
    return applied;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * Applies every pending migration. Instances starting together queue on an advisory lock and
 * re-read what is applied once they hold it, so each migration runs once. Refuses a database with
 * migrations this code does not know; a failure leaves the database as it was (PostgreSQL's DDL is
 * transactional). No backup is taken: pg_dump is PostgreSQL's tool for that. `afterApplied` runs in the
 * migrations' transaction once some were applied, as applyMigrations's does.
 * @throws {MigrationError} with a one-line message
 */
export async function applyPgMigrations(
  handle: PostgresHandle,
  folder = PG_MIGRATIONS_FOLDER,
  afterApplied?: (client: pg.PoolClient) => Promise<void>,
): Promise<{ applied: string[] }> {
  const client = await handle.pool.connect();
  try {
    // Waiting for another instance's migration, or a long one, is not a request: no statement timeout.
    await client.query('SET statement_timeout = 0');
    await client.query(`SELECT pg_advisory_lock(${LOCK_KEY})`);
    try {
      const done = await appliedMillis(client);
      const status = refuseUnknown(statusOf(done, folder));
      if (status.pending.length === 0) return { applied: [] };
      try {
        return { applied: await applyPending(client, folder, new Set(done), afterApplied) };
      } catch (error) {
        // A statement's refusal names its file and line; one at the commit (a deferred constraint, afterApplied) has no statement to name.
        const reason = error instanceof StatementError ? error.message : reasonOf(error);
        throw new MigrationError(`migration failed, nothing was applied: ${reason}`, { cause: error });
      }
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${LOCK_KEY})`).catch(() => {});
    }
  } finally {
    // Closed rather than pooled: it carries the changed statement_timeout, and closing it frees the lock whatever happened.
    client.release(true);
  }
}

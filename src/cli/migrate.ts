// `npm run migrate`: applies pending migrations to the configured database (PostgreSQL when DATABASE_URL
// is set, else SQLite, backed up first when it holds data) and lists them. `-- --status` changes nothing.

import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { type Config, ConfigError, parseConfig, postgresOptions } from '../config.js';
import * as schema from '../db/schema.js';
import { refuseForeignPostgres, refuseForeignSqlite } from '../engine/adopt.js';
import { installPgOn, installSqlite } from '../engine/changes.js';
import { applyPgMigrations, pgChangedMigrations, pgMigrationStatus } from '../engine/postgres/migrate.js';
import { closePostgres, openPostgres } from '../engine/postgres/pool.js';
import { firstNames, missingFrom, pgColumns, sqliteColumns } from '../engine/schema-gap.js';
import { closeDatabase, DatabaseOpenError, openDatabase } from '../engine/sqlite/connection.js';
import { applyMigrations, changedMigrations, MigrationError, type MigrationStatus, migrationStatus } from '../engine/sqlite/migrate.js';
import { refuseUnwritable } from '../engine/sqlite/writable.js';
import { createRegistry, RegistryError, type Resource } from '../model/registry.js';

/**
 * The schema's kinds, read once (a schema the service cannot serve stops here, in one line): the change
 * feed's triggers are made in the migrations' transaction, so that a service already running records every
 * write to a table a migration made, from its first.
 */
let registered: Resource[] | undefined;
const resources = () => (registered ??= createRegistry(schema).resources);

const list = (tags: string[]) => tags.map((t) => `  ${t}`).join('\n');

function printStatus(label: string, { applied, pending, unknown }: MigrationStatus, changed: string[]): void {
  console.log(`${label}: ${applied.length} applied, ${pending.length} pending${unknown ? `, ${unknown} unknown to this code` : ''}`);
  if (applied.length) console.log(`applied:\n${list(applied)}`);
  if (pending.length) console.log(`pending:\n${list(pending)}`);
  if (changed.length) console.log(`changed since applied (the file differs from the one that ran):\n${list(changed)}`);
}

/**
 * What was applied, then warnings (on stderr), as start-up logs them: what the schema declares that no
 * migration made (never "up to date" then), and the applied migrations edited since they ran (none runs again).
 */
function printApplied(label: string, applied: string[], changed: string[], missing: string[]): void {
  if (applied.length) console.log(`${label}: applied ${applied.length} migration(s):\n${list(applied)}`);
  else if (!missing.length) console.log(`${label}: up to date, nothing to apply`);
  if (missing.length)
    console.error(
      `migrate: warning: the schema declares what no migration made (${firstNames(missing)}): run npm run db:generate, then npm run migrate again`,
    );
  if (changed.length)
    console.error(
      `migrate: warning: ${changed.length} applied migration(s) changed since they ran (the file differs from the one that ran; not run again):\n${list(changed)}`,
    );
}

/**
 * The status of a SQLite file, changing nothing: read-only (opening it as the service does would turn
 * it to WAL), and a file that does not exist yet is reported as having every migration pending.
 */
function sqliteStatus(path: string): void {
  const exists = path !== ':memory:' && existsSync(path);
  const sqlite = exists ? new Database(path, { readonly: true, fileMustExist: true }) : new Database(':memory:');
  try {
    const handle = { sqlite, db: drizzle({ client: sqlite }) };
    printStatus(exists ? path : `${path} (no database yet)`, migrationStatus(handle), changedMigrations(handle));
  } finally {
    sqlite.close();
  }
}

async function migrateSqlite(config: Config, status: boolean): Promise<void> {
  try {
    if (status) return sqliteStatus(config.databasePath);
    refuseForeignSqlite(config.databasePath, resources(), config.databaseAdopt);
    refuseUnwritable(config.databasePath);
    const database = openDatabase(config.databasePath, config.databaseSynchronous);
    try {
      const { applied, backup } = await applyMigrations(database, undefined, undefined, (sqlite) => installSqlite(sqlite, resources()));
      if (backup) console.log(`backed up ${config.databasePath} to ${backup}`);
      printApplied(
        config.databasePath,
        applied,
        changedMigrations(database),
        missingFrom(resources(), sqliteColumns(database.sqlite, resources())),
      );
    } finally {
      closeDatabase(database);
    }
  } catch (error) {
    if (error instanceof MigrationError) throw error;
    // Not a database, a folder, no permission: one line, as the service says it.
    const code = (error as { code?: string }).code ?? '';
    if (error instanceof DatabaseOpenError || code.startsWith('SQLITE_')) {
      throw new MigrationError(
        error instanceof DatabaseOpenError ? error.message : `cannot use the database ${config.databasePath}: ${(error as Error).message}`,
      );
    }
    throw error;
  }
}

async function migratePostgres(url: string, config: Config, status: boolean): Promise<void> {
  const database = openPostgres(url, postgresOptions(config));
  try {
    if (status) return printStatus(database.url, await pgMigrationStatus(database), await pgChangedMigrations(database));
    await refuseForeignPostgres(database, resources(), config.databaseAdopt);
    const { applied } = await applyPgMigrations(database, undefined, (client) => installPgOn(client, resources()));
    printApplied(database.url, applied, await pgChangedMigrations(database), missingFrom(resources(), await pgColumns(database.pool)));
  } catch (error) {
    if (error instanceof MigrationError) throw error;
    // The server is unreachable, or refuses the login: one line, as for a bad configuration.
    throw new MigrationError(`cannot use the PostgreSQL database ${database.url}: ${(error as Error).message}`);
  } finally {
    await closePostgres(database);
  }
}

try {
  const { values } = parseArgs({ options: { status: { type: 'boolean', default: false } } });
  const config = parseConfig();
  if (!values.status) resources();
  if (config.databaseUrl) await migratePostgres(config.databaseUrl, config, values.status);
  else await migrateSqlite(config, values.status);
} catch (error) {
  const badArgument = (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS');
  if (!(error instanceof ConfigError || error instanceof MigrationError || error instanceof RegistryError || badArgument)) throw error;
  console.error(`migrate: ${(error as Error).message}`);
  process.exitCode = 1;
}

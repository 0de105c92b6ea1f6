// `npm run migrate`: applies pending migrations to the configured database (PostgreSQL when DATABASE_URL
// is set, else SQLite, backed up first when it holds data) and lists them. `-- --status` changes nothing.
import { parseArgs } from 'node:util';
import { type Config, ConfigError, parseConfig, postgresOptions } from '../config.js';
import { closeDatabase, openDatabase } from '../db/client.js';
import { applyMigrations, MigrationError, type MigrationStatus, migrationStatus } from '../db/migrate.js';
import { applyPgMigrations, pgMigrationStatus } from '../db/pg-migrate.js';
import { closePostgres, openPostgres } from '../db/postgres.js';

const list = (tags: string[]) => tags.map((t) => `  ${t}`).join('\n');

function printStatus(label: string, { applied, pending, unknown }: MigrationStatus): void {
  console.log(`${label}: ${applied.length} applied, ${pending.length} pending${unknown ? `, ${unknown} unknown to this code` : ''}`);
  if (applied.length) console.log(`applied:\n${list(applied)}`);
  if (pending.length) console.log(`pending:\n${list(pending)}`);
}

function printApplied(label: string, applied: string[]): void {
  console.log(
    applied.length ? `${label}: applied ${applied.length} migration(s):\n${list(applied)}` : `${label}: up to date, nothing to apply`,
  );
}

async function migrateSqlite(config: Config, status: boolean): Promise<void> {
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  try {
    if (status) return printStatus(config.databasePath, migrationStatus(database));
    const { applied, backup } = await applyMigrations(database);
    if (backup) console.log(`backed up ${config.databasePath} to ${backup}`);
    printApplied(config.databasePath, applied);
  } finally {
    closeDatabase(database);
  }
}

async function migratePostgres(url: string, config: Config, status: boolean): Promise<void> {
  const database = openPostgres(url, postgresOptions(config));
  try {
    if (status) return printStatus(database.url, await pgMigrationStatus(database));
    printApplied(database.url, (await applyPgMigrations(database)).applied);
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
  if (config.databaseUrl) await migratePostgres(config.databaseUrl, config, values.status);
  else await migrateSqlite(config, values.status);
} catch (error) {
  const badArgument = (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS');
  if (!(error instanceof ConfigError || error instanceof MigrationError || badArgument)) throw error;
  console.error(`migrate: ${(error as Error).message}`);
  process.exitCode = 1;
}

// `npm run migrate`: applies pending migrations to the configured database and lists them
// (backing up a database that holds data first). `npm run migrate -- --status` changes nothing.
import { parseArgs } from 'node:util';
import { ConfigError, parseConfig } from '../config.js';
import { closeDatabase, openDatabase } from '../db/client.js';
import { applyMigrations, MigrationError, migrationStatus } from '../db/migrate.js';

const list = (tags: string[]) => tags.map((t) => `  ${t}`).join('\n');

try {
  const { values } = parseArgs({ options: { status: { type: 'boolean', default: false } } });
  const config = parseConfig();
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  try {
    if (values.status) {
      const { applied, pending, unknown } = migrationStatus(database);
      console.log(
        `${config.databasePath}: ${applied.length} applied, ${pending.length} pending${unknown ? `, ${unknown} unknown to this code` : ''}`,
      );
      if (applied.length) console.log(`applied:\n${list(applied)}`);
      if (pending.length) console.log(`pending:\n${list(pending)}`);
    } else {
      const { applied, backup } = await applyMigrations(database);
      if (backup) console.log(`backed up ${config.databasePath} to ${backup}`);
      console.log(
        applied.length
          ? `${config.databasePath}: applied ${applied.length} migration(s):\n${list(applied)}`
          : `${config.databasePath}: up to date, nothing to apply`,
      );
    }
  } finally {
    closeDatabase(database);
  }
} catch (error) {
  const badArgument = (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS');
  if (!(error instanceof ConfigError || error instanceof MigrationError || badArgument)) throw error;
  console.error(`migrate: ${(error as Error).message}`);
  process.exitCode = 1;
}

// `npm run migrate`: applies pending migrations to the configured database and lists them.
// It shares the migrator with start-up; it never generates migrations (drizzle-kit does).
import { parseConfig } from '../config.js';
import { closeDatabase, openDatabase } from '../db/client.js';
import { applyMigrations } from '../db/migrate.js';

const config = parseConfig();
const database = openDatabase(config.databasePath);
try {
  const applied = applyMigrations(database);
  if (applied.length === 0) console.log(`${config.databasePath}: up to date, nothing to apply`);
  else console.log(`${config.databasePath}: applied ${applied.length} migration(s):\n${applied.map((t) => `  ${t}`).join('\n')}`);
} finally {
  closeDatabase(database);
}

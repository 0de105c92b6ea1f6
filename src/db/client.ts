// Opens the SQLite file with the pragmas the service relies on, and closes it cleanly.
// It owns no global handle: callers keep what openDatabase returns and pass it on.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { type BetterSQLite3Database, drizzle } from 'drizzle-orm/better-sqlite3';

export type Db = BetterSQLite3Database;

export interface DatabaseHandle {
  /** The raw better-sqlite3 connection (pragmas, backups, `open`). */
  sqlite: Database.Database;
  /** The drizzle query builder over the same connection. */
  db: Db;
}

/** How long a writer waits for another connection's lock before SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

/** Opens (creating if needed) the database file with WAL, foreign keys and a busy timeout. */
export function openDatabase(path: string): DatabaseHandle {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new Database(path, { timeout: BUSY_TIMEOUT_MS });
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  return { sqlite, db: drizzle({ client: sqlite }) };
}

/** Checkpoints the WAL into the main file and closes the connection; safe to call twice. */
export function closeDatabase({ sqlite }: DatabaseHandle): void {
  if (!sqlite.open) return;
  sqlite.pragma('wal_checkpoint(TRUNCATE)');
  sqlite.close();
}

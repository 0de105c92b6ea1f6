// Applies the drizzle-kit migrations in migrations/ (found relative to this module, not the cwd)
// and reports which were applied and which are pending; it never edits or generates migrations.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type { DatabaseHandle } from './client.js';

/** The committed migrations folder; the same from src/db (tsx) and dist/db (compiled). */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations', import.meta.url));

const MIGRATIONS_TABLE = '__drizzle_migrations';

export interface MigrationStatus {
  applied: string[];
  pending: string[];
}

interface JournalEntry {
  tag: string;
  when: number;
}

function readJournal(folder: string): JournalEntry[] {
  const journal = JSON.parse(readFileSync(`${folder}/meta/_journal.json`, 'utf8')) as { entries: JournalEntry[] };
  return journal.entries;
}

function lastAppliedMillis(sqlite: Database.Database): number {
  const exists = sqlite.prepare('SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?').get('table', MIGRATIONS_TABLE);
  if (!exists) return Number.NEGATIVE_INFINITY;
  const row = sqlite.prepare(`SELECT MAX(created_at) AS last FROM ${MIGRATIONS_TABLE}`).get() as { last: number | null };
  return row.last === null ? Number.NEGATIVE_INFINITY : Number(row.last);
}

/** Lists the migrations of `folder` that the database has and has not applied, without changing anything. */
export function migrationStatus({ sqlite }: DatabaseHandle, folder = MIGRATIONS_FOLDER): MigrationStatus {
  const last = lastAppliedMillis(sqlite);
  const entries = readJournal(folder);
  return {
    applied: entries.filter((e) => e.when <= last).map((e) => e.tag),
    pending: entries.filter((e) => e.when > last).map((e) => e.tag),
  };
}

/** Applies every pending migration in one transaction and returns the tags it applied. */
export function applyMigrations(handle: DatabaseHandle, folder = MIGRATIONS_FOLDER): string[] {
  readMigrationFiles({ migrationsFolder: folder }); // fails early, before any change, on a missing .sql file
  const { pending } = migrationStatus(handle, folder);
  if (pending.length > 0) migrate(handle.db, { migrationsFolder: folder, migrationsTable: MIGRATIONS_TABLE });
  return pending;
}

// Applies the drizzle-kit migrations in migrations/ (found relative to this module, not the cwd): drizzle's files and
// bookkeeping table, in one IMMEDIATE transaction whose end checks what a table rebuild can break; never generates any.
import { existsSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { restoreSqliteSearch } from '../../db/search.js';
import { ident } from '../quote.js';
import { BackupCheckError, backupDatabase, defaultBackupPath } from './backup.js';
import type { DatabaseHandle } from './connection.js';

/** The committed migrations folder; the same from src/db (tsx) and dist/db (compiled). */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../../migrations', import.meta.url));

/** drizzle's own bookkeeping table, so drizzle-kit and drizzle's migrator agree with this one. */
const MIGRATIONS_TABLE = '__drizzle_migrations';

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  /** Migrations the database has applied that this code does not know (a downgrade). */
  unknown: number;
}

/** The database cannot be migrated by this code; the message is one line for the operator. */
export class MigrationError extends Error {
  override name = 'MigrationError';
}

interface JournalEntry {
  tag: string;
  when: number;
}

/** drizzle-kit writes this between a migration's statements; drizzle's readMigrationFiles splits its files on it. */
const BREAKPOINT = '--> statement-breakpoint';

/** How long a statement may be in a one-line message before it is cut. */
const STATEMENT_SHOWN = 100;

/** A path as a person types it here: relative to the working directory when it is inside it. */
export function shownPath(path: string): string {
  const inside = relative(process.cwd(), path);
  return inside && !inside.startsWith('..') && !isAbsolute(inside) ? inside : path;
}

/** A statement on one line (its runs of white space made one space), cut to `length` characters. */
export function shortened(statement: string, length = STATEMENT_SHOWN): string {
  const line = statement.trim().replace(/\s+/g, ' ');
  return line.length > length ? `${line.slice(0, length - 1)}…` : line;
}

/** A statement of a migration file that the database refused: the file, where the statement starts, its text and the database's reason. */
export class StatementError extends Error {
  override name = 'StatementError';
  constructor(
    readonly file: string,
    readonly line: number,
    readonly statement: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`${shownPath(file)}:${line} (${shortened(statement)}): ${reason}`, options);
  }
}

/**
 * The StatementError for the `index`th of the statements (`chunks`, as readMigrationFiles split them) of
 * migration `tag` in `folder`: its line is found from the chunks, which joined again are the file.
 */
export function refusedStatement(
  folder: string,
  tag: string,
  chunks: string[],
  index: number,
  reason: string,
  cause: unknown,
): StatementError {
  const before = chunks.slice(0, index).join(BREAKPOINT) + (index > 0 ? BREAKPOINT : '');
  const chunk = chunks[index] ?? '';
  const leading = chunk.slice(0, chunk.length - chunk.trimStart().length);
  const line = (before + leading).split('\n').length;
  return new StatementError(join(folder, `${tag}.sql`), line, chunk.trim(), reason, { cause });
}

/** The migrations of a drizzle-kit folder, oldest first (either engine's). */
export function readJournal(folder: string): JournalEntry[] {
  return (JSON.parse(readFileSync(`${folder}/meta/_journal.json`, 'utf8')) as { entries: JournalEntry[] }).entries;
}

/**
 * What `done` (the `when` of each applied migration, from drizzle's bookkeeping) means for the journal of
 * `folder`: a migration is applied when the database recorded it, wherever it sits in the journal (one
 * merged from a branch after a newer one ran is pending, not taken for applied because it is older).
 */
export function statusOf(done: number[], folder: string): MigrationStatus {
  const recorded = new Set(done);
  const entries = readJournal(folder);
  const known = new Set(entries.map((e) => e.when));
  return {
    applied: entries.filter((e) => recorded.has(e.when)).map((e) => e.tag),
    pending: entries.filter((e) => !recorded.has(e.when)).map((e) => e.tag),
    unknown: done.filter((when) => !known.has(when)).length,
  };
}

/** A migration as the database recorded it: its journal `when`, and the sha256 of its file when it ran. */
export interface Recorded {
  when: number;
  hash: string;
}

/** drizzle's bookkeeping of the migrations the database applied (none before its first). */
function recordedMigrations(sqlite: Database.Database): Recorded[] {
  const exists = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(MIGRATIONS_TABLE);
  if (!exists) return [];
  const rows = sqlite.prepare(`SELECT created_at, hash FROM ${MIGRATIONS_TABLE}`).raw().all() as [number | string, string][];
  return rows.map(([when, hash]) => ({ when: Number(when), hash }));
}

const appliedMillis = (sqlite: Database.Database) => recordedMigrations(sqlite).map((r) => r.when);

/** Lists applied, pending and unknown migrations of `folder`, changing nothing. */
export function migrationStatus({ sqlite }: DatabaseHandle, folder = MIGRATIONS_FOLDER): MigrationStatus {
  return statusOf(appliedMillis(sqlite), folder);
}

/**
 * The applied migrations of `folder` whose file changed after they ran (its sha256 is not the one
 * recorded): the database does not hold what those files now say, and one migrated from them would differ.
 */
export function changedSince(recorded: Recorded[], folder: string): string[] {
  const hashes = new Map(recorded.map((r) => [r.when, r.hash]));
  const tags = new Map(readJournal(folder).map((e) => [e.when, e.tag]));
  return readMigrationFiles({ migrationsFolder: folder })
    .filter((m) => hashes.has(m.folderMillis) && hashes.get(m.folderMillis) !== m.hash)
    .map((m) => tags.get(m.folderMillis) ?? String(m.folderMillis));
}

/** The applied migrations whose files changed since they ran (changedSince), changing nothing. */
export function changedMigrations({ sqlite }: DatabaseHandle, folder = MIGRATIONS_FOLDER): string[] {
  return changedSince(recordedMigrations(sqlite), folder);
}

/**
 * The status, unless the database holds migrations this code does not know (a newer version migrated it).
 * @throws {MigrationError} then: a downgrade is refused on either engine
 */
export function refuseUnknown(status: MigrationStatus): MigrationStatus {
  if (status.unknown === 0) return status;
  throw new MigrationError(
    `the database has ${status.unknown} migration(s) this code does not know (it was migrated by a newer version); ` +
      'refusing to start: run that version, or restore a backup',
  );
}

function hasData(sqlite: Database.Database): boolean {
  const tables = sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    .pluck()
    .all() as string[];
  return tables.some((t) => sqlite.prepare(`SELECT 1 FROM ${ident(t)} LIMIT 1`).get() !== undefined);
}

/**
 * The rows that reference nothing (`PRAGMA foreign_key_check`, one table at a time), each named by its
 * table, its parent and the values of its foreign key (its rowid changes when a migration rebuilds the
 * table; those values do not), counted. A table whose foreign keys SQLite cannot check (one names a parent
 * column that is no key: "foreign key mismatch") is left out: that is the database's own defect.
 */
function danglingRows(sqlite: Database.Database): Map<string, number> {
  const rows = new Map<string, number>();
  const tables = sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    .pluck()
    .all() as string[];
  for (const table of tables) {
    let found: { rowid: number | null; parent: string; fkid: number }[];
    try {
      found = sqlite.pragma(`foreign_key_check(${ident(table)})`) as typeof found;
    } catch {
      continue;
    }
    if (found.length === 0) continue;
    const columns = new Map<number, string[]>();
    for (const { id, from } of sqlite.pragma(`foreign_key_list(${ident(table)})`) as { id: number; from: string }[]) {
      columns.set(id, [...(columns.get(id) ?? []), from]);
    }
    for (const { rowid, parent, fkid } of found) {
      const names = columns.get(fkid) ?? [];
      // A WITHOUT ROWID table has no rowid to read its values by: its rows are told apart by count alone.
      const values =
        rowid === null
          ? null
          : sqlite
              .prepare(`SELECT ${names.map(ident).join(', ')} FROM ${ident(table)} WHERE rowid = ?`)
              .raw()
              .get(rowid);
      const key = JSON.stringify([table, parent, names, values]);
      rows.set(key, (rows.get(key) ?? 0) + 1);
    }
  }
  return rows;
}

/**
 * Refuses what the migrations left referencing nothing that did not before them (rows that referenced
 * nothing already, in a file written with foreign keys off, are the data's own).
 */
function refuseNewDangling(before: Map<string, number>, after: Map<string, number>): void {
  let added = 0;
  let first: string | undefined;
  for (const [key, count] of after) {
    const more = count - (before.get(key) ?? 0);
    if (more <= 0) continue;
    added += more;
    const [table, parent, names, values] = JSON.parse(key) as [string, string, string[], unknown[] | null];
    const named = values ? names.map((name, i) => `${name} ${JSON.stringify(values[i])}`).join(', ') : names.join(', ');
    first ??= `a row of ${table} with ${named}, which names no ${parent}`;
  }
  if (added > 0) throw new Error(`${added} row(s) would reference nothing (the first: ${first})`);
}

/** AUTOINCREMENT's high-water marks (`sqlite_sequence`), by table: the ids a table has ever handed out. */
function sequences(sqlite: Database.Database): Map<string, number> {
  const exists = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'").get();
  if (!exists) return new Map();
  return new Map(sqlite.prepare('SELECT name, seq FROM sqlite_sequence').raw().all() as [string, number][]);
}

/**
 * Puts back the high-water marks a rebuild lowered: the copy of a table into a new one starts its mark at
 * the largest id left, so an id deleted before the migration would be handed out again (and the change
 * feed would report a second `create` of it). Only for tables that are still there with AUTOINCREMENT.
 */
function keepSequences(sqlite: Database.Database, before: Map<string, number>): void {
  const after = sequences(sqlite);
  const autoincrement = sqlite
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? AND sql LIKE '%AUTOINCREMENT%'")
    .pluck();
  for (const [table, seq] of before) {
    if ((after.get(table) ?? -1) >= seq || !autoincrement.get(table)) continue;
    sqlite.prepare('DELETE FROM sqlite_sequence WHERE name = ?').run(table);
    sqlite.prepare('INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)').run(table, seq);
  }
}

/**
 * Applies the pending migrations in journal order, all or none, inside one IMMEDIATE transaction that
 * re-reads what is applied under the write lock, so processes starting together migrate the file exactly once.
 *
 * Foreign keys are not enforced while they run, and checked whole before the commit: drizzle-kit changes a
 * column by copying its table into a new one and dropping the old (the "12 steps" of SQLite's ALTER TABLE
 * page), and its own `PRAGMA foreign_keys=OFF` is a no-op inside a transaction, so that drop would delete the
 * children of ON DELETE CASCADE, null those of SET NULL, and fail on the others. A migration that leaves a
 * reference dangling is refused by the check instead (refuseNewDangling). The rebuild also drops the table's
 * triggers: the search index's are made again (restoreSqliteSearch), the change feed's by `afterApplied`.
 */
function applyPending(sqlite: Database.Database, folder: string, afterApplied?: (sqlite: Database.Database) => void): string[] {
  const files = readMigrationFiles({ migrationsFolder: folder });
  const tags = new Map(readJournal(folder).map((e) => [e.when, e.tag]));
  const enforced = sqlite.pragma('foreign_keys', { simple: true }) === 1;
  sqlite.pragma('foreign_keys = OFF');
  try {
    return sqlite
      .transaction(() => {
        sqlite.exec(`CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
        const done = new Set(appliedMillis(sqlite));
        const pending = files.filter((m) => !done.has(m.folderMillis));
        if (pending.length === 0) return [];
        const dangling = danglingRows(sqlite);
        const marks = sequences(sqlite);
        const record = sqlite.prepare(`INSERT INTO "${MIGRATIONS_TABLE}" ("hash", "created_at") VALUES (?, ?)`);
        const applied: string[] = [];
        for (const migration of pending) {
          const tag = tags.get(migration.folderMillis) ?? String(migration.folderMillis);
          migration.sql.forEach((statement, i) => {
            if (!statement.trim()) return;
            try {
              sqlite.exec(statement);
            } catch (error) {
              throw refusedStatement(folder, tag, migration.sql, i, (error as Error).message, error);
            }
          });
          record.run(migration.hash, migration.folderMillis);
          applied.push(tag);
        }
        refuseNewDangling(dangling, danglingRows(sqlite));
        keepSequences(sqlite, marks);
        restoreSqliteSearch(sqlite);
        afterApplied?.(sqlite);
        return applied;
      })
      .immediate();
  } finally {
    if (enforced) sqlite.pragma('foreign_keys = ON');
  }
}

export interface MigrateResult {
  applied: string[];
  /** The online backup taken first, when the database already held data. */
  backup?: string;
}

/**
 * Applies every pending migration. Refuses a database with migrations this code does not know;
 * backs up a database that holds data first; a failure leaves the database as it was.
 * `afterApplied` runs in the same transaction once some were applied (the change feed's triggers on the
 * tables they made: src/engine/changes.ts), so that no write to a new table goes unrecorded.
 * @throws {MigrationError} with a one-line message
 */
export async function applyMigrations(
  handle: DatabaseHandle,
  folder = MIGRATIONS_FOLDER,
  backupTo?: string,
  afterApplied?: (sqlite: Database.Database) => void,
): Promise<MigrateResult> {
  const status = refuseUnknown(migrationStatus(handle, folder));
  if (status.pending.length === 0) return { applied: [] };
  const { sqlite } = handle;
  const destination = backupTo ?? defaultBackupPath(sqlite.name, `before-${status.pending[0]}`);
  // A backups/ folder made for this backup is not left behind by a migration that did not happen (rmdir takes only an empty one).
  const madeFolder = !existsSync(dirname(destination));
  const dropEmptyFolder = () => {
    if (!madeFolder) return;
    try {
      rmdirSync(dirname(destination));
    } catch {}
  };
  const backup = hasData(sqlite)
    ? await backupDatabase(sqlite, destination).catch((error) => {
        dropEmptyFolder();
        // A damaged database is not migrated: its backup would not restore it.
        throw error instanceof BackupCheckError ? new MigrationError(`not migrating: ${error.message}`) : error;
      })
    : undefined;
  try {
    return { applied: applyPending(sqlite, folder, afterApplied), backup };
  } catch (error) {
    // Nothing was applied: the database is the backup's twin. Removed, so that a service restarted in a loop on a
    // migration that cannot apply does not fill the disk with copies.
    if (backup) {
      rmSync(backup, { force: true });
      dropEmptyFolder();
    }
    throw new MigrationError(`migration failed, nothing was applied: ${(error as Error).message}`, { cause: error });
  }
}

// Opens the SQLite file with the pragmas the service relies on, and closes it cleanly.
// It owns no global handle: callers keep what openDatabase returns and pass it on.
import { existsSync, mkdirSync, statfsSync, statSync } from 'node:fs';
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
export const BUSY_TIMEOUT_MS = 5000;
/** After a checkpoint the WAL file is truncated back to this size, so it cannot stay huge. */
const JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024;

export type Synchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

/**
 * Switches the file to WAL (a setting the file keeps). Two processes opening one new file at once
 * both try: the switch needs a lock that SQLite does not wait for, so a busy answer is retried
 * for up to the busy timeout, and a file already in WAL is left alone.
 */
function useWal(sqlite: Database.Database): void {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      if (sqlite.pragma('journal_mode', { simple: true }) !== 'wal') sqlite.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw error;
      Atomics.wait(pause, 0, 0, 10); // a synchronous pause: opening happens before serving
    }
  }
}

/**
 * Makes `dir` and its missing parents one level at a time: node's own `recursive` mkdirSync never
 * returns for some paths (under /proc, it loops), where a single mkdir fails at once.
 */
export function makeDirectory(dir: string): void {
  const missing: string[] = [];
  for (let at = dir; !existsSync(at) && dirname(at) !== at; at = dirname(at)) missing.push(at);
  for (const level of missing.reverse()) mkdirSync(level);
}

/**
 * Opens (creating if needed) the database file with WAL, foreign keys, a busy timeout, a bounded
 * WAL and the given synchronous level (FULL: a committed write survives power loss; NORMAL: it
 * survives a crash of the process, but the last commits may be lost if the machine loses power).
 * @see https://www.sqlite.org/pragma.html#pragma_synchronous
 */
export function openDatabase(path: string, synchronous: Synchronous = 'FULL'): DatabaseHandle {
  let sqlite: Database.Database | undefined;
  try {
    if (path !== ':memory:') makeDirectory(dirname(path));
    sqlite = new Database(path, { timeout: BUSY_TIMEOUT_MS });
    useWal(sqlite);
    sqlite.pragma(`synchronous = ${synchronous}`);
    sqlite.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
    sqlite.pragma('foreign_keys = ON');
    return { sqlite, db: drizzle({ client: sqlite }) };
  } catch (error) {
    sqlite?.close();
    throw new DatabaseOpenError(`cannot open the database ${path}: ${(error as Error).message}`, { cause: error });
  }
}

/** The database file cannot be created or opened (a folder, not SQLite, no permission); one line for the user. */
export class DatabaseOpenError extends Error {
  override name = 'DatabaseOpenError';
}

/**
 * The free space below which a database that has failed a write for its disk is not taken for
 * writable again: a one-page probe can fit in a WAL's reusable space while real writes need more.
 */
export const MIN_FREE_BYTES = 1024 * 1024;

/**
 * Learns whether the file takes writes again after a full disk or a read-only mount: at least
 * MIN_FREE_BYTES free on its file system, and a tiny committed write (rewriting the header's
 * user_version). Returns why not, or undefined. It tries the write lock once: while another
 * connection holds it, the answer is "locked", not a blocked event loop.
 */
export function probeWrite({ sqlite }: DatabaseHandle): string | undefined {
  try {
    if (sqlite.name !== ':memory:') {
      const { bavail, bsize } = statfsSync(dirname(sqlite.name));
      const free = bavail * bsize;
      if (free < MIN_FREE_BYTES) return `the disk holding the database has ${free} bytes free`;
    }
    sqlite.pragma('busy_timeout = 0');
    const version = sqlite.pragma('user_version', { simple: true }) as number;
    sqlite.pragma(`user_version = ${version}`);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  } finally {
    if (sqlite.open) sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

/**
 * Whether the file at the open database's path is still the one opened (same device and inode): a file
 * removed or replaced under the service (`rm`, a copy over it) leaves it writing to the unlinked one, which
 * no other process sees and which is gone at its next start. Read once now; the checker says what happened
 * (undefined: still the same file, or a database in memory), without the path: /readyz sends it to anyone.
 */
export function replacedFileCheck({ sqlite }: DatabaseHandle): () => string | undefined {
  if (sqlite.memory) return () => undefined;
  const path = sqlite.name;
  const opened = statSync(path, { bigint: true });
  return () => {
    const now = statSync(path, { bigint: true, throwIfNoEntry: false });
    if (!now) return 'the database file (DATABASE_PATH) was removed since the service opened it; restart the service';
    if (now.ino !== opened.ino || now.dev !== opened.dev) {
      return 'the database file (DATABASE_PATH) was replaced since the service opened it; restart the service';
    }
    return undefined;
  };
}

/**
 * Checkpoints the WAL into the main file and closes the connection; safe to call twice. Returns why the
 * checkpoint could not be made for want of room or permission (a full disk, a read-only file), or
 * undefined; other failures are thrown. The connection is closed either way, and a WAL left behind loses
 * nothing (its commits are durable, and the next open replays it).
 */
export function closeDatabase({ sqlite }: DatabaseHandle): string | undefined {
  if (!sqlite.open) return undefined;
  try {
    sqlite.pragma('wal_checkpoint(TRUNCATE)');
    return undefined;
  } catch (error) {
    // No room, or no permission, to write the main file: the WAL keeps every commit. Anything else is a fault.
    const code = (error as { code?: string }).code ?? '';
    if (code.startsWith('SQLITE_FULL') || code.startsWith('SQLITE_READONLY')) return (error as Error).message;
    throw error;
  } finally {
    sqlite.close();
  }
}

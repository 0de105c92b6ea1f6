// Online, consistent copies of the SQLite file with better-sqlite3's backup API (safe while the
// service is writing), and where they go by default: a backups/ folder beside the database.
import { renameSync, rmSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import Database from 'better-sqlite3';
import { renumberBackupChanges } from '../changes.js';
import { makeDirectory } from './connection.js';

export interface BackupProgress {
  totalPages: number;
  remainingPages: number;
}

/** The default backup path: `<db dir>/backups/<db name>-<label>-<timestamp>.db`. */
export function defaultBackupPath(databasePath: string, label = 'backup'): string {
  const name = basename(databasePath, extname(databasePath));
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  return join(dirname(databasePath), 'backups', `${name}-${label}-${stamp}.db`);
}

/** A copy that failed SQLite's integrity check: not put in place. */
export class BackupCheckError extends Error {}

/**
 * Copies the open database to `destination` page by page while it stays usable, then makes the
 * copy one self-contained file (rollback journal, not WAL), ready to be copied or restored, its
 * change feed renumbered so that a restore sends the feed's readers back to a full read. The copy
 * is made beside it, checked (`PRAGMA quick_check`) and renamed into place once whole and sound: a
 * file already there (whatever it holds) is replaced, and a failed backup leaves it as it was.
 * @throws {BackupCheckError} when the copy (so the database) fails the check
 */
export async function backupDatabase(
  sqlite: Database.Database,
  destination: string,
  onProgress?: (p: BackupProgress) => void,
): Promise<string> {
  makeDirectory(dirname(destination));
  const partial = `${destination}.partial-${process.pid}`;
  try {
    await sqlite.backup(partial, {
      progress: (info) => {
        onProgress?.(info);
        return 256; // pages per step: small steps keep the source responsive to other connections
      },
    });
    const copy = new Database(partial);
    try {
      copy.pragma('journal_mode = DELETE');
      renumberBackupChanges(copy);
      // One row per problem, or rows of several lines under a `*** in database main ***` heading.
      const rows = copy.pragma('quick_check') as { quick_check: string }[];
      const problems = rows.flatMap((row) => row.quick_check.split('\n')).filter((line) => line !== '' && !line.startsWith('***'));
      if (problems[0] !== 'ok') {
        throw new BackupCheckError(
          `the copy of the database failed its integrity check (${problems.length} problem(s), the first: ${problems[0]}); nothing was written to ${destination}`,
        );
      }
    } finally {
      copy.close();
    }
    renameSync(partial, destination);
  } finally {
    rmSync(partial, { force: true });
  }
  return destination;
}

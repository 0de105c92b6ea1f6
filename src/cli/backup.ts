// `npm run backup -- [file]`: an online, consistent copy of the configured database, safe while the
// service is serving; a progress bar on a terminal; the copy is integrity-checked before it counts.
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { SingleBar } from 'cli-progress';
import { ConfigError, parseConfig } from '../config.js';
import { BackupCheckError, type BackupProgress, backupDatabase, defaultBackupPath } from '../engine/sqlite/backup.js';

/** A path as the file system resolves it: symbolic links followed, also of the folder of a file not there yet. */
function canonical(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    // not there (yet): its folder's links followed, else the path as written
  }
  try {
    return join(realpathSync(dirname(path)), basename(path));
  } catch {
    return resolve(path);
  }
}

/**
 * Whether `destination` is the database at `database` or one of its files (its WAL, shared memory or
 * journal, beside the file the path resolves to): by path once links are followed, or by inode.
 */
function isDatabaseFile(destination: string, database: string): boolean {
  const target = canonical(destination);
  const real = canonical(database);
  if (['', '-wal', '-shm', '-journal'].some((suffix) => target === `${real}${suffix}`)) return true;
  try {
    const [x, y] = [statSync(destination), statSync(database)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

try {
  const { positionals } = parseArgs({ allowPositionals: true });
  const config = parseConfig();
  // A PostgreSQL database is backed up by PostgreSQL's tools; the SQLite file beside it is not what is served.
  if (config.databaseUrl) throw new ConfigError('DATABASE_URL is set: back PostgreSQL up with pg_dump; npm run backup copies SQLite files');
  if (positionals.length > 1) throw new ConfigError('usage: npm run backup -- [file]');
  if (!existsSync(config.databasePath)) throw new ConfigError(`there is no database at ${config.databasePath} to back up`);
  const destination = positionals[0] ?? defaultBackupPath(config.databasePath);
  // Renamed into place, a copy over the database (or its WAL) would swap the file under a running service,
  // whose later writes would go to the unlinked one and be lost.
  if (isDatabaseFile(destination, config.databasePath))
    throw new ConfigError(`${destination} is the database itself (or one of its files): back it up to another file`);
  if (existsSync(destination) && statSync(destination).isDirectory()) {
    const named = join(destination, basename(defaultBackupPath(config.databasePath)));
    throw new ConfigError(`${destination} is a directory: name the file to write, such as ${named}`);
  }
  const source = new Database(config.databasePath, { readonly: true, fileMustExist: true, timeout: 5000 });
  const bar = process.stderr.isTTY
    ? new SingleBar({ format: 'backup [{bar}] {percentage}% | {value}/{total} pages', stream: process.stderr })
    : undefined;
  const progress = (p: BackupProgress) => {
    if (!bar) return;
    if (bar.getTotal() !== p.totalPages) bar.start(p.totalPages, 0);
    bar.update(p.totalPages - p.remainingPages);
  };
  try {
    await backupDatabase(source, destination, progress);
    bar?.update(bar.getTotal()); // the last step reports no progress of its own
  } finally {
    bar?.stop();
    source.close();
  }
  const megabytes = (statSync(destination).size / 1024 / 1024).toFixed(1);
  console.log(`backed up ${config.databasePath} to ${destination} (${megabytes} MB, integrity ok)`);
} catch (error) {
  const message = (error as Error).message;
  const { code, syscall } = error as { code?: string; syscall?: string };
  // A usage, configuration, database or file system refusal (EEXIST, ENOTDIR, EACCES…: node's errors name their syscall).
  const known =
    error instanceof ConfigError ||
    error instanceof BackupCheckError ||
    code?.startsWith?.('SQLITE_') ||
    code?.startsWith?.('ERR_PARSE_ARGS') ||
    syscall !== undefined;
  if (!known) throw error;
  console.error(`backup: ${message}`);
  process.exitCode = 1;
}

// Whether this process may write the SQLite file and its folder (SQLite makes -wal, -shm and journal files
// beside the file), checked before opening it, and the one line that says who must be able to and how.
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseOpenError } from './connection.js';

/** The nearest folder of `path` that exists: the one that must be writable to make the missing ones. */
function existingFolder(path: string): string {
  let at = dirname(resolve(path));
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at);
  return at;
}

const canWrite = (path: string, mode = constants.W_OK) => {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
};

/**
 * What of the database at `path` this process cannot write, in words, or undefined: the folder (SQLite
 * creates its -wal, -shm and journal files there, and the file itself on a first start), the file, and
 * the -wal and -shm files another user's process may have left. access(2) also answers for a read-only mount.
 */
export function unwritable(path: string): string | undefined {
  if (path === ':memory:') return undefined;
  const folder = existingFolder(path);
  const made = dirname(resolve(path));
  if (!canWrite(folder, constants.W_OK | constants.X_OK))
    return folder === made ? `the folder ${folder}` : `the folder ${folder} (to make ${made} in)`;
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) {
    if (existsSync(file) && !canWrite(file)) return `the file ${resolve(file)}`;
  }
  return undefined;
}

/** This process's user and group, as `chown` takes them (1000:1000 is the image's `node` user). */
export function processUser(): string {
  return process.getuid && process.getgid ? `${process.getuid()}:${process.getgid()}` : 'this user';
}

/**
 * Refuses, before anything is opened, a database this process cannot write: the line names what is not
 * writable, by which uid:gid, and the fixes (a Docker bind mount made by root is the usual cause).
 * @throws {DatabaseOpenError}
 */
export function refuseUnwritable(path: string): void {
  const what = unwritable(path);
  if (!what) return;
  const user = processUser();
  throw new DatabaseOpenError(
    `cannot write the database ${path}: ${what} is not writable by this process (uid:gid ${user}); SQLite writes the file and ` +
      `its -wal and -shm files beside it, so make the folder ${dirname(resolve(path))} and the files in it writable by ${user} ` +
      `(a host folder mounted into a container: chown -R ${user} <the host folder>, or run the container with --user $(id -u):$(id -g), or use a named volume)`,
  );
}

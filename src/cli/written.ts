// What a run of a development command wrote to a set of folders, and putting them back as they were:
// every file it added removed, every file it changed given back its content; nothing it did not touch is touched.
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The files and folders under some folders at one moment, with each file's content. */
export interface FolderState {
  files: Map<string, Buffer>;
  folders: Set<string>;
}

/** What changed since a FolderState was taken: files added (in path order) and files whose content changed. */
export interface Written {
  added: string[];
  changed: string[];
}

function walk(folder: string, state: FolderState): void {
  if (!existsSync(folder) || state.folders.has(folder)) return;
  state.folders.add(folder);
  for (const name of readdirSync(folder)) {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) walk(path, state);
    else state.files.set(path, readFileSync(path));
  }
}

/** Everything under `folders` now (nested folders once, whichever names them). */
export function folderState(folders: string[]): FolderState {
  const state: FolderState = { files: new Map(), folders: new Set() };
  for (const folder of folders) walk(folder, state);
  return state;
}

/** The files added and changed under `folders` since `before`. */
export function writtenSince(before: FolderState, folders: string[]): Written {
  const now = folderState(folders);
  const added = [...now.files.keys()].filter((path) => !before.files.has(path)).sort();
  const changed = [...now.files]
    .filter(([path, content]) => before.files.get(path)?.equals(content) === false)
    .map(([path]) => path)
    .sort();
  return { added, changed };
}

/**
 * Puts `folders` back as `before` found them: removes the files added since (and the folders made for
 * them, once empty), rewrites the files changed since with their content then. Returns what it did.
 */
export function restore(before: FolderState, folders: string[]): Written {
  const written = writtenSince(before, folders);
  for (const path of written.added) rmSync(path, { force: true });
  for (const path of written.changed) writeFileSync(path, before.files.get(path) as Buffer);
  const made = [...folderState(folders).folders].filter((folder) => !before.folders.has(folder));
  // Deepest first, so that a folder made inside another made one is empty when its parent is removed.
  for (const folder of made.sort().reverse()) {
    try {
      rmdirSync(folder);
    } catch {}
  }
  return written;
}

// The scratch copies of the migrations folders a run of db:generate writes to, and copying what it wrote into the
// real folders once it is proven: until then nothing there changes, so no database (nor `npm run dev`) can apply it.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';

/** Real folders and their scratch copies, under one temporary folder. */
export interface Stage {
  root: string;
  /** Each real folder's copy. */
  copies: Map<string, string>;
}

/** A file the run wrote: in the copy, and where it goes. */
export interface StagedFile {
  staged: string;
  real: string;
}

/** Copies each of `folders` (one that does not exist yet: an empty one) into a new temporary folder. */
export function stageFolders(folders: string[]): Stage {
  const root = mkdtempSync(join(tmpdir(), 'restable-generate-'));
  const copies = new Map(folders.map((folder, i) => [folder, join(root, String(i))]));
  for (const [folder, copy] of copies) {
    if (existsSync(folder)) cpSync(folder, copy, { recursive: true });
    else mkdirSync(copy, { recursive: true });
  }
  return { root, copies };
}

/** The copy of real folder `folder`. */
export function copyOf(stage: Stage, folder: string): string {
  const copy = stage.copies.get(folder);
  if (!copy) throw new Error(`${folder} is not staged`);
  return copy;
}

/** The real path of a path in a copy (a path outside every copy is its own). */
export function realPathOf(stage: Stage, path: string): string {
  for (const [folder, copy] of stage.copies) {
    const inside = relative(copy, path);
    if (!inside.startsWith('..')) return join(folder, inside);
  }
  return path;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** The files of the copies that are new or differ from the real ones; journals last (see commitStage). */
export function stagedFiles(stage: Stage): StagedFile[] {
  const files: StagedFile[] = [];
  for (const copy of stage.copies.values()) {
    for (const staged of filesUnder(copy)) {
      const real = realPathOf(stage, staged);
      if (!existsSync(real) || !readFileSync(real).equals(readFileSync(staged))) files.push({ staged, real });
    }
  }
  const journalLast = (file: StagedFile) => (file.real.endsWith('_journal.json') ? 1 : 0);
  return files.sort((a, b) => journalLast(a) - journalLast(b) || a.real.localeCompare(b.real));
}

/**
 * Copies the files the run wrote into the real folders: the journal of each folder last, so that a migrator
 * (or a watcher's restart) that reads it meanwhile finds every file it names. Returns them, in that order.
 */
export function commitStage(stage: Stage): string[] {
  const files = stagedFiles(stage);
  for (const { staged, real } of files) {
    mkdirSync(dirname(real), { recursive: true });
    cpSync(staged, real);
  }
  return files.map((file) => file.real);
}

/** Removes the scratch copies. */
export function discardStage(stage: Stage): void {
  rmSync(stage.root, { recursive: true, force: true });
}

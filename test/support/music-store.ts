// The music-store fixture (test/fixtures/music-store.sql) built and introspected in a temp folder, and a
// digest of its rows: shared by the introspection tests and the tests that serve the existing database.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { ROOT, tempDir } from './helpers.js';

export const FIXTURE = join(ROOT, 'test', 'fixtures', 'music-store.sql');
const CLI = join(ROOT, 'src', 'cli', 'introspect.ts');

/** Builds the fixture into a new file, as better-sqlite3 runs a script. */
export function buildFixture(path: string): string {
  const db = new Database(path);
  db.exec(readFileSync(FIXTURE, 'utf8'));
  db.close();
  return path;
}

/** Runs the CLI as `npm run introspect` does (tsx), from the project folder. */
export function introspect(args: string[]) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/**
 * A digest of every row of every table (and sqlite_sequence) named in `tables`: values with their
 * SQLite type, rows in the order of all their columns, so any changed, added or removed row shows.
 */
export function checksums(path: string, tables?: string[]): Record<string, string> {
  const db = new Database(path, { readonly: true });
  try {
    const names =
      tables ??
      (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[]).filter(
        (n) => n !== '__drizzle_migrations' && !n.startsWith('restable_'),
      );
    const result: Record<string, string> = {};
    for (const name of names) {
      const quoted = `"${name.replace(/"/g, '""')}"`;
      const columns = (db.prepare(`PRAGMA table_info(${quoted})`).all() as { name: string }[]).map(
        (c) => `"${c.name.replace(/"/g, '""')}"`,
      );
      const select = columns.map((c) => `typeof(${c}), ${c}`).join(', ');
      const order = columns.map((_, i) => i + 1).join(', ');
      const hash = createHash('sha256');
      for (const row of db.prepare(`SELECT ${select} FROM ${quoted} ORDER BY ${order}`).raw().all() as unknown[][]) {
        hash.update(JSON.stringify(row.map((v) => (Buffer.isBuffer(v) ? `x${v.toString('hex')}` : v))));
        hash.update('\n');
      }
      result[name] = hash.digest('hex');
    }
    return result;
  } finally {
    db.close();
  }
}

export interface Run {
  dir: string;
  db: string;
  schemaPath: string;
  out: string;
  output: { code: number | null; stdout: string; stderr: string };
  before: Record<string, string>;
  schema: Record<string, unknown>;
  remove: () => void;
}

/** Builds the fixture in a temp folder (with node_modules reachable, so the generated module imports) and introspects it. */
export async function introspectFixture(build: (path: string) => string = buildFixture): Promise<Run> {
  const { dir, remove } = tempDir();
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  const db = build(join(dir, 'music.db'));
  const schemaPath = join(dir, 'schema.ts');
  const out = join(dir, 'migrations');
  const before = checksums(db);
  const output = introspect([db, '--schema', schemaPath, '--out', out]);
  if (output.code !== 0) {
    remove();
    throw new Error(`introspect failed (${output.code}): ${output.stderr}${output.stdout}`);
  }
  const schema = { ...(await import(pathToFileURL(schemaPath).href)) };
  return { dir, db, schemaPath, out, output, before, schema, remove };
}

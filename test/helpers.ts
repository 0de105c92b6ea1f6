// Test helpers: boot the real app on port 0 over a fresh temporary SQLite file, speak HTTP to it,
// or spawn the real entry point as a process. No database is mocked anywhere. Both serve the tests'
// own pet shop (test/pet-shop/), never the user's src/db/schema.ts; spawned processes never outlive the tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pino, { type Logger } from 'pino';
import { type App, createApp } from '../src/app.js';
import { type Config, parseConfig } from '../src/config.js';
import { closeDatabase, type DatabaseHandle, openDatabase } from '../src/db/client.js';
import { applyMigrations } from '../src/db/migrate.js';
import { createHttpServer } from '../src/server.js';
import * as petShop from './pet-shop/schema.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The migrations drizzle-kit generated for the tests' pet shop (`npm run db:generate:test`). */
export const PET_SHOP_MIGRATIONS = join(ROOT, 'test', 'pet-shop', 'migrations');

/** The tag of each pet-shop migration, oldest first: what a fresh database is migrated through. */
export const PET_SHOP_MIGRATION_TAGS: string[] = JSON.parse(
  readFileSync(join(PET_SHOP_MIGRATIONS, 'meta', '_journal.json'), 'utf8'),
).entries.map((entry: { tag: string }) => entry.tag);

/** A fresh temporary folder, removed by the returned cleanup. */
export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'restable-test-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Runs `work` with a fresh temporary folder and removes it afterwards, whatever happens. */
export async function withTempDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const temp = tempDir();
  try {
    return await work(temp.dir);
  } finally {
    temp.remove();
  }
}

/** Opens a database file read-only (beside any server using it), runs `read`, and closes it. */
export function inspect<T>(path: string, read: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or undefined when there is none. */
  body: any;
}

export interface RequestOptions {
  body?: unknown;
  /** A raw body string sent as is (for malformed JSON). */
  raw?: string;
  headers?: Record<string, string>;
}

/** Sends one request; JSON bodies get `Content-Type: application/json` unless headers say otherwise. */
export async function request(base: string, method: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(base + path, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: parsed };
}

export interface Service {
  url: string;
  app: App;
  database: DatabaseHandle;
  config: Config;
  /** Log lines the service wrote (parsed pino JSON). */
  logs: Record<string, any>[];
  request: (method: string, path: string, options?: RequestOptions) => Promise<Reply>;
  close: () => Promise<void>;
}

export interface ServiceOptions {
  /** The schema module to serve; the tests' pet shop (test/pet-shop/schema.ts) by default. */
  schema?: Record<string, unknown>;
  /** The migrations to apply (and report on /readyz); the pet shop's by default. */
  migrationsFolder?: string;
  env?: Record<string, string>;
  /** Runs after the migrations, before the app is created (e.g. a test-only table). */
  prepare?: (database: DatabaseHandle) => void;
}

/** Boots createApp on port 0 over a new migrated temp database, as main.ts does. */
export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const temp = tempDir();
  const config = parseConfig({ DATABASE_PATH: join(temp.dir, 'app.db'), PORT: '0', LOG_LEVEL: 'info', ...options.env });
  const logs: Record<string, any>[] = [];
  const logger: Logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const { schema = petShop, migrationsFolder = PET_SHOP_MIGRATIONS } = options;
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  await applyMigrations(database, migrationsFolder);
  options.prepare?.(database);
  const app = createApp({ database, config, logger, schema, migrationsFolder });
  const server: Server = createHttpServer(app.handler, config, logger);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    app,
    database,
    config,
    logs,
    request: (method, path, opts) => request(url, method, path, opts),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      app.close();
      closeDatabase(database);
      temp.remove();
    },
  };
}

export interface Process {
  child: ChildProcess;
  url: string;
  output: () => string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  /** Sends `signal` (SIGTERM by default), SIGKILL if it has not ended after 15 s; resolves with the exit code. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/**
 * Every child process these helpers started and that still runs. Killed when the test process
 * exits (a failed assertion skips a test's own stop; uvu's --bail exits at once), so none is orphaned.
 * A child left running also keeps the test process alive: test/run.mjs ends such a run.
 */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});
// Stopped from outside (Ctrl-C, test/run.mjs's watchdog): exit normally, so the line above still runs.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

function start(script: string, install: string, env: Record<string, string>, args: string[] = []): ChildProcess {
  const child = spawn(process.execPath, [join(install, 'dist', script), ...args], {
    cwd: install,
    env: { PATH: process.env.PATH, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

let petShopInstall: Promise<string> | undefined;

/**
 * The compiled service (`npm test` builds first: processes run what ships) laid out as an install
 * of the pet shop: dist/ copied as built except dist/db/schema.js, the pet-shop copy compiled, and
 * migrations/ the pet shop's. No product code is told it is under test; the two files a user edits
 * are swapped. dist/ is copied, not linked: ES modules resolve links to their real path, and
 * migrate.js finds migrations/ next to its own dist/. Removed when the test process exits.
 */
function installPetShop(): Promise<string> {
  petShopInstall ??= (async () => {
    const built = join(ROOT, 'dist');
    if (!existsSync(join(built, 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
    const dir = mkdtempSync(join(tmpdir(), 'restable-install-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    cpSync(built, join(dir, 'dist'), { recursive: true, filter: (path) => !/\.(map|tsbuildinfo)$/.test(path) });
    cpSync(PET_SHOP_MIGRATIONS, join(dir, 'migrations'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const { default: ts } = await import('typescript');
    const source = readFileSync(join(ROOT, 'test', 'pet-shop', 'schema.ts'), 'utf8');
    const compiled = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } });
    writeFileSync(join(dir, 'dist', 'db', 'schema.js'), compiled.outputText);
    return dir;
  })();
  return petShopInstall;
}

/** Spawns the real compiled entry point (dist/main.js, serving the pet shop) and waits until it listens. */
export async function spawnService(env: Record<string, string>): Promise<Process> {
  const child = start('main.js', await installPetShop(), env);
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await exited;
    clearTimeout(force);
    return code;
  };
  // A service that neither listens nor exits within 30 s is killed, so a broken start fails the test instead of hanging it.
  const slow = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      const match = /listening on (http:\/\/[\d.:]+)/.exec(output);
      if (match) resolve(match[1] as string);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    exited.then((code) => reject(new Error(`exited with ${code} before listening:\n${output}`)));
  }).finally(() => clearTimeout(slow));
  return { child, url, output: () => output, exited, stop };
}

/** Runs a compiled entry point (`main.js`, `cli/migrate.js`…) to completion; returns its exit code and output. */
export async function runScript(
  script: string,
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ code: number | null; output: string }> {
  const child = start(script, await installPetShop(), env, args);
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  return { code, output };
}

/** Runs the real entry point to completion (for start-up failures). */
export const runService = (env: Record<string, string>) => runScript('main.js', env);

/** Fills the file system of `dir` up to the last block; returns the filler's path. */
export function fill(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
    for (let size = 32 * 1024; size >= 512; size /= 2) {
      try {
        for (;;) writeSync(fd, chunk.subarray(0, size));
      } catch {}
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

// Test helpers: boot the real app on port 0 over a fresh temporary SQLite file, or a fresh PostgreSQL
// database with TEST_BACKEND=postgres (TEST_DATABASE_URL's server), speak HTTP to it, or spawn the real entry
// point as a process. No database is mocked anywhere. Both serve the tests' own pet shop (test/pet-shop/),
// never the user's src/db/schema.ts; spawned processes never outlive the tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import pino, { type Logger } from 'pino';
import { type App, createApp } from '../../src/app.js';
import { type Config, parseConfig, postgresOptions } from '../../src/config.js';
import { loadPostgresStore } from '../../src/engine/backend.js';
import { applyPgMigrations } from '../../src/engine/postgres/migrate.js';
import { closePostgres, openPostgres, type PostgresHandle } from '../../src/engine/postgres/pool.js';
import { closeDatabase, type DatabaseHandle, openDatabase } from '../../src/engine/sqlite/connection.js';
import { applyMigrations } from '../../src/engine/sqlite/migrate.js';
import { createHttpServer } from '../../src/http/server.js';
import * as petShop from '../pet-shop/schema.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The migrations drizzle-kit generated for the tests' pet shop (`npm run db:generate:test`). */
export const PET_SHOP_MIGRATIONS = join(ROOT, 'test', 'pet-shop', 'migrations');

/** The pet shop's PostgreSQL migrations (generated from the same schema: `npm run db:generate:test`). */
export const PET_SHOP_PG_MIGRATIONS = join(PET_SHOP_MIGRATIONS, 'pg');

/**
 * The engine startService serves from: PostgreSQL when TEST_BACKEND=postgres (`npm run test:pg`
 * sets it, with TEST_DATABASE_URL), else SQLite. The shared suites run on both.
 */
export const BACKEND: 'sqlite' | 'postgres' = process.env.TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';

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

/** The URL of the next page a list's `Link` header names, if any. */
export const nextLink = (reply: Reply) => /^<([^>]+)>; rel="next"$/.exec(reply.headers.get('link') ?? '')?.[1];

/** Every element of a list, page after page through the `Link` headers (each page must be a 200). */
export async function walkList(service: Service, path: string): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (let at: string | undefined = path; at; ) {
    const reply = await service.request('GET', at);
    if (reply.status !== 200) throw new Error(`GET ${at}: ${reply.status} ${reply.text}`);
    rows.push(...reply.body);
    at = nextLink(reply);
  }
  return rows;
}

export interface Service {
  url: string;
  app: App;
  /** Which engine serves: TEST_BACKEND's. */
  backend: 'sqlite' | 'postgres';
  /** The SQLite handle (SQLite-only tests); reading it on PostgreSQL throws: use `sql` or `postgres`. */
  database: DatabaseHandle;
  /** The service's PostgreSQL pool and its database's URL (backend 'postgres' only). */
  postgres?: { handle: PostgresHandle; url: string };
  /**
   * Runs one SQL statement on the service's database, beside the service, and resolves with its rows
   * as objects (none for a statement that returns none). Placeholders are always PostgreSQL's `$1`,
   * `$2`… (translated to SQLite's `?`; a `$n` inside a string literal would be too, so pass values as
   * parameters). Column types are each engine's own: write SQL that means the same on both.
   */
  sql: (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;
  config: Config;
  /** Log lines the service wrote (parsed pino JSON). */
  logs: Record<string, any>[];
  request: (method: string, path: string, options?: RequestOptions) => Promise<Reply>;
  close: () => Promise<void>;
}

export interface ServiceOptions {
  /** The schema module to serve; the tests' pet shop (test/pet-shop/schema.ts) by default. */
  schema?: Record<string, unknown>;
  /** The SQLite migrations to apply (and report on /readyz); the pet shop's by default. */
  migrationsFolder?: string;
  /** The PostgreSQL migrations to apply on PostgreSQL; the pet shop's (test/pet-shop/migrations/pg) by default. */
  pgMigrationsFolder?: string;
  env?: Record<string, string>;
  /** PostgreSQL only: serve this existing database (migrated with pgMigrationsFolder) instead of a new one; it is kept. */
  postgresUrl?: string;
  /** Runs after the migrations, before the app is created (e.g. a test-only table). SQLite only. */
  prepare?: (database: DatabaseHandle) => void;
}

/** `$1`-style SQL for better-sqlite3: each `$n` becomes `?`, and the values are listed in that order. */
function toSqlite(text: string, params: unknown[]): [string, unknown[]] {
  const values: unknown[] = [];
  const translated = text.replace(/\$(\d+)/g, (_match, n: string) => {
    values.push(params[Number(n) - 1]);
    return '?';
  });
  return [translated, values];
}

/** Runs `sql` on the server at TEST_DATABASE_URL as its admin, on a connection of its own. */
async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl(), application_name: 'restable-tests' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_BACKEND=postgres needs TEST_DATABASE_URL (a PostgreSQL admin URL); `npm run test:pg` starts a server');
  return url;
}

let databases = 0;

/**
 * Runs src/cli/generate.ts (`npm run db:generate`'s command, through tsx) with `args` in `cwd`, to its end or
 * `timeoutMs`; its stdout and stderr as one text.
 */
export function runGenerate(
  args: string[],
  { cwd = ROOT, env = process.env, timeoutMs = 60_000 }: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli', 'generate.ts'), ...args], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}

/** Runs `sql` on the database at `url` (as other software would), on a connection of its own. */
export async function runSql(url: string, sql: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Creates an empty database on the server at TEST_DATABASE_URL, with a name no other test process
 * uses; `drop` removes it, ending any session still connected (WITH (FORCE)).
 */
export async function createPgDatabase(): Promise<{ name: string; url: string; drop: () => Promise<void> }> {
  const name = `restable_t_${process.pid}_${++databases}_${randomBytes(4).toString('hex')}`;
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  // template0: a pristine copy, whatever someone left in template1 of a shared server.
  await admin(`CREATE DATABASE "${name}" TEMPLATE template0 ENCODING 'UTF8'`);
  return { name, url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

/** startService on PostgreSQL: a fresh database, migrated with the pet shop's PostgreSQL migrations. */
async function startPostgresService(options: ServiceOptions): Promise<Service> {
  if (options.prepare) {
    throw new Error('startService: `prepare` takes a SQLite handle; it cannot run on PostgreSQL (TEST_BACKEND=postgres)');
  }
  if (options.migrationsFolder && !options.pgMigrationsFolder) {
    throw new Error('startService: `migrationsFolder` is SQLite migrations; on PostgreSQL pass `pgMigrationsFolder` too');
  }
  const { schema = petShop, pgMigrationsFolder = PET_SHOP_PG_MIGRATIONS } = options;
  const created = options.postgresUrl ? { url: options.postgresUrl, drop: async () => {} } : await createPgDatabase();
  const config = parseConfig({ DATABASE_URL: created.url, PORT: '0', LOG_LEVEL: 'info', ...options.env });
  const logs: Record<string, any>[] = [];
  const logger: Logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const handle = openPostgres(created.url, postgresOptions(config));
  let app: App | undefined;
  try {
    await applyPgMigrations(handle, pgMigrationsFolder);
    await loadPostgresStore(handle);
    app = createApp({ database: handle, config, logger, schema, migrationsFolder: pgMigrationsFolder });
    await app.ready;
    const server: Server = createHttpServer(app.handler, config, logger);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const started = app;
    return {
      url,
      app: started,
      backend: 'postgres',
      get database(): DatabaseHandle {
        throw new Error('service.database is the SQLite handle; this service runs on PostgreSQL: use service.sql() or service.postgres');
      },
      postgres: { handle, url: created.url },
      sql: async (text, params = []) => (await handle.pool.query(text, params)).rows,
      config,
      logs,
      request: (method, path, opts) => request(url, method, path, opts),
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        started.close();
        try {
          await closePostgres(handle);
        } finally {
          await created.drop();
        }
      },
    };
  } catch (error) {
    app?.close();
    await closePostgres(handle).catch(() => {});
    await created.drop();
    throw error;
  }
}

/**
 * Boots createApp on port 0 over a new migrated temp database, as main.ts does: a SQLite file, or a
 * new database on the PostgreSQL server at TEST_DATABASE_URL when TEST_BACKEND=postgres.
 */
export async function startService(options: ServiceOptions = {}): Promise<Service> {
  if (BACKEND === 'postgres') return startPostgresService(options);
  const temp = tempDir();
  const config = parseConfig({ DATABASE_PATH: join(temp.dir, 'app.db'), PORT: '0', LOG_LEVEL: 'info', ...options.env });
  const logs: Record<string, any>[] = [];
  const logger: Logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const { schema = petShop, migrationsFolder = PET_SHOP_MIGRATIONS } = options;
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  await applyMigrations(database, migrationsFolder);
  options.prepare?.(database);
  const app = createApp({ database, config, logger, schema, migrationsFolder });
  await app.ready;
  const server: Server = createHttpServer(app.handler, config, logger);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    app,
    backend: 'sqlite',
    database,
    sql: async (text, params = []) => {
      const [translated, values] = toSqlite(text, params);
      const statement = database.sqlite.prepare(translated);
      if (statement.reader) return statement.all(...values) as Record<string, unknown>[];
      statement.run(...values);
      return [];
    },
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
/** Temporary installs, removed when the test process exits: one listener for all (one each warned past ten). */
const installs = new Set<string>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
  for (const dir of installs) rmSync(dir, { recursive: true, force: true });
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

/**
 * The pet shop's schema.ts as text, to copy elsewhere: its import of searchable() (relative to
 * test/pet-shop/) pointed at `searchModule` instead (by default the sources', wherever the copy is).
 */
export function petShopSchemaSource(searchModule = pathToFileURL(join(ROOT, 'src', 'db', 'search.js')).href): string {
  const source = readFileSync(join(ROOT, 'test', 'pet-shop', 'schema.ts'), 'utf8');
  return source.replace("'../../src/db/search.js'", JSON.stringify(searchModule).replaceAll('"', "'"));
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
    installs.add(dir);
    cpSync(built, join(dir, 'dist'), { recursive: true, filter: (path) => !/\.(map|tsbuildinfo)$/.test(path) });
    cpSync(PET_SHOP_MIGRATIONS, join(dir, 'migrations'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const { default: ts } = await import('typescript');
    // In the install, searchable() sits next to the schema, as it does for src/db/schema.ts.
    const source = petShopSchemaSource('./search.js');
    const compiled = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } });
    writeFileSync(join(dir, 'dist', 'db', 'schema.js'), compiled.outputText);
    return dir;
  })();
  return petShopInstall;
}

/**
 * Spawns the real compiled entry point (dist/main.js, serving the pet shop, or what `install` holds: see
 * installPetShopWith) and waits until it listens.
 */
export async function spawnService(env: Record<string, string>, install?: string): Promise<Process> {
  const child = start('main.js', install ?? (await installPetShop()), env);
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

/**
 * A copy of the pet-shop install whose schema module also holds `addition` (compiled JavaScript
 * appended to dist/db/schema.js: a table the service must refuse, say). Removed when the test process exits.
 */
export async function installPetShopWith(addition: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'restable-variant-'));
  installs.add(dir);
  cpSync(await installPetShop(), dir, { recursive: true });
  const schema = join(dir, 'dist', 'db', 'schema.js');
  writeFileSync(schema, `${readFileSync(schema, 'utf8')}\n${addition}\n`);
  return dir;
}

/** Runs a compiled entry point (`main.js`, `cli/migrate.js`…) to completion; returns its exit code and output. */
export async function runScript(
  script: string,
  env: Record<string, string>,
  args: string[] = [],
  install?: string,
): Promise<{ code: number | null; output: string }> {
  const child = start(script, install ?? (await installPetShop()), env, args);
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

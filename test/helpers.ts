// Test helpers: boot the real app on port 0 over a fresh temporary SQLite file, speak HTTP to it,
// or spawn the real entry point as a process. No database is mocked anywhere.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

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
  schema?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Runs after the committed migrations, before the app is created (e.g. a test-only table). */
  prepare?: (database: DatabaseHandle) => void;
}

/** Boots createApp on port 0 over a new migrated temp database, as main.ts does. */
export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const temp = tempDir();
  const config = parseConfig({ DATABASE_PATH: join(temp.dir, 'app.db'), PORT: '0', LOG_LEVEL: 'info', ...options.env });
  const logs: Record<string, any>[] = [];
  const logger: Logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  await applyMigrations(database);
  options.prepare?.(database);
  const app = createApp({ database, config, logger, schema: options.schema });
  const server: Server = createHttpServer(app.handler, config);
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
}

/** A compiled entry point under dist/ (`npm test` builds first: processes run what ships). */
function entry(script: string): string {
  return join(ROOT, 'dist', script);
}

/** Spawns the real compiled entry point (dist/main.js) and waits until it listens. */
export async function spawnService(env: Record<string, string>): Promise<Process> {
  const child = spawn(process.execPath, [entry('main.js')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      const match = /listening on (http:\/\/[\d.:]+)/.exec(output);
      if (match) resolve(match[1] as string);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    exited.then((code) => reject(new Error(`exited with ${code} before listening:\n${output}`)));
  });
  return { child, url, output: () => output, exited };
}

/** Runs a compiled entry point (`main.js`, `cli/migrate.js`…) to completion; returns its exit code and output. */
export async function runScript(
  script: string,
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [entry(script), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

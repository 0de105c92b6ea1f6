// Collection latency at growing sizes (issue 3): fills `users` with N rows, starts the compiled
// service on that file, and reports median latencies of first page, deep page, filter and count.
// Usage: npm run bench:collections -- [--sizes 10000,100000,1000000] [--samples 200]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { closeDatabase, openDatabase } from '../src/db/client.js';
import { applyMigrations } from '../src/db/migrate.js';

const { values: args } = parseArgs({
  options: { sizes: { type: 'string', default: '10000,100000,1000000' }, samples: { type: 'string', default: '200' } },
});
const sizes = (args.sizes as string).split(',').map(Number);
const samples = Number(args.samples);
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function get(base: string, path: string): Promise<{ status: number; link?: string; ms: number }> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    request(base + path, { agent }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          link: res.headers.link as string | undefined,
          ms: Number(process.hrtime.bigint() - start) / 1e6,
        }),
      );
    })
      .on('error', reject)
      .end();
  });
}

async function median(base: string, path: () => string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const reply = await get(base, path());
    if (reply.status !== 200) throw new Error(`${path()} answered ${reply.status}`);
    times.push(reply.ms);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] as number;
}

async function fill(path: string, rows: number): Promise<void> {
  const database = openDatabase(path);
  await applyMigrations(database);
  const now = new Date().toISOString();
  const insert = database.sqlite.prepare('INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, ?, ?)');
  database.sqlite.transaction(() => {
    for (let i = 1; i <= rows; i++) insert.run(`user ${i % 1000}`, `user${i}@example.com`, now, now);
  })();
  closeDatabase(database);
}

async function startService(databasePath: string): Promise<{ base: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    env: { ...process.env, DATABASE_PATH: databasePath, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const base = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/[\d.:]+)/.exec(out);
      if (match) resolve(match[1] as string);
    });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
  return { base, stop: () => new Promise((resolve) => child.once('exit', () => resolve()).kill('SIGTERM')) };
}

/** Walks to the end with the largest pages and returns the cursor of the last one. */
async function cursorNearEnd(base: string): Promise<string> {
  let next: string | undefined = '/users?limit=1000';
  let last = '';
  while (next) {
    const reply = await get(base, next);
    const link = reply.link && /<([^>]+)>/.exec(reply.link)?.[1];
    if (link) last = new URL(link, base).searchParams.get('cursor') as string;
    next = link;
  }
  return last;
}

const results: string[][] = [];
for (const rows of sizes) {
  const dir = mkdtempSync(join(tmpdir(), 'restable-bench-'));
  const file = join(dir, 'bench.db');
  process.stderr.write(`filling ${rows} rows… `);
  await fill(file, rows);
  const service = await startService(file);
  process.stderr.write('walking to the end… ');
  const cursor = await cursorNearEnd(service.base);
  process.stderr.write('measuring\n');
  const first = await median(service.base, () => '/users');
  const deep = await median(service.base, () => `/users?cursor=${cursor}`);
  let n = 0;
  const filter = await median(service.base, () => `/users?email=user${(n++ * 7919) % rows}@example.com`);
  const count = await median(service.base, () => '/users?count=true');
  results.push([rows.toLocaleString('en'), ...[first, deep, filter, count].map((ms) => ms.toFixed(2)), (deep / first).toFixed(2)]);
  await service.stop();
  rmSync(dir, { recursive: true, force: true });
}
agent.destroy();

const header = ['rows', 'first page (ms)', 'deep page (ms)', 'email= filter (ms)', 'count=true (ms)', 'deep / first'];
const table = [header, header.map(() => '---'), ...results].map((r) => `| ${r.join(' | ')} |`).join('\n');
console.log(`\nMedian of ${samples} sequential requests, pages of 100; node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}\n`);
console.log(table);

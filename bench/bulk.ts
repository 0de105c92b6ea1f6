// Bulk creates and batches (API.md §7): rows per second creating users one POST per element (wrk, 32
// connections), as JSON arrays of 1,000 and as /_batch requests of 100 creates (wrk, 4 connections),
// each for --seconds, on the compiled service at its defaults (SQLite, DATABASE_SYNCHRONOUS=FULL,
// LOG_LEVEL=info; or a new database on a PostgreSQL server with --pg-url, an admin URL). Every answer's
// status and the users' count are checked; nothing is asserted on time.
// Usage: npm run build && npx tsx bench/bulk.ts [--seconds 10] [--batch 1000] [--connections 4] [--pg-url postgres://…]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { available, load } from './load.js';
import { startService } from './service.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    batch: { type: 'string', default: '1000' },
    connections: { type: 'string', default: '4' },
    'pg-url': { type: 'string' },
  },
});
const SECONDS = Number(args.seconds);
const BATCH = Number(args.batch);
const CONNECTIONS = Number(args.connections);
if (![SECONDS, BATCH, CONNECTIONS].every((n) => Number.isInteger(n) && n > 0) || BATCH > 1000) {
  throw new Error('--seconds, --batch and --connections take whole numbers (--batch at most 1000)');
}
if (!(await available('wrk', '-v'))) throw new Error('wrk is not installed (Debian: apt-get install wrk)');

async function count(base: string): Promise<number> {
  const reply = await fetch(`${base}/users?count=true&limit=1`);
  if (reply.status !== 200) throw new Error(`count: ${reply.status}`);
  return Number(reply.headers.get('x-total-count'));
}

const scratch = mkdtempSync(join(tmpdir(), 'restable-bulk-'));
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));
/** On PostgreSQL: a new database on the server, dropped at the end. */
let dropDatabase = async () => {};
let database: Record<string, string> = { DATABASE_PATH: join(scratch, 'app.db') };
if (args['pg-url']) {
  const admin = new pg.Client(args['pg-url']);
  await admin.connect();
  const name = `restable_bulk_${process.pid}`;
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(args['pg-url']);
  url.pathname = `/${name}`;
  database = { DATABASE_URL: url.href };
  dropDatabase = async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  };
}
const { base, stop } = await startService(database);

/** Loads `/users` (or /_batch) with wrk for SECONDS; returns rows per second and the rows created. */
async function rowsPerSecond(path: string, body: string, rowsPerRequest: number, connections: number, status: number) {
  const before = await count(base);
  const result = await load(
    { method: 'POST', path, headers: { 'Content-Type': 'application/json' }, body, status },
    { url: base, connections, duration: SECONDS, rows: 1, core: undefined, scratch },
  );
  if (result.failures > 0) throw new Error(`${path}: ${result.problems}`);
  const made = (await count(base)) - before;
  // wrk stops with requests in flight: those may have committed without being counted.
  if (made < result.requests * rowsPerRequest) throw new Error(`${path}: ${result.requests} answers but only ${made} users`);
  return { rate: result.rps * rowsPerRequest, rows: result.requests * rowsPerRequest, p50: result.p50, p99: result.p99 };
}

const element = (i: number) => `{"name":"Bulk {n}","email":"bulk-{n}-${i}@example.com"}`;
// One POST per element: wrk, 32 connections, each request a new user.
const single = await rowsPerSecond('/users', '{"name":"One","email":"one-{n}@example.com"}', 1, 32, 201);
// Arrays of BATCH elements (each {n} in the body is the request's own token).
const array = `[${Array.from({ length: BATCH }, (_, i) => element(i)).join(',')}]`;
const bulk = await rowsPerSecond('/users', array, BATCH, CONNECTIONS, 201);
// /_batch of 100 creates, each its own operation.
const operations = Array.from({ length: 100 }, (_, i) => `{"method":"POST","path":"/users","body":${element(i)}}`);
const batch = await rowsPerSecond('/_batch', `{"operations":[${operations.join(',')}]}`, 100, CONNECTIONS, 200);
const total = await count(base);
await stop();
await dropDatabase();

const engine = args['pg-url'] ? 'PostgreSQL (a new database on the server given)' : 'SQLite at DATABASE_SYNCHRONOUS=FULL';
console.log(`Node ${process.version}; ${engine}; wrk, ${SECONDS} s each; ${total} users created in all\n`);
console.log('| how | connections | rows | rows/s | × one by one | p50 / p99 ms per request |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const [how, connections, m] of [
  ['one POST per element', 32, single],
  [`arrays of ${BATCH} (bulk create)`, CONNECTIONS, bulk],
  ['/_batch of 100 creates', CONNECTIONS, batch],
] as const) {
  console.log(
    `| ${how} | ${connections} | ${m.rows} | ${Math.round(m.rate)} | ${(m.rate / single.rate).toFixed(1)} | ${m.p50.toFixed(1)} / ${m.p99.toFixed(1)} |`,
  );
}

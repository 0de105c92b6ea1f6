// Bulk creates (API.md §7): rows per second inserting users one POST per element (wrk, 32 connections)
// against JSON arrays of 1,000 (one request at a time), on the compiled service at its defaults
// (SQLite, DATABASE_SYNCHRONOUS=FULL, LOG_LEVEL=info; or a new database on a PostgreSQL server with
// --pg-url, an admin URL). Every answer is checked; nothing is asserted on time.
// Usage: npm run build && npx tsx bench/bulk.ts [--rows 100000] [--seconds 10] [--batch 1000] [--pg-url postgres://…]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { available, load } from './load.js';
import { startService } from './service.js';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '10' },
    batch: { type: 'string', default: '1000' },
    'pg-url': { type: 'string' },
  },
});
const ROWS = Number(args.rows);
const SECONDS = Number(args.seconds);
const BATCH = Number(args.batch);
if (![ROWS, SECONDS, BATCH].every((n) => Number.isInteger(n) && n > 0) || BATCH > 1000) {
  throw new Error('--rows, --seconds and --batch take whole numbers (--batch at most 1000)');
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

// One POST per element: wrk, 32 connections, each request a new user.
const single = await load(
  {
    method: 'POST',
    path: '/users',
    headers: { 'Content-Type': 'application/json' },
    body: '{"name":"One","email":"one-{n}@example.com"}',
    status: 201,
  },
  { url: base, connections: 32, duration: SECONDS, rows: 1, core: undefined, scratch },
);
if (single.failures > 0) throw new Error(`one by one: ${single.problems}`);
const afterSingle = await count(base);

// Arrays of BATCH elements, one request at a time, until ROWS users are created.
const started = process.hrtime.bigint();
for (let made = 0, n = 0; made < ROWS; n++) {
  const size = Math.min(BATCH, ROWS - made);
  const body = JSON.stringify(Array.from({ length: size }, (_, i) => ({ name: 'Bulk', email: `bulk-${n}-${i}@example.com` })));
  const reply = await fetch(`${base}/users`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const created = (await reply.json()) as unknown[];
  if (reply.status !== 201 || created.length !== size)
    throw new Error(`bulk ${n}: ${reply.status} ${JSON.stringify(created).slice(0, 200)}`);
  made += size;
}
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const total = await count(base);
if (total !== afterSingle + ROWS) throw new Error(`expected ${afterSingle + ROWS} users, found ${total}`);
await stop();
await dropDatabase();

const bulkRate = ROWS / seconds;
const engine = args['pg-url'] ? 'PostgreSQL (a new database on the server given)' : 'SQLite at DATABASE_SYNCHRONOUS=FULL';
console.log(`Node ${process.version}; ${engine}; rows per second\n`);
console.log('| how | rows | rows/s | × one by one |');
console.log('|---|---:|---:|---:|');
console.log(`| one POST per element (wrk, 32 connections, ${SECONDS} s) | ${single.requests} | ${Math.round(single.rps)} | 1.0 |`);
console.log(`| arrays of ${BATCH}, one request at a time | ${ROWS} | ${Math.round(bulkRate)} | ${(bulkRate / single.rps).toFixed(1)} |`);

// The change feed (issue 17, API.md §8) on the compiled service at its defaults (DATABASE_SYNCHRONOUS=FULL,
// LOG_LEVEL=info to a file), on SQLite and, with --pg-url (an admin URL), on PostgreSQL:
// 1. the cost of recording: POST create and PATCH rates (wrk, 32 connections) of this build against the
//    same build with the feed's triggers dropped (and the build in --baseline, a checkout from before the
//    feed, when given), in alternating rounds, medians and ratios;
// 2. the latency from commit to delivery: --clients Server-Sent Events clients (in a worker thread of this
//    process) while a paced writer POSTs --rate creates a second; SQLite: one service with WORKERS=2,
//    PostgreSQL: two instances on one database, clients and writes split between them. Every client must
//    get every write exactly once, in seq order, without a gap: anything else exits 1. Nothing is asserted on time.
// Usage: npm run bench:feed -- [--seconds 20] [--clients 100] [--rate 1000] [--duration 5] [--rounds 3]
//        [--baseline <built checkout>] [--pg-url postgres://…] [--smoke]
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import pg from 'pg';
import { available, load } from './load.js';
import { freePort, GENERATOR_CORE, pinned, SERVER_CORE, START_ARGV, stop, waitUntilServing } from './processes.js';

const { values: args } = parseArgs({
  options: {
    // The latency run: measured seconds of writing (after --warmup-seconds), clients, creates per second.
    seconds: { type: 'string' },
    clients: { type: 'string' },
    rate: { type: 'string' },
    'warmup-seconds': { type: 'string' },
    // The cost of recording: seconds per wrk run (after 1 s of warm-up) and rounds.
    duration: { type: 'string' },
    rounds: { type: 'string' },
    rows: { type: 'string', default: '10000' },
    baseline: { type: 'string' },
    'pg-url': { type: 'string' },
    // sqlite, postgres or sqlite,postgres (default: sqlite, and postgres too when --pg-url is given).
    backend: { type: 'string' },
    // Only one of the two measurements: cost or latency (both by default).
    only: { type: 'string' },
    // A few seconds in all, for CI: the harness and its checks must not rot.
    smoke: { type: 'boolean', default: false },
  },
});
const SMOKE = args.smoke as boolean;
const number = (value: string | undefined, fallback: number, smoke: number) => Number(value ?? (SMOKE ? smoke : fallback));
const SECONDS = number(args.seconds, 20, 2);
const CLIENTS = number(args.clients, 100, 4);
const RATE = number(args.rate, 1000, 100);
const WARMUP_SECONDS = number(args['warmup-seconds'], 2, 1);
const DURATION = number(args.duration, 5, 1);
const ROUNDS = number(args.rounds, 3, 1);
const ROWS = Number(args.rows);
const CONNECTIONS = 32;
for (const [name, value, least] of [
  ['--seconds', SECONDS, 1],
  ['--clients', CLIENTS, 1],
  ['--rate', RATE, 1],
  ['--warmup-seconds', WARMUP_SECONDS, 0],
  ['--duration', DURATION, 1],
  ['--rounds', ROUNDS, 1],
  ['--rows', ROWS, 1],
] as const) {
  if (!Number.isInteger(value) || value < least) throw new Error(`${name} must be a whole number ≥ ${least}`);
}
const ONLY = args.only;
if (ONLY !== undefined && ONLY !== 'cost' && ONLY !== 'latency') throw new Error('--only takes cost or latency');
const ROOT = new URL('..', import.meta.url).pathname;
const BASELINE = args.baseline ? resolve(args.baseline) : undefined;
const PG_ADMIN = args['pg-url'];
if (!existsSync(join(ROOT, 'dist/main.js'))) throw new Error('run `npm run build` first (npm run bench:feed does)');
if (BASELINE && !['dist/main.js', 'dist/cli/migrate.js', 'node_modules'].every((f) => existsSync(join(BASELINE, f)))) {
  throw new Error(
    `--baseline ${BASELINE}: not a built checkout of restable (needs dist/ and node_modules/): \`git worktree add --detach <dir> 3dd0eef && ` +
      'ln -s "$PWD/node_modules" <dir>/node_modules && (cd <dir> && npx tsc -p tsconfig.build.json)`',
  );
}
const WRK = await available('wrk', '-v');
if (!WRK?.startsWith('wrk')) throw new Error('wrk is not installed (Debian: apt-get install wrk)');

const scratch = mkdtempSync(join(tmpdir(), 'restable-feed-'));
/** Every process this run started, stopped at exit whatever happens. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});
process.once('SIGINT', () => process.exit(130));

// --- processes, ports, CPU (as bench/run.ts measures them; it runs its own main when imported) ---

/** Starts the service of the checkout in `cwd` with `env`, its stdout (the request log) to `logFile`. */
function spawnService(cwd: string, env: Record<string, string>, logFile: string, core: number | undefined): ChildProcess {
  const [file, ...rest] = pinned(core, [process.execPath, ...START_ARGV]);
  const log = openSync(logFile, 'w');
  const child = spawn(file as string, rest, { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', log, 'inherit'] });
  closeSync(log);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Waits until `file` holds `count` lines matching `pattern` (a global regular expression). */
async function waitForLog(file: string, pattern: RegExp, count: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if ((readFileSync(file, 'utf8').match(pattern)?.length ?? 0) >= count) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${file}: fewer than ${count} lines like ${pattern} after 30 s`);
}

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds of a process (with its reaped children's), and of its live children: a WORKERS primary and its workers, a postmaster and its backends. */
function treeCpuSeconds(pid: number): number {
  const own = (p: number) => {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / TICKS;
    } catch {
      return 0;
    }
  };
  let kids: number[] = [];
  try {
    kids = execFileSync('sh', ['-c', `cat /proc/${pid}/task/*/children 2>/dev/null`])
      .toString()
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {}
  return own(pid) + kids.reduce((sum, kid) => sum + own(kid), 0);
}

/** Busy and total jiffies of each core (/proc/stat). */
function coreTimes(): { busy: number; total: number }[] {
  return readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .filter((line) => /^cpu\d+ /.test(line))
    .map((line) => {
      const [user, nice, system, idle, iowait, irq, softirq, steal] = line.split(/\s+/).slice(1, 9).map(Number) as number[];
      const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
      return { busy, total: busy + (idle ?? 0) + (iowait ?? 0) };
    });
}
const coreUse = (before: ReturnType<typeof coreTimes>, after: ReturnType<typeof coreTimes>) =>
  after.map((a, i) => {
    const b = before[i];
    return b && a.total > b.total ? (100 * (a.busy - b.busy)) / (a.total - b.total) : Number.NaN;
  });

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};
/** The p-th percentile (nearest rank) of sorted values. */
const percentile = (sorted: Float64Array, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

// --- the databases: one seeded SQLite file per build, one seeded PostgreSQL template ---

/** `rows` users in a SQLite file migrated by the build in `dir` (its own migrate command). */
function seedSqlite(dir: string, file: string, now: string): void {
  execFileSync(process.execPath, ['dist/cli/migrate.js'], {
    cwd: dir,
    env: { PATH: process.env.PATH, DATABASE_PATH: file },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const sqlite = new Database(file);
  const add = sqlite.prepare('INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, ?, ?)');
  sqlite.transaction(() => {
    for (let id = 1; id <= ROWS; id++) add.run(`user ${id}`, `user${id}@example.com`, now, now);
  })();
  sqlite.close();
}

const databaseUrl = (url: string, name: string) => {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.href;
};
async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'restable-bench-feed' });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

interface Postgres {
  describe: string;
  fresh: () => Promise<{ name: string; url: string }>;
  drop: (name: string) => Promise<void>;
  /** CPU seconds of the whole server so far (NaN when its postmaster is not readable here). */
  cpu: () => number;
  close: () => Promise<void>;
}

/** A seeded template database on the server at PG_ADMIN (migrated by this build; the baseline has the same migrations), copied per run. */
async function startPostgres(admin: string, now: string): Promise<Postgres> {
  const prefix = `restable_feed_${process.pid}`;
  const seedName = `${prefix}_seed`;
  let dataDir: string | undefined;
  const describe = await withClient(admin, async (client) => {
    const settings = await client.query(
      "SELECT name, current_setting(name) AS value FROM unnest(ARRAY['server_version', 'fsync', 'synchronous_commit', 'shared_buffers', 'max_connections']) AS name",
    );
    try {
      dataDir = (await client.query('SHOW data_directory')).rows[0].data_directory as string;
    } catch {}
    await client.query(`DROP DATABASE IF EXISTS ${seedName} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${seedName}`);
    return `PostgreSQL ${settings.rows.map((r) => `${r.name}=${r.value}`).join(', ')}`;
  });
  const seed = databaseUrl(admin, seedName);
  execFileSync(process.execPath, ['dist/cli/migrate.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, DATABASE_URL: seed },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await withClient(seed, async (client) => {
    await client.query(
      `INSERT INTO users (id, name, email, created_at, updated_at)
       SELECT i, 'user ' || i, 'user' || i || '@example.com', $1, $1 FROM generate_series(1, $2::int) AS i`,
      [now, ROWS],
    );
    await client.query(`SELECT setval(pg_get_serial_sequence('users', 'id'), $1)`, [ROWS]);
    await client.query('VACUUM ANALYZE');
  });
  let postmaster: number | undefined;
  try {
    const pid = Number(readFileSync(join(dataDir as string, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (pid > 0 && existsSync(`/proc/${pid}`)) postmaster = pid;
  } catch {}
  let made = 0;
  return {
    describe: `${describe}${postmaster ? ', on this machine' : ''}`,
    async fresh() {
      const name = `${prefix}_run_${++made}`;
      await withClient(admin, (client) => client.query(`CREATE DATABASE ${name} TEMPLATE ${seedName}`));
      return { name, url: databaseUrl(admin, name) };
    },
    async drop(name) {
      await withClient(admin, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
    cpu: () => (postmaster === undefined ? Number.NaN : treeCpuSeconds(postmaster)),
    async close() {
      await withClient(admin, async (client) => {
        const left = await client.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${prefix}\\_%`]);
        for (const { datname } of left.rows) await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      });
    },
  };
}

// --- 1. the cost of recording ---

type Backend = 'sqlite' | 'postgres';
/**
 * `feed`: this build, nobody reading the feed (the cost of recording alone); `feed + 1 stream`: the
 * same with one SSE client following the feed during the load (what reading and sending the changes
 * adds: SQLite reads the log in the service's own process, PostgreSQL also sequences it);
 * `triggers off`: the same build with the recording triggers dropped once it has started, so that the
 * only difference is the recording itself (the issue's "feed on vs off"); `no feed`: the build in
 * --baseline (the commit before the feed existed).
 */
type Variant = 'feed' | 'feed + 1 stream' | 'triggers off' | 'no feed';
interface Build {
  name: Variant;
  dir: string;
  /** Its seeded SQLite file (migrated by its own migrate command). */
  seedFile: string;
  stream: boolean;
  /** Drop the feed's triggers once the service has installed them (nothing is recorded). */
  dropTriggers?: boolean;
}
/** What `feed` is judged against: the same build without recording. */
const REFERENCE: Variant = 'triggers off';

/** Drops every trigger of the feed (named restable_changes_*) from a running service's database. */
async function dropFeedTriggers(backend: Backend, target: string): Promise<void> {
  if (backend === 'sqlite') {
    const sqlite = new Database(target, { timeout: 5000 });
    const names = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'restable_changes_%'").pluck().all();
    for (const name of names) sqlite.exec(`DROP TRIGGER "${name}"`);
    sqlite.close();
    if (names.length === 0) throw new Error('the service installed no change-feed trigger to drop');
    return;
  }
  await withClient(target, async (client) => {
    const { rows } = await client.query(
      "SELECT t.tgname AS name, c.relname AS table FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND t.tgname LIKE 'restable_changes_%'",
    );
    for (const { name, table } of rows) await client.query(`DROP TRIGGER "${name}" ON "${table}"`);
    if (rows.length === 0) throw new Error('the service installed no change-feed trigger to drop');
  });
}
const SCENARIOS = [
  {
    name: 'POST create',
    spec: {
      method: 'POST',
      path: '/users',
      headers: { 'Content-Type': 'application/json' },
      body: '{"name":"Bench","email":"bench-{n}@example.com"}',
      status: 201,
    },
  },
  {
    name: 'PATCH',
    spec: { method: 'PATCH', path: '/users/{id}', headers: { 'Content-Type': 'application/json' }, body: '{"name":"n{n}"}', status: 200 },
  },
] as const;

interface WriteMeasure {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** Changes in the log after the run (0 for the build without the feed). */
  changes: number;
  /** Events the stream received during the run (`feed + 1 stream`). */
  streamed: number;
  /** CPU per request, µs: the service's process, and the whole PostgreSQL server (NaN on SQLite). */
  serviceCpu: number;
  databaseCpu: number;
}

/** An SSE client that counts the events it gets (in this process, which is idle while wrk loads). */
function follow(url: string): { events: () => number; close: () => void } {
  let events = 0;
  let buffer = '';
  const req = request(`${url}/_changes`, { agent: false, headers: { Accept: 'text/event-stream' } }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let end = buffer.indexOf('\n\n');
      while (end !== -1) {
        if (buffer.startsWith('id: ')) events++;
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
      }
    });
  });
  req.on('error', () => {});
  req.end();
  return { events: () => events, close: () => req.destroy() };
}

/** One wrk run of `scenario` against `build` on a fresh copy of the seeded data; the service pinned to core 1, wrk to core 0. */
async function measureWrites(
  backend: Backend,
  build: Build,
  scenario: (typeof SCENARIOS)[number],
  seedDir: string,
  postgres?: Postgres,
): Promise<WriteMeasure> {
  const data = mkdtempSync(join(scratch, 'run-'));
  const port = await freePort();
  let database: { name: string; url: string } | undefined;
  let child: ChildProcess | undefined;
  let stream: ReturnType<typeof follow> | undefined;
  try {
    let env: Record<string, string>;
    if (backend === 'sqlite') {
      copyFileSync(join(seedDir, build.seedFile), join(data, 'app.db'));
      env = { DATABASE_PATH: join(data, 'app.db'), PORT: String(port) };
    } else {
      database = await (postgres as Postgres).fresh();
      env = { DATABASE_URL: database.url, PORT: String(port) };
    }
    child = spawnService(build.dir, env, join(data, 'stdout.log'), SERVER_CORE);
    const url = `http://127.0.0.1:${port}`;
    await waitUntilServing(url, child);
    if (build.dropTriggers)
      await dropFeedTriggers(backend, backend === 'sqlite' ? join(data, 'app.db') : (database as { url: string }).url);
    if (build.stream) stream = follow(url);
    const options = { url, connections: CONNECTIONS, rows: ROWS, core: GENERATOR_CORE, scratch: data };
    await load(scenario.spec, { ...options, duration: 1 });
    const serviceBefore = treeCpuSeconds(child.pid as number);
    const databaseBefore = postgres?.cpu() ?? Number.NaN;
    const streamedBefore = stream?.events() ?? 0;
    const result = await load(scenario.spec, { ...options, duration: DURATION });
    const serviceCpu = treeCpuSeconds(child.pid as number) - serviceBefore;
    const databaseCpu = (postgres?.cpu() ?? Number.NaN) - databaseBefore;
    const streamed = (stream?.events() ?? 0) - streamedBefore;
    stream?.close();
    if (result.failures > 0)
      throw new Error(`${scenario.name}, ${build.name} on ${backend}: ${result.failures} failures: ${result.problems}`);
    if (stream && streamed === 0) throw new Error(`${scenario.name}, ${build.name} on ${backend}: the stream got no change`);
    await stop(child);
    // The feed's own check: its build recorded at least one change per measured write (warm-up and uncounted ones add more).
    let changes = 0;
    if (backend === 'sqlite') {
      const sqlite = new Database(join(data, 'app.db'), { readonly: true });
      const has = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE name = 'restable_changes'").get();
      changes = has ? (sqlite.prepare('SELECT count(*) AS n FROM restable_changes').get() as { n: number }).n : 0;
      sqlite.close();
    } else {
      changes = await withClient((database as { url: string }).url, async (client) => {
        const { rows } = await client.query("SELECT to_regclass('restable_changes') IS NOT NULL AS has");
        if (!rows[0].has) return 0;
        // Changes wait in the pending table until a reader sequences them (nobody read the feed here).
        const counted = await client.query(
          'SELECT (SELECT count(*) FROM restable_changes) + (SELECT count(*) FROM restable_changes_pending) AS n',
        );
        return Number(counted.rows[0].n);
      });
    }
    if ((build.name === 'feed' || build.name === 'feed + 1 stream') && changes < result.requests) {
      throw new Error(`${scenario.name} on ${backend}: ${result.requests} writes answered but only ${changes} changes recorded`);
    }
    return {
      rps: result.rps,
      p50: result.p50,
      p99: result.p99,
      requests: result.requests,
      changes,
      streamed,
      serviceCpu: (1e6 * serviceCpu) / result.requests,
      databaseCpu: (1e6 * databaseCpu) / result.requests,
    };
  } finally {
    stream?.close();
    if (child) await stop(child);
    if (database) await (postgres as Postgres).drop(database.name);
    rmSync(data, { recursive: true, force: true });
  }
}

interface CostRow {
  backend: Backend;
  scenario: string;
  /** Per variant, one measure per round (the same index is the same round). */
  runs: Map<Variant, WriteMeasure[]>;
}

/** The builds (only this one without --baseline) in rotating order (A B C, B C A, …), ROUNDS rounds per scenario. */
async function recordingCost(backend: Backend, builds: Build[], seedDir: string, postgres?: Postgres): Promise<CostRow[]> {
  const rows: CostRow[] = [];
  for (const scenario of SCENARIOS) {
    const row: CostRow = { backend, scenario: scenario.name, runs: new Map(builds.map((b) => [b.name, []])) };
    for (let round = 0; round < ROUNDS; round++) {
      // A drifting machine favours no variant.
      for (const build of builds.map((_, i) => builds[(i + round) % builds.length] as Build)) {
        const m = await measureWrites(backend, build, scenario, seedDir, postgres);
        row.runs.get(build.name)?.push(m);
        const pgCpu = Number.isNaN(m.databaseCpu) ? '' : ` + PostgreSQL ${m.databaseCpu.toFixed(0)}`;
        process.stderr.write(
          `${backend} ${scenario.name} round ${round + 1} ${build.name.padEnd(15)} ${Math.round(m.rps).toLocaleString('en').padStart(7)} req/s  p99 ${m.p99.toFixed(1)} ms  CPU µs/req: service ${m.serviceCpu.toFixed(0)}${pgCpu}  changes ${m.changes}${build.stream ? `  streamed ${m.streamed}` : ''}\n`,
        );
      }
    }
    rows.push(row);
  }
  return rows;
}

// --- 2. latency from commit to delivery ---

/**
 * The SSE clients, in a worker thread so that parsing 100 streams does not delay the writer (plain
 * JavaScript: tsx does not load TypeScript into worker threads on Node 20). Each client is one
 * http connection; an event's time is when its chunk arrived (process.hrtime, one clock for every
 * thread). Every event is read by a regular expression on the first fields of `data` (the service
 * writes them in this order); client 0 also parses every `data` as JSON and checks it in full.
 */
const CLIENT_THREAD = String.raw`
const { workerData, parentPort } = require('node:worker_threads');
const http = require('node:http');
const { readFileSync } = require('node:fs');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const now = () => Number(process.hrtime.bigint()) / 1e6;
const threadCpu = () => {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / workerData.ticks;
  } catch { return NaN; }
};
const FAST = /^id: (\d+)\nevent: (\w+)\ndata: \{"seq":(\d+),"kind":"([^"]*)","id":(\d+),"op":"(\w+)","at":"[^"]*","element":\{/;
const clients = workerData.urls.map((url, index) => ({
  index, url, buffer: '', start: undefined, last: undefined, gaps: 0, events: 0, bytes: 0, creates: 0,
  ids: new Float64Array(1024), times: new Float64Array(1024), malformed: 0, checked: 0, ended: false, error: '',
}));
const push = (c, id, time) => {
  if (c.creates === c.ids.length) {
    const ids = new Float64Array(c.ids.length * 2); ids.set(c.ids); c.ids = ids;
    const times = new Float64Array(c.times.length * 2); times.set(c.times); c.times = times;
  }
  c.ids[c.creates] = id; c.times[c.creates] = time; c.creates++;
};
const onBlock = (c, block, time) => {
  if (c.start === undefined) {
    const opening = /^: changes after (\d+)$/m.exec(block);
    if (opening) { c.start = c.last = Number(opening[1]); check(); }
    return;
  }
  if (block.startsWith(':') || !block.includes('data:')) return; // heartbeats
  const m = FAST.exec(block);
  if (!m || m[1] !== m[3]) { c.malformed++; return; }
  const seq = Number(m[3]);
  if (seq !== c.last + 1) c.gaps++;
  c.last = seq;
  c.events++;
  if (c.index === 0) {
    const change = JSON.parse(block.slice(block.indexOf('data: ') + 6));
    if (change.seq !== seq || change.kind !== m[4] || change.id !== Number(m[5]) || change.op !== m[2] || change.op !== m[6] ||
        typeof change.at !== 'string' || (change.op === 'create' && change.element?.id !== change.id)) c.malformed++;
    else c.checked++;
  }
  if (m[4] === 'users' && m[6] === 'create') push(c, Number(m[5]), time);
};
const loop = monitorEventLoopDelay({ resolution: 5 });
let cpuAtStart = 0, startedAt = 0, expected = Infinity, deadline = Infinity;
const check = () => {
  if (clients.every((c) => c.start !== undefined) && !startedAt) {
    startedAt = now(); cpuAtStart = threadCpu(); loop.enable();
    parentPort.postMessage({ type: 'open' });
  }
  if (startedAt && (clients.every((c) => c.creates >= expected || c.ended) || now() > deadline)) finish();
};
let finished = false;
const finish = () => {
  if (finished) return;
  finished = true;
  loop.disable();
  const seconds = (now() - startedAt) / 1000;
  const results = clients.map((c) => ({
    url: c.url, start: c.start, last: c.last, gaps: c.gaps, events: c.events, bytes: c.bytes, creates: c.creates,
    ids: c.ids.slice(0, c.creates), times: c.times.slice(0, c.creates), malformed: c.malformed, checked: c.checked,
    ended: c.ended, error: c.error,
  }));
  parentPort.postMessage(
    { type: 'done', results, cpu: threadCpu() - cpuAtStart, seconds, loopP99: loop.percentile(99) / 1e6, loopMax: loop.max / 1e6 },
    results.flatMap((r) => [r.ids.buffer, r.times.buffer]),
  );
};
for (const c of clients) {
  c.request = http.get(c.url + '/_changes', { agent: false, headers: { Accept: 'text/event-stream' } }, (res) => {
    if (res.statusCode !== 200) { c.error = 'status ' + res.statusCode; c.ended = true; res.resume(); return; }
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      const time = now();
      c.bytes += chunk.length;
      c.buffer += chunk;
      let end;
      while ((end = c.buffer.indexOf('\n\n')) !== -1) {
        onBlock(c, c.buffer.slice(0, end), time);
        c.buffer = c.buffer.slice(end + 2);
      }
      if (expected !== Infinity && c.creates >= expected) check();
    });
    res.on('end', () => { if (!finished) { c.ended = true; c.error ||= 'the stream ended'; check(); } });
  });
  c.request.on('error', (error) => { if (!finished) { c.ended = true; c.error ||= error.message; check(); } });
}
parentPort.on('message', (message) => {
  if (message.type === 'drain') { expected = message.expected; deadline = now() + message.withinMs; check(); setInterval(check, 50).unref(); }
});
`;

interface ClientResult {
  url: string;
  start: number;
  last: number;
  gaps: number;
  events: number;
  bytes: number;
  creates: number;
  ids: Float64Array;
  times: Float64Array;
  malformed: number;
  checked: number;
  ended: boolean;
  error: string;
}
interface ClientsDone {
  results: ClientResult[];
  cpu: number;
  seconds: number;
  loopP99: number;
  loopMax: number;
}

const now = () => Number(process.hrtime.bigint()) / 1e6;

/** One write of the paced writer: which instance it went to, when it was sent and answered, the element it made. */
interface Write {
  target: number;
  sent: number;
  answered: number;
  id: number;
}

/**
 * POSTs `RATE` users a second for `seconds` (open loop: each is sent when due, whatever the answers
 * before it), round robin over `bases`, over keep-alive connections; resolves once every answer is in.
 */
async function paceWrites(bases: string[], seconds: number): Promise<{ writes: Write[]; failures: string[] }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const writes: Write[] = [];
  const failures: string[] = [];
  const total = Math.round(RATE * seconds);
  let pending = 0;
  let sent = 0;
  const started = now();
  await new Promise<void>((done) => {
    const send = (n: number) => {
      const target = n % bases.length;
      const url = new URL('/users', bases[target]);
      const body = JSON.stringify({ name: `Feed ${n}`, email: `feed-${process.pid}-${n}@example.com` });
      const write: Write = { target, sent: now(), answered: Number.NaN, id: Number.NaN };
      pending++;
      const req = request(
        url,
        { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': body.length } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => {
            text += chunk;
          });
          res.on('end', () => {
            write.answered = now();
            if (res.statusCode === 201) {
              write.id = JSON.parse(text).id;
              writes.push(write);
            } else failures.push(`${res.statusCode} ${text.slice(0, 200)}`);
            if (--pending === 0 && sent === total) done();
          });
        },
      );
      req.on('error', (error) => {
        failures.push(error.message);
        if (--pending === 0 && sent === total) done();
      });
      req.end(body);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(((now() - started) / 1000) * RATE));
      while (sent < due) send(sent++);
      if (sent < total) setTimeout(tick, 1);
      else if (pending === 0) done();
    };
    tick();
  });
  agent.destroy();
  return { writes, failures };
}

interface LatencyResult {
  backend: Backend;
  setup: string;
  clients: number;
  writes: number;
  warmupWrites: number;
  rateAchieved: number;
  postP50: number;
  postP99: number;
  /** Delivery minus the write's answer (≤ commit to delivery), and minus its sending (≥), ms. */
  fromAnswer: Float64Array;
  fromSend: Float64Array;
  /** PostgreSQL: deliveries by the instance that made the write, and by the other one (from the answer). */
  sameInstance?: Float64Array;
  otherInstance?: Float64Array;
  deliveries: number;
  problems: string[];
  streamsPer: string;
  serviceCpu: number;
  databaseCpu: number;
  benchCpu: number;
  clientThreadCpu: number;
  clientLoopP99: number;
  cores: number[];
  seconds: number;
}

/** Streams per process from the request log (each stream is logged when the service ends it at shutdown). */
function streamsPerProcess(logs: string[]): string {
  const counts = new Map<string, number>();
  logs.forEach((file, i) => {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"msg":"GET /_changes 200"')) continue;
      const worker = /"worker":(\d+)/.exec(line)?.[1];
      const key = worker ? `worker ${worker}` : `instance ${i + 1}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  });
  return [...counts.entries()]
    .sort()
    .map(([key, count]) => `${key}: ${count}`)
    .join(', ');
}

/** One latency run: the service(s) on fresh data, CLIENTS streams connected, then the paced writer; every client checked. */
async function latency(backend: Backend, seedDir: string, postgres?: Postgres): Promise<LatencyResult> {
  const data = mkdtempSync(join(scratch, 'latency-'));
  const services: ChildProcess[] = [];
  const logs: string[] = [];
  let database: { name: string; url: string } | undefined;
  let thread: Worker | undefined;
  try {
    const bases: string[] = [];
    let setup: string;
    if (backend === 'sqlite') {
      copyFileSync(join(seedDir, 'app.db'), join(data, 'app.db'));
      const port = await freePort();
      logs.push(join(data, 'stdout.log'));
      services.push(
        spawnService(ROOT, { DATABASE_PATH: join(data, 'app.db'), PORT: String(port), WORKERS: '2' }, logs[0] as string, undefined),
      );
      bases.push(`http://127.0.0.1:${port}`);
      setup = 'one service, `WORKERS=2`';
    } else {
      database = await (postgres as Postgres).fresh();
      for (let i = 0; i < 2; i++) {
        const port = await freePort();
        logs.push(join(data, `stdout-${i + 1}.log`));
        services.push(spawnService(ROOT, { DATABASE_URL: database.url, PORT: String(port) }, logs[i] as string, undefined));
        bases.push(`http://127.0.0.1:${port}`);
      }
      setup = 'two instances, one database';
    }
    for (const [i, base] of bases.entries()) await waitUntilServing(base, services[i] as ChildProcess);
    // With WORKERS=2 the first answer may come from the first worker while the second still starts: the
    // cluster primary hands connections only to workers that listen, so wait for both before connecting.
    if (backend === 'sqlite') await waitForLog(logs[0] as string, /"worker":\d+,.*"msg":"restable listening on/g, 2);

    // The clients connect (split over the instances), and the writer starts once every one has its stream open.
    const urls = Array.from({ length: CLIENTS }, (_, i) => bases[i % bases.length] as string);
    const clientThread = new Worker(CLIENT_THREAD, { eval: true, workerData: { urls, ticks: TICKS } });
    thread = clientThread;
    const messages: { type: string }[] = [];
    let wake = () => {};
    clientThread.on('message', (message) => {
      messages.push(message);
      wake();
    });
    const failed = new Promise<never>((_, fail) => clientThread.once('error', fail));
    const next = (type: string, withinMs: number) =>
      Promise.race([
        failed,
        new Promise<ClientsDone & { type: string }>((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`the SSE clients: no '${type}' within ${withinMs} ms`)), withinMs);
          const look = () => {
            const found = messages.find((m) => m.type === type);
            if (!found) return;
            clearTimeout(timer);
            done(found as ClientsDone & { type: string });
          };
          wake = look;
          look();
        }),
      ]);
    await next('open', 30_000);

    const pids = services.map((s) => s.pid as number);
    const serviceBefore = pids.reduce((sum, pid) => sum + treeCpuSeconds(pid), 0);
    const databaseBefore = postgres?.cpu() ?? Number.NaN;
    const benchBefore = process.cpuUsage();
    const coresBefore = coreTimes();
    const started = now();
    const { writes, failures } = await paceWrites(bases, WARMUP_SECONDS + SECONDS);
    const writing = (now() - started) / 1000;
    // Every client must now receive every write: at most 10 s more.
    clientThread.postMessage({ type: 'drain', expected: writes.length, withinMs: 10_000 });
    const done = await next('done', 60_000);
    const seconds = (now() - started) / 1000;
    const cores = coreUse(coresBefore, coreTimes());
    const benchUsage = process.cpuUsage(benchBefore);
    const serviceCpu = pids.reduce((sum, pid) => sum + treeCpuSeconds(pid), 0) - serviceBefore;
    const databaseCpu = (postgres?.cpu() ?? Number.NaN) - databaseBefore;

    const problems: string[] = [];
    if (failures.length) problems.push(`${failures.length} writes failed (${[...new Set(failures)].slice(0, 3).join('; ')})`);
    const byId = new Map(writes.map((w) => [w.id, w]));
    const warmupEnd = started + WARMUP_SECONDS * 1000;
    const counted = writes.filter((w) => w.sent >= warmupEnd).length;
    const fromAnswer = new Float64Array(counted * CLIENTS);
    const fromSend = new Float64Array(counted * CLIENTS);
    const same: number[] = [];
    const other: number[] = [];
    let n = 0;
    let deliveries = 0;
    for (const [index, client] of done.results.entries()) {
      const where = `client ${index} (${client.url})`;
      if (client.error) problems.push(`${where}: ${client.error}`);
      if (client.gaps) problems.push(`${where}: ${client.gaps} seqs out of order or skipped`);
      if (client.malformed) problems.push(`${where}: ${client.malformed} malformed events`);
      const seen = new Set<number>();
      let duplicates = 0;
      let strangers = 0;
      for (let i = 0; i < client.creates; i++) {
        const id = client.ids[i] as number;
        const write = byId.get(id);
        if (!write) {
          strangers++;
          continue;
        }
        if (seen.has(id)) {
          duplicates++;
          continue;
        }
        seen.add(id);
        deliveries++;
        if (write.sent < warmupEnd) continue;
        const time = client.times[i] as number;
        fromAnswer[n] = time - write.answered;
        fromSend[n] = time - write.sent;
        n++;
        if (backend === 'postgres') (write.target === index % bases.length ? same : other).push(time - write.answered);
      }
      const missing = writes.length - seen.size;
      if (missing || duplicates || strangers) {
        problems.push(`${where}: ${missing} writes never delivered, ${duplicates} delivered twice, ${strangers} unknown creates`);
      }
    }
    if (done.results[0] && done.results[0].checked === 0 && writes.length > 0) problems.push('client 0 checked no event in full');
    // Stopping ends the streams, which logs each (streamsPerProcess); only then do the clients go.
    await Promise.all(services.map(stop));
    await clientThread.terminate();
    const sort = (values: ArrayLike<number>) => Float64Array.from(values).sort();
    const answered = writes.map((w) => w.answered - w.sent);
    const postLatencies = sort(answered);
    return {
      backend,
      setup,
      clients: CLIENTS,
      writes: writes.length,
      warmupWrites: writes.length - counted,
      rateAchieved: writes.length / writing,
      postP50: percentile(postLatencies, 50),
      postP99: percentile(postLatencies, 99),
      fromAnswer: sort(fromAnswer.subarray(0, n)),
      fromSend: sort(fromSend.subarray(0, n)),
      ...(backend === 'postgres' && { sameInstance: sort(same), otherInstance: sort(other) }),
      deliveries,
      problems,
      streamsPer: streamsPerProcess(logs),
      serviceCpu: (100 * serviceCpu) / seconds,
      databaseCpu: (100 * databaseCpu) / seconds,
      benchCpu: (100 * (benchUsage.user + benchUsage.system)) / 1e6 / seconds,
      clientThreadCpu: (100 * done.cpu) / done.seconds,
      clientLoopP99: done.loopP99,
      cores,
      seconds,
    };
  } finally {
    await Promise.all(services.map(stop));
    await thread?.terminate();
    if (database) await (postgres as Postgres).drop(database.name);
    rmSync(data, { recursive: true, force: true });
  }
}

// --- the run ---

const backends = (args.backend?.split(',') ?? (PG_ADMIN ? ['sqlite', 'postgres'] : ['sqlite'])) as Backend[];
if (!backends.length || backends.some((b) => b !== 'sqlite' && b !== 'postgres'))
  throw new Error('--backend takes sqlite, postgres or sqlite,postgres');
if (backends.includes('postgres') && !PG_ADMIN) throw new Error('--backend postgres needs --pg-url (an admin URL of a PostgreSQL server)');
const seedDir = join(scratch, 'seed');
const stamp = new Date().toISOString();
mkdirSync(seedDir);
process.stderr.write(`seeding ${ROWS} users… `);
seedSqlite(ROOT, join(seedDir, 'app.db'), stamp);
if (BASELINE && backends.includes('sqlite') && ONLY !== 'latency') seedSqlite(BASELINE, join(seedDir, 'baseline.db'), stamp);
const postgres = backends.includes('postgres') ? await startPostgres(PG_ADMIN as string, stamp) : undefined;
process.stderr.write('done\n');
const builds: Build[] = [
  { name: 'feed', dir: ROOT, seedFile: 'app.db', stream: false },
  { name: 'feed + 1 stream', dir: ROOT, seedFile: 'app.db', stream: true },
  { name: 'triggers off', dir: ROOT, seedFile: 'app.db', stream: false, dropTriggers: true },
  ...(BASELINE ? [{ name: 'no feed', dir: BASELINE, seedFile: 'baseline.db', stream: false } satisfies Build] : []),
];
const costs: CostRow[] = [];
const latencies: LatencyResult[] = [];
try {
  for (const backend of ONLY === 'latency' ? [] : backends) {
    costs.push(...(await recordingCost(backend, builds, seedDir, backend === 'postgres' ? postgres : undefined)));
  }
  for (const backend of ONLY === 'cost' ? [] : backends) {
    const result = await latency(backend, seedDir, backend === 'postgres' ? postgres : undefined);
    latencies.push(result);
    process.stderr.write(
      `${backend} latency: ${result.writes} writes, ${result.deliveries} deliveries, p50 ${percentile(result.fromAnswer, 50).toFixed(1)} ms, p99 ${percentile(result.fromAnswer, 99).toFixed(1)} ms${result.problems.length ? `; PROBLEMS: ${result.problems.slice(0, 5).join(' | ')}` : ''}\n`,
    );
  }
} finally {
  await postgres?.close();
}

// --- the report ---

const describeCheckout = (dir: string) => {
  const git = (...argv: string[]) =>
    execFileSync('git', ['-C', dir, ...argv], { env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' }, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  try {
    const commit = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') ? `${commit} + uncommitted changes` : commit;
  } catch {
    return 'not a git checkout';
  }
};
const fileSystem = (() => {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', tmpdir()]).toString().trim();
  } catch {
    return 'unknown';
  }
})();
const ms = (value: number) => (Number.isFinite(value) ? (value < 10 ? value.toFixed(2) : value.toFixed(1)) : '–');
const sqliteVersion = new Database(':memory:').prepare('select sqlite_version() v').pluck().get();
const lines = [
  `Node ${process.version}, SQLite ${sqliteVersion}${postgres ? `, ${postgres.describe}` : ''}; ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores; data on ${fileSystem}.`,
  `This checkout: ${describeCheckout(ROOT)}${BASELINE ? `; no feed: ${describeCheckout(BASELINE)} (${BASELINE})` : ''}. The service at its defaults: \`LOG_LEVEL=info\` to a file, \`DATABASE_SYNCHRONOUS=FULL\`.`,
  `Command: \`npx tsx bench/feed.ts ${process.argv.slice(2).join(' ')}\`${SMOKE ? ' (smoke: figures mean nothing)' : ''}.`,
];
const costLines = [
  '',
  `### The cost of recording: wrk, ${CONNECTIONS} connections, 1 s warm-up + ${DURATION} s, ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} in alternation, medians`,
  '',
  `The service pinned to core ${SERVER_CORE ?? '–'}, wrk to core ${GENERATOR_CORE ?? '–'}${postgres ? ', PostgreSQL unpinned' : ''}; ${ROWS.toLocaleString('en')} users. \`feed\`: this build, nobody reading the feed (recording alone); \`triggers off\`: the same build with the feed's triggers dropped after it started (nothing recorded); \`feed + 1 stream\`: this build with one SSE client following the feed during the load; \`no feed\`: the build in --baseline, from before the feed. \`per round\` pairs the runs of each round (measured seconds apart): a range that straddles 1 is noise. CPU per request: the service's process, and the whole PostgreSQL server.`,
  '',
  '| backend | scenario | feed req/s | triggers off req/s | feed / triggers off | per round: median (min–max) | feed + 1 stream req/s | ÷ triggers off | no feed req/s | feed / no feed | p99 ms (feed / 1 stream / triggers off) | service CPU µs/req (feed / triggers off) | PostgreSQL CPU µs/req (feed / triggers off) |',
  '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
];
if (costs.length) lines.push(...costLines);
const count = (value: number, digits = 0) => (Number.isFinite(value) ? value.toLocaleString('en', { maximumFractionDigits: digits }) : '–');
for (const row of costs) {
  const runs = (variant: Variant) => row.runs.get(variant) ?? [];
  const pick = (variant: Variant, f: (m: WriteMeasure) => number) => (runs(variant).length ? median(runs(variant).map(f)) : Number.NaN);
  const rate = (variant: Variant) => pick(variant, (m) => m.rps);
  const paired = runs(REFERENCE).map((m, i) => (runs('feed')[i]?.rps ?? Number.NaN) / m.rps);
  const range = paired.length ? `${median(paired).toFixed(2)} (${Math.min(...paired).toFixed(2)}–${Math.max(...paired).toFixed(2)})` : '–';
  const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? (a / b).toFixed(2) : '–');
  lines.push(
    `| ${row.backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'} | ${row.scenario} | ${count(rate('feed'))} | ${count(rate(REFERENCE))} | ${ratio(rate('feed'), rate(REFERENCE))} | ${range} | ${count(rate('feed + 1 stream'))} | ${ratio(rate('feed + 1 stream'), rate(REFERENCE))} | ${count(rate('no feed'))} | ${ratio(rate('feed'), rate('no feed'))} | ${(['feed', 'feed + 1 stream', REFERENCE] as const).map((v) => ms(pick(v, (m) => m.p99))).join(' / ')} | ${count(pick('feed', (m) => m.serviceCpu))} / ${count(pick(REFERENCE, (m) => m.serviceCpu))} | ${count(pick('feed', (m) => m.databaseCpu))} / ${count(pick(REFERENCE, (m) => m.databaseCpu))} |`,
  );
}
if (latencies.length)
  lines.push(
    '',
    `### Latency from commit to delivery: ${CLIENTS} SSE clients, ${RATE.toLocaleString('en')} creates/s for ${WARMUP_SECONDS} s (not counted) + ${SECONDS} s`,
    '',
    '`after answer`: the time a client got the event minus the time the write’s 201 reached the writer (the commit came before the answer, so this is at most the commit-to-delivery time); `after send`: minus the time the write was sent (at least it). One sample per client and write. Nothing is pinned: the service, PostgreSQL, the writer and the clients share the cores.',
    '',
    '| backend | setup | writes/s (asked / made) | deliveries | after answer p50 / p90 / p99 / max ms | after send p50 / p99 ms | POST p50 / p99 ms | streams per process | service CPU % | PostgreSQL CPU % | bench CPU % (client thread) | cores busy % |',
    '|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|',
  );
for (const r of latencies) {
  const p = (values: Float64Array, q: number) => ms(percentile(values, q));
  lines.push(
    `| ${r.backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'} | ${r.setup} | ${RATE} / ${Math.round(r.rateAchieved)} | ${r.deliveries.toLocaleString('en')} | ${p(r.fromAnswer, 50)} / ${p(r.fromAnswer, 90)} / ${p(r.fromAnswer, 99)} / ${ms(r.fromAnswer.at(-1) ?? Number.NaN)} | ${p(r.fromSend, 50)} / ${p(r.fromSend, 99)} | ${ms(r.postP50)} / ${ms(r.postP99)} | ${r.streamsPer} | ${r.serviceCpu.toFixed(0)} | ${Number.isFinite(r.databaseCpu) ? r.databaseCpu.toFixed(0) : '–'} | ${r.benchCpu.toFixed(0)} (${r.clientThreadCpu.toFixed(0)}) | ${r.cores.map((c) => c.toFixed(0)).join(' / ')} |`,
  );
}
for (const r of latencies) {
  if (r.sameInstance && r.otherInstance) {
    const p = (values: Float64Array) => `${ms(percentile(values, 50))} / ${ms(percentile(values, 99))}`;
    lines.push(
      '',
      `PostgreSQL, after answer p50 / p99 ms: a write read by a client of the instance that made it ${p(r.sameInstance)}, of the other instance ${p(r.otherInstance)}.`,
    );
  }
  lines.push(
    '',
    `${r.backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'}: client thread event-loop delay p99 ${ms(r.clientLoopP99)} ms; ${r.problems.length ? `**problems**: ${r.problems.join('; ')}` : `every client got every write once, in seq order, with no gap (${r.warmupWrites} warm-up writes delivered but not counted).`}`,
  );
}
const worst = Math.max(...latencies.map((r) => percentile(r.fromAnswer, 99)));
const ratios = costs
  .filter((c) => c.runs.get(REFERENCE)?.length)
  .map((c) => median((c.runs.get('feed') ?? []).map((m) => m.rps)) / median((c.runs.get(REFERENCE) ?? []).map((m) => m.rps)));
lines.push(
  '',
  `Targets${SMOKE ? ' (a smoke run: not judged)' : ''}: recording costs at most 10 %: ${ratios.length ? `${ratios.every((r) => r >= 0.9) ? 'met' : '**not met**'} (feed / triggers off ${ratios.map((r) => r.toFixed(2)).join(', ')})` : 'not measured'}; a change reaches every client within 1 s: ${latencies.length ? `p99 ${ms(worst)} ms, ${worst < 1000 ? 'met' : '**not met**'}` : 'not measured'}.`,
);
console.log(`\n${lines.join('\n')}`);
const problems = latencies.flatMap((r) => r.problems);
if (problems.length) {
  console.error(`bench:feed: the feed did not deliver every write exactly once and in order (${problems.length} problems above)`);
  process.exitCode = 1;
}

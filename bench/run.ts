// The benchmark harness (`npm run bench`): restable in its default configuration, the same build over a
// 300-table schema and the floor (bench/floor.mjs), loaded by wrk in alternating rounds; medians, ratios.
// Options: --rows --duration --warmup --rounds --connections --servers --scenarios --wide-tables --out --baseline <checkout>
//          --backend sqlite|postgres|sqlite,postgres (PostgreSQL: one instance and three behind haproxy) --pg-url <admin URL>
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { available, type LoadResult, type LoadSpec, load } from './load.js';
import { freePort, GENERATOR_CORE, hasTaskset, pinned, SERVER_CORE, START_ARGV, stop, waitUntilServing } from './processes.js';
import { insertRows, migrate } from './rows.js';
import { makeWideInstall, type WideInstall } from './tables.js';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    // Without --servers: floor, restable and restable-300-tables, plus restable-baseline when --baseline is given.
    servers: { type: 'string' },
    scenarios: { type: 'string' },
    // How many tables restable-300-tables serves (the shipped ones plus generated ones).
    'wide-tables': { type: 'string', default: '300' },
    out: { type: 'string', default: 'bench/results.md' },
    // Another checkout of restable, built (dist/ and node_modules/): served as `restable-baseline`.
    baseline: { type: 'string' },
    // sqlite (the default: the servers above), postgres (floor, restable and the PostgreSQL variants) or both.
    backend: { type: 'string', default: 'sqlite' },
    // A PostgreSQL server to benchmark on (a URL that may create and drop databases); else TEST_DATABASE_URL,
    // else a throwaway server started for the run (test/support/pg-cluster.mjs) and stopped at the end.
    'pg-url': { type: 'string' },
  },
});
const ROWS = Number(args.rows);
const DURATION = Number(args.duration);
const WARMUP = Number(args.warmup);
const ROUNDS = Number(args.rounds);
const CONNECTIONS = Number(args.connections);
const WIDE_TABLES = Number(args['wide-tables']);
const ROOT = new URL('..', import.meta.url).pathname;
const BASELINE = args.baseline ? resolve(args.baseline) : undefined;
const BACKENDS = (args.backend as string).split(',').map((b) => b.trim());
if (!BACKENDS.length || BACKENDS.some((b) => b !== 'sqlite' && b !== 'postgres')) {
  throw new Error(`--backend ${args.backend}: expected sqlite, postgres or sqlite,postgres`);
}
// wrk takes whole seconds; 0 s of warm-up skips it.
for (const [name, value, least] of [
  ['--duration', DURATION, 1],
  ['--warmup', WARMUP, 0],
  ['--rounds', ROUNDS, 1],
  ['--rows', ROWS, 2],
  ['--connections', CONNECTIONS, 1],
  ['--wide-tables', WIDE_TABLES, 4],
] as const) {
  if (!Number.isInteger(value) || value < least) throw new Error(`${name} must be a whole number ≥ ${least}`);
}

type Kind = 'restable' | 'floor' | 'json-server';
interface ServerSpec {
  name: string;
  kind: Kind;
  /** Its argv (relative to its folder) and environment, given its data folder and port. */
  command: (data: string, port: number, databaseUrl?: string) => { argv: string[]; env: Record<string, string> };
  /** Pinned to SERVER_CORE, unless it is the multi-process variant. */
  pin: boolean;
  /** Where the server runs (its argv is relative to it); this checkout unless said otherwise. */
  cwd?: () => string;
  /** The seeded SQLite file it gets a copy of; `app.db` (migrated by this checkout) unless said otherwise. */
  seedFile?: string;
  /** How it differs from `restable`, for the report. */
  note?: string;
  /** Served from PostgreSQL (a fresh copy of the seeded database per run), by this many instances (more: behind haproxy). */
  postgres?: { instances: number };
}

/**
 * restable's default configuration: only where the database is and the port are set, so LOG_LEVEL is
 * info (one log line per request, to stdout, which measure() sends to a file) and DATABASE_SYNCHRONOUS
 * is FULL. The floor commits at NORMAL: the issue's targets compare the two as they are.
 */
const restableEnv = (data: string, port: number) => ({ DATABASE_PATH: join(data, 'app.db'), PORT: String(port) });
const restable = (data: string, port: number) => ({ argv: START_ARGV, env: restableEnv(data, port) });
/** The default configuration over PostgreSQL: only the database URL and the port. */
function restablePostgres(_data: string, port: number, databaseUrl?: string) {
  if (!databaseUrl) throw new Error('a PostgreSQL server needs its database URL');
  return { argv: START_ARGV, env: { DATABASE_URL: databaseUrl, PORT: String(port) } };
}

/** The wide-schema install, made by main() before the first round when restable-300-tables runs. */
let wide: WideInstall | undefined;
const WIDE_NAME = `restable-${WIDE_TABLES}-tables`;

const SERVERS: ServerSpec[] = [
  { name: 'floor', kind: 'floor', pin: true, command: (data, port) => ({ argv: ['bench/floor.mjs'], env: restableEnv(data, port) }) },
  // The floor plus only what every answer must carry (request id, security headers, element ETag, log line):
  // the ceiling of any server that keeps the contract on node:http. Not run unless named in --servers.
  {
    name: 'floor-contract',
    kind: 'floor',
    pin: true,
    note: 'the floor plus the headers, ETag and log line the contract requires',
    command: (data, port) => ({ argv: ['bench/floor.mjs'], env: { ...restableEnv(data, port), FLOOR_CONTRACT: '1' } }),
  },
  { name: 'restable', kind: 'restable', pin: true, command: restable },
  // The same build serving the shipped tables and generated ones: routing and start-up must not grow with them.
  {
    name: WIDE_NAME,
    kind: 'restable',
    pin: true,
    cwd: () => (wide as WideInstall).dir,
    seedFile: 'wide.db',
    command: restable,
  },
  // The same service from another checkout (--baseline), on the same rows, so that a change is
  // judged by its ratio to the code before it within one run: this VM varies ±20 % between runs.
  ...(BASELINE
    ? [
        {
          name: 'restable-baseline',
          kind: 'restable',
          pin: true,
          cwd: () => BASELINE,
          seedFile: 'baseline.db',
          note: 'the build in --baseline, same settings',
          command: restable,
        } satisfies ServerSpec,
      ]
    : []),
  // Not run unless named in --servers.
  {
    name: 'restable-log-warn',
    kind: 'restable',
    pin: true,
    note: '`LOG_LEVEL=warn`: what the request log costs',
    command: (data, port) => ({ argv: START_ARGV, env: { ...restableEnv(data, port), LOG_LEVEL: 'warn' } }),
  },
  {
    name: 'restable-2-workers',
    kind: 'restable',
    pin: false,
    note: '`WORKERS=2`, unpinned',
    command: (data, port) => ({ argv: START_ARGV, env: { ...restableEnv(data, port), WORKERS: '2' } }),
  },
  // Issue 13: the same build served from PostgreSQL, with only DATABASE_URL and PORT set (LOG_LEVEL=info to a
  // file, the default pool of 10 connections); one instance pinned like `restable`, and three behind haproxy.
  {
    name: 'restable-postgres',
    kind: 'restable',
    pin: true,
    postgres: { instances: 1 },
    command: restablePostgres,
  },
  {
    name: 'restable-postgres-3',
    kind: 'restable',
    pin: false,
    postgres: { instances: 3 },
    note: 'three instances behind haproxy (round robin, keep-alive to the instances), all unpinned',
    command: restablePostgres,
  },
  {
    name: 'json-server',
    kind: 'json-server',
    pin: true,
    command: (data, port) => ({
      argv: ['node_modules/json-server/lib/cli/bin.js', join(data, 'db.json'), '--port', String(port), '--quiet'],
      env: {},
    }),
  },
];
const SQLITE_SERVERS = ['floor', 'restable', WIDE_NAME, ...(BASELINE ? ['restable-baseline'] : [])];
const POSTGRES_SERVERS = ['restable-postgres', 'restable-postgres-3'];
/** `--backend postgres` compares with SQLite in the same run (floor and restable); `sqlite,postgres` runs both sets in full. */
const DEFAULT_SERVERS = BACKENDS.includes('sqlite')
  ? [...SQLITE_SERVERS, ...(BACKENDS.includes('postgres') ? POSTGRES_SERVERS : [])]
  : ['floor', 'restable', ...POSTGRES_SERVERS];

interface Scenario {
  name: string;
  /** `main`: the floor (and json-server) answer it too; `hot`: restable's hot path, compared with its own GET element. */
  group: 'main' | 'hot';
  /** What to send to a server of this kind; undefined when that kind has no equivalent. */
  request: (kind: Kind) => LoadSpec | undefined;
  /** The issue's target against the floor (main scenarios). */
  floorTarget?: number;
}

const JSON_BODY = { 'Content-Type': 'application/json' };
const SCENARIOS: Scenario[] = [
  { name: 'GET element', group: 'main', floorTarget: 0.9, request: () => ({ method: 'GET', path: '/users/{id}', status: 200 }) },
  {
    name: 'GET first page of 100',
    group: 'main',
    floorTarget: 0.9,
    request: (kind) => ({ method: 'GET', path: kind === 'json-server' ? '/users?_limit=100' : '/users', status: 200 }),
  },
  {
    name: 'GET related list',
    group: 'main',
    floorTarget: 0.9,
    request: () => ({ method: 'GET', path: '/users/{id}/pets', status: 200 }),
  },
  {
    name: 'PATCH',
    group: 'main',
    floorTarget: 0.8,
    request: () => ({ method: 'PATCH', path: '/users/{id}', headers: JSON_BODY, body: '{"name":"n{n}"}', status: 200 }),
  },
  {
    name: 'POST create',
    group: 'main',
    floorTarget: 0.8,
    request: () => ({
      method: 'POST',
      path: '/users',
      headers: JSON_BODY,
      body: '{"name":"Bench","email":"bench-{n}@example.com"}',
      status: 201,
    }),
  },
  // The floor answers HEAD as GET (node:http drops the body), so HEAD has a floor; the rest do not.
  {
    name: 'HEAD element',
    group: 'hot',
    request: (kind) => (kind === 'json-server' ? undefined : { method: 'HEAD', path: '/users/{id}', status: 200 }),
  },
  { name: 'OPTIONS element', group: 'hot', request: (kind) => onlyRestable(kind, { method: 'OPTIONS', path: '/users/{id}', status: 204 }) },
  {
    name: '404 unknown path',
    group: 'hot',
    request: (kind) => onlyRestable(kind, { method: 'GET', path: '/no-such-collection/{id}', status: 404 }),
  },
  { name: '405 DELETE collection', group: 'hot', request: (kind) => onlyRestable(kind, { method: 'DELETE', path: '/users', status: 405 }) },
  {
    name: '406 Accept text/html',
    group: 'hot',
    request: (kind) => onlyRestable(kind, { method: 'GET', path: '/users/{id}', headers: { Accept: 'text/html' }, status: 406 }),
  },
];
function onlyRestable(kind: Kind, spec: LoadSpec): LoadSpec | undefined {
  return kind === 'restable' ? spec : undefined;
}

/**
 * The same rows for everyone, in a database migrated by the build that serves it (each refuses a
 * database migrated by a newer version, and the wide install has one more migration): `app.db` for
 * this checkout and the floor, `wide.db`, `baseline.db`, and `db.json` for json-server. Returns the
 * rows' timestamp, for PostgreSQL's seed.
 */
function seed(dir: string, servers: ServerSpec[]): string {
  const now = new Date().toISOString();
  const databases: [string, string][] = [[ROOT, 'app.db']];
  if (wide) databases.push([wide.dir, 'wide.db']);
  if (BASELINE && servers.some((s) => s.name === 'restable-baseline')) databases.push([BASELINE, 'baseline.db']);
  let rows: { users: object[]; pets: object[] } | undefined;
  for (const [install, name] of databases) {
    migrate(install, join(dir, name));
    rows = insertRows(join(dir, name), ROWS, now);
  }
  if (servers.some((s) => s.kind === 'json-server')) writeFileSync(join(dir, 'db.json'), JSON.stringify(rows));
  return now;
}

/** The PostgreSQL server of a run: where it is, the seeded template database, and what to report about it. */
interface Postgres {
  /** A URL that may create and drop databases. */
  admin: string;
  /** The seeded database every run copies (`CREATE DATABASE … TEMPLATE`). */
  seed: string;
  /** Version, settings and where it runs, for the report. */
  describe: string[];
  /** A fresh copy of the seed for one run: its name and URL. */
  fresh: () => Promise<{ name: string; url: string }>;
  drop: (name: string) => Promise<void>;
  /** CPU seconds the whole server has used so far (NaN when it does not run on this machine or its pid is not readable). */
  cpu: () => number;
  /** Drops the databases this run made, and stops the server when the run started it. */
  close: () => Promise<void>;
}
let postgres: Postgres | undefined;
/** The server this run started (test/support/pg-cluster.mjs), so that Ctrl-C can stop it too. */
let ownCluster: { stop: () => void } | undefined;

/** `url` with another database name. */
function databaseUrl(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'restable-bench' });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

const PG_SETTINGS = ['fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers', 'max_connections'];

/**
 * The server (--pg-url, TEST_DATABASE_URL, or a throwaway one from test/support/pg-cluster.mjs: fsync and
 * synchronous_commit on, the durability SQLite's FULL promises), and the seed: a database migrated
 * by the service's own migrate command, filled with the SQLite seed's rows.
 */
async function startPostgres(now: string): Promise<Postgres> {
  let admin = args['pg-url'] ?? process.env.TEST_DATABASE_URL;
  let where = admin ? `the server at ${new URL(admin).host} given by \`${args['pg-url'] ? '--pg-url' : 'TEST_DATABASE_URL'}\`` : '';
  let dataDir: string | undefined;
  if (!admin) {
    const script = join(ROOT, 'test/support/pg-cluster.mjs');
    if (!existsSync(script))
      throw new Error('no PostgreSQL server: pass --pg-url or TEST_DATABASE_URL (test/support/pg-cluster.mjs is missing)');
    // A variable specifier: the script is plain JavaScript without declarations.
    const cluster = (await import(pathToFileURL(script).href)) as {
      startCluster: (o: { stateFile: string }) => Promise<{ url: string; dir: string }>;
      stopCluster: (o: { stateFile: string }) => boolean;
    };
    const stateFile = join(tmpdir(), `restable-bench-pg-${process.pid}.json`);
    process.stderr.write('starting a throwaway PostgreSQL server… ');
    const state = await cluster.startCluster({ stateFile });
    ownCluster = { stop: () => cluster.stopCluster({ stateFile }) };
    process.stderr.write('done\n');
    admin = state.url;
    dataDir = state.dir;
    where = 'a throwaway server on this machine, started for this run (`test/support/pg-cluster.mjs`) and stopped at the end';
  }
  const prefix = `restable_bench_${process.pid}`;
  const seedName = `${prefix}_seed`;
  const reach = (error: Error): never => {
    ownCluster?.stop();
    const shown = new URL(admin as string);
    if (shown.password) shown.password = '***';
    throw new Error(`cannot use the PostgreSQL server at ${shown} to create databases: ${error.message}`);
  };
  const describe = await withClient(admin, async (client) => {
    const version = (await client.query('SHOW server_version')).rows[0].server_version as string;
    const settings = await client.query('SELECT name, current_setting(name) AS value FROM unnest($1::text[]) AS name', [PG_SETTINGS]);
    if (!dataDir) {
      try {
        dataDir = (await client.query('SHOW data_directory')).rows[0].data_directory as string;
      } catch {}
    }
    await client.query(`DROP DATABASE IF EXISTS ${seedName} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${seedName}`);
    const shown = settings.rows.map((r) => `\`${r.name}=${r.value}\``).join(', ');
    return [
      `PostgreSQL ${version}: ${where}; data on ${dataDir && existsSync(dataDir) ? fileSystem(dataDir) : 'a file system not visible here'}; ${shown}.`,
    ];
  }).catch(reach);
  const seed = databaseUrl(admin, seedName);
  // Its processes' CPU time is readable in /proc only when it runs here: the postmaster's pid is the first line of postmaster.pid.
  const local = Boolean(ownCluster) || ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(admin).hostname);
  let postmaster: number | undefined;
  try {
    const pid = Number(readFileSync(join(dataDir as string, ownCluster ? 'data' : '', 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (local && pid > 0 && existsSync(`/proc/${pid}`)) postmaster = pid;
  } catch {}
  let made = 0;
  const close = async () => {
    try {
      await withClient(admin, async (client) => {
        const leftovers = await client.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${prefix}\\_%`]);
        for (const { datname } of leftovers.rows) await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      });
    } finally {
      ownCluster?.stop();
      ownCluster = undefined;
    }
  };
  try {
    // The service's own migrations, applied by its own command, as for SQLite.
    execFileSync(process.execPath, ['dist/cli/migrate.js'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: seed },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    await withClient(seed, async (client) => {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO users (id, name, email, created_at, updated_at)
         SELECT i, 'user ' || i, 'user' || i || '@example.com', $1, $1 FROM generate_series(1, $2::int) AS i`,
        [now, ROWS],
      );
      await client.query(
        `INSERT INTO pets (id, name, species, owner_id, created_at, updated_at)
         SELECT i, 'pet ' || i, 'dog', 1 + ((i::bigint * 7919) % $2::int), $1, $1 FROM generate_series(1, $2::int) AS i`,
        [now, ROWS],
      );
      // Explicit ids leave the identity sequences at 1: new rows must continue after the seeded ones.
      for (const table of ['users', 'pets']) await client.query(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), $1)`, [ROWS]);
      await client.query('COMMIT');
      // Statistics and the visibility map, as a database in use would have them (each copy inherits them).
      await client.query('VACUUM ANALYZE');
    });
  } catch (error) {
    await close();
    throw error;
  }
  return {
    admin,
    seed: seedName,
    describe,
    async fresh() {
      // A file-level copy: no migration or insert runs per run, and no run sees another's writes.
      const name = `${prefix}_run_${++made}`;
      await withClient(admin, (client) => client.query(`CREATE DATABASE ${name} TEMPLATE ${seedName}`));
      return { name, url: databaseUrl(admin, name) };
    },
    async drop(name) {
      await withClient(admin, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
    cpu: () => (postmaster === undefined ? Number.NaN : treeCpuSeconds(postmaster)),
    close,
  };
}

/**
 * haproxy in front of the instances: HTTP mode, round robin, connections to the instances kept
 * alive and shared (`http-reuse always`), one thread (it stays far from being the bottleneck here).
 */
function haproxyConfig(port: number, backends: number[]): string {
  return `# Generated by bench/run.ts.
global
  nbthread 1
  maxconn 2000
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive 30s
frontend bench
  bind 127.0.0.1:${port}
  default_backend restable
backend restable
  balance roundrobin
${backends.map((p, i) => `  server restable${i + 1} 127.0.0.1:${p}`).join('\n')}
`;
}

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) a process has used so far, with its exited children's (`reaped`); 0 when it is gone. */
function cpuSeconds(pid: number, reaped = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command name (in parentheses, which may hold spaces): state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + (reaped ? Number(fields[13]) + Number(fields[14]) : 0)) / TICKS;
  } catch {
    return 0;
  }
}

/**
 * CPU seconds of a server that forks a process per connection (PostgreSQL's postmaster): its own, its
 * live children's, and those of the children it has reaped. Connections the pool replaces (maxUses)
 * end during a run; their time moves into the parent's reaped total, so a difference stays right.
 */
function treeCpuSeconds(pid: number): number {
  let children: number[] = [];
  try {
    children = execFileSync('sh', ['-c', `cat /proc/${pid}/task/*/children 2>/dev/null`])
      .toString()
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {}
  return cpuSeconds(pid, true) + children.reduce((sum, child) => sum + cpuSeconds(child, true), 0);
}

/** Busy and total jiffies of each core (/proc/stat), to tell how busy each core was during a run. */
function coreTimes(): { busy: number; total: number }[] {
  try {
    return readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .filter((line) => /^cpu\d+ /.test(line))
      .map((line) => {
        const [user, nice, system, idle, iowait, irq, softirq, steal] = line.split(/\s+/).slice(1, 9).map(Number) as number[];
        const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
        return { busy, total: busy + (idle ?? 0) + (iowait ?? 0) };
      });
  } catch {
    return [];
  }
}

/** How busy each core was between two samples, in % (the whole machine: server, database and load generator). */
function coreUse(before: ReturnType<typeof coreTimes>, after: ReturnType<typeof coreTimes>): number[] {
  return after.map((a, i) => {
    const b = before[i];
    return b && a.total > b.total ? (100 * (a.busy - b.busy)) / (a.total - b.total) : Number.NaN;
  });
}

/** Peak resident memory (VmHWM) of a process and its children, in MB. */
function peakRss(pid: number): number {
  const pids = [pid];
  try {
    for (const task of execFileSync('sh', ['-c', `cat /proc/${pid}/task/*/children 2>/dev/null`])
      .toString()
      .trim()
      .split(/\s+/)) {
      if (task) pids.push(Number(task));
    }
  } catch {}
  let kb = 0;
  for (const p of pids) {
    try {
      kb += Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {}
  }
  return kb / 1024;
}

interface Measure extends LoadResult {
  rss: number;
  /** Bytes the server wrote to its stdout (restable: the request log) per request, warm-up included. */
  logPerRequest: number;
  /** How busy each core of the machine was during the measured load, %. */
  cores: number[];
  /** CPU seconds used during the measured load by the service's processes, and by the whole PostgreSQL server (NaN: not measured). */
  serviceCpu: number;
  databaseCpu: number;
  /** The measured load's wall time, s. */
  wall: number;
}

/** Starts one process of a server, its stdout to `logFile`, pinned to `core` when given. */
function spawnServer(argv: string[], env: Record<string, string>, cwd: string, logFile: string, core: number | undefined): ChildProcess {
  const [file, ...rest] = pinned(core, [process.execPath, ...argv]);
  // The log goes to a file, as a deployment's would: a terminal or a pipe read by this process costs more.
  const log = openSync(logFile, 'w');
  const child = spawn(file as string, rest, { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', log, 'inherit'] });
  closeSync(log);
  return child;
}

async function measure(spec: ServerSpec, request: LoadSpec, seedDir: string, scratch: string): Promise<Measure> {
  const port = await freePort();
  const data = mkdtempSync(join(tmpdir(), 'restable-run-'));
  const instances: ChildProcess[] = [];
  const logs: string[] = [];
  let balancer: ChildProcess | undefined;
  let database: { name: string; url: string } | undefined;
  try {
    const core = spec.pin ? SERVER_CORE : undefined;
    const cwd = spec.cwd?.() ?? ROOT;
    if (spec.postgres) {
      database = await (postgres as Postgres).fresh();
      const count = spec.postgres.instances;
      // One instance listens on the port wrk loads; several listen on ports of their own behind haproxy on it.
      const ports = count === 1 ? [port] : await Promise.all(Array.from({ length: count }, () => freePort()));
      for (const [i, p] of ports.entries()) {
        const { argv, env } = spec.command(data, p, database.url);
        logs.push(join(data, `stdout-${i + 1}.log`));
        instances.push(spawnServer(argv, env, cwd, logs[i] as string, core));
      }
      for (const [i, p] of ports.entries()) await waitUntilServing(`http://127.0.0.1:${p}`, instances[i] as ChildProcess);
      if (count > 1) {
        writeFileSync(join(data, 'haproxy.cfg'), haproxyConfig(port, ports));
        const errors = openSync(join(data, 'haproxy.log'), 'w');
        balancer = spawn('haproxy', ['-f', join(data, 'haproxy.cfg'), '-db'], { stdio: ['ignore', errors, errors] });
        closeSync(errors);
        try {
          await waitUntilServing(`http://127.0.0.1:${port}`, balancer);
        } catch (error) {
          throw new Error(`${(error as Error).message}\nhaproxy: ${readFileSync(join(data, 'haproxy.log'), 'utf8')}`);
        }
      }
    } else {
      copyFileSync(join(seedDir, spec.seedFile ?? 'app.db'), join(data, 'app.db'));
      if (spec.kind === 'json-server') copyFileSync(join(seedDir, 'db.json'), join(data, 'db.json'));
      const { argv, env } = spec.command(data, port);
      logs.push(join(data, 'stdout.log'));
      instances.push(spawnServer(argv, env, cwd, logs[0] as string, core));
      await waitUntilServing(`http://127.0.0.1:${port}`, instances[0] as ChildProcess);
    }
    const options = { url: `http://127.0.0.1:${port}`, connections: CONNECTIONS, rows: ROWS, core: GENERATOR_CORE, scratch };
    let warm = 0;
    if (WARMUP > 0) warm = (await load(request, { ...options, duration: WARMUP })).requests;
    // CPU time over the measured seconds: the service's processes, and the whole PostgreSQL server.
    const pids = instances.map((child) => child.pid as number);
    const cpuBefore = new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
    const databaseBefore = database ? (postgres as Postgres).cpu() : Number.NaN;
    const before = coreTimes();
    const started = performance.now();
    const result = await load(request, { ...options, duration: DURATION });
    const wall = (performance.now() - started) / 1000;
    const cores = coreUse(before, coreTimes());
    const used = (pid: number) => cpuSeconds(pid) - (cpuBefore.get(pid) ?? 0);
    const serviceCpu = pids.reduce((sum, pid) => sum + used(pid), 0);
    const databaseCpu = database ? (postgres as Postgres).cpu() - databaseBefore : Number.NaN;
    // The service's processes only: not haproxy's, not PostgreSQL's.
    const rss = instances.reduce((sum, child) => sum + peakRss(child.pid as number), 0);
    if (balancer) await stop(balancer);
    await Promise.all(instances.map(stop));
    const logged = logs.reduce((sum, file) => sum + statSync(file).size, 0);
    return { ...result, rss, logPerRequest: logged / Math.max(1, warm + result.requests), cores, serviceCpu, databaseCpu, wall };
  } finally {
    if (balancer) await stop(balancer);
    await Promise.all(instances.map(stop));
    if (database) await (postgres as Postgres).drop(database.name);
    rmSync(data, { recursive: true, force: true });
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

async function main(): Promise<void> {
  if (!existsSync(join(ROOT, 'dist/main.js'))) throw new Error('run `npm run build` first (npm run bench does)');
  if (BASELINE && !['dist/main.js', 'dist/cli/migrate.js', 'node_modules'].every((f) => existsSync(join(BASELINE, f)))) {
    throw new Error(
      `--baseline ${BASELINE}: not a built checkout of restable (needs dist/ and node_modules/); make one with ` +
        '`git worktree add <dir> <commit> && cd <dir> && npm ci && npm run build`',
    );
  }
  const names = args.servers?.split(',') ?? DEFAULT_SERVERS;
  const unknown = names.filter((name) => !SERVERS.some((s) => s.name === name));
  if (unknown.length) {
    throw new Error(
      `unknown server(s): ${unknown.join(', ')}${unknown.includes('restable-baseline') ? ' (restable-baseline needs --baseline <checkout>)' : ''}; ` +
        `known: ${SERVERS.map((s) => s.name).join(', ')}`,
    );
  }
  const servers = SERVERS.filter((s) => names.includes(s.name));
  const wanted = args.scenarios?.split(',');
  const scenarios = wanted ? SCENARIOS.filter((s) => wanted.includes(s.name)) : SCENARIOS;
  if (wanted && scenarios.length !== wanted.length) {
    throw new Error(`unknown scenario(s): ${wanted.filter((w) => !SCENARIOS.some((s) => s.name === w)).join(', ')}`);
  }
  const wrk = await available('wrk', '-v');
  const ab = scenarios.some((s) => s.name === 'HEAD element') ? await available('ab', '-V') : 'not needed';
  if (!wrk?.startsWith('wrk') || !ab) {
    throw new Error('the load generators are missing: `apt-get install -y wrk apache2-utils` (Debian packages; ab is for HEAD)');
  }
  const haproxy = servers.some((s) => (s.postgres?.instances ?? 1) > 1) ? await available('haproxy', '-v') : undefined;
  if (servers.some((s) => (s.postgres?.instances ?? 1) > 1) && !haproxy?.startsWith('HAProxy')) {
    throw new Error(
      'restable-postgres-3 needs haproxy, the load balancer in front of its instances: `apt-get install -y haproxy` (Debian)',
    );
  }

  const seedDir = mkdtempSync(join(tmpdir(), 'restable-seed-'));
  const results = new Map<string, Measure[]>();
  const plan = (round: number) =>
    scenarios.flatMap((scenario) => {
      const able = servers.filter((s) => scenario.request(s.kind) !== undefined);
      // Alternate the order every round (A B C, B C A, …) so that drift of a noisy machine cancels out.
      return able.map((_, i) => ({ scenario, spec: able[(i + round) % able.length] as ServerSpec }));
    });
  const total = ROUNDS * plan(0).length;
  let done = 0;
  // A server that fails to start throws; the seeded files and the wide install go either way.
  try {
    if (servers.some((s) => s.name === WIDE_NAME)) {
      process.stderr.write(`generating a schema of ${WIDE_TABLES} tables… `);
      wide = await makeWideInstall(ROOT, WIDE_TABLES);
      process.stderr.write('done\n');
    }
    process.stderr.write(`seeding ${ROWS} users and ${ROWS} pets… `);
    const now = seed(seedDir, servers);
    process.stderr.write('done\n');
    if (servers.some((s) => s.postgres)) {
      // Ctrl-C must leave neither databases nor a throwaway server behind (the servers under test get the signal themselves).
      process.once('SIGINT', () => {
        const give = setTimeout(() => {
          ownCluster?.stop();
          process.exit(130);
        }, 15_000);
        (postgres?.close() ?? Promise.resolve(ownCluster?.stop())).finally(() => {
          clearTimeout(give);
          process.exit(130);
        });
      });
      postgres = await startPostgres(now);
      process.stderr.write(`PostgreSQL seeded (${postgres.seed}): ${postgres.describe.join(' ')}\n`);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const { scenario, spec } of plan(round)) {
        const m = await measure(spec, scenario.request(spec.kind) as LoadSpec, seedDir, seedDir);
        const key = `${scenario.name}|${spec.name}`;
        results.set(key, [...(results.get(key) ?? []), m]);
        process.stderr.write(
          `[${++done}/${total}] round ${round + 1} ${scenario.name.padEnd(22)} ${spec.name.padEnd(20)} ${Math.round(m.rps).toLocaleString('en').padStart(8)} req/s  p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms  RSS ${m.rss.toFixed(0)} MB  log ${m.logPerRequest.toFixed(0)} B/req  CPU ${m.cores.map((c) => c.toFixed(0)).join('/')} %${m.failures ? `  ${m.failures} failures: ${m.problems}` : ''}\n`,
        );
      }
    }
  } finally {
    rmSync(seedDir, { recursive: true, force: true });
    wide?.remove();
    await postgres?.close();
    ownCluster?.stop();
  }
  writeReport(servers, scenarios, results, { wrk, ab, haproxy });
}

/** `abc1234`, with `+ uncommitted changes` when tracked files differ from it, for the checkout in `dir`. */
function describeCheckout(dir: string): string {
  // GIT_OPTIONAL_LOCKS=0: only look; others may be working in the same checkout.
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
}

/** What kind of file system holds the data: fsync (FULL) costs nothing on tmpfs, so the figures would mean little. */
function fileSystem(dir: string): string {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', dir]).toString().trim();
  } catch {
    return 'unknown';
  }
}

function writeReport(
  servers: ServerSpec[],
  scenarios: Scenario[],
  results: Map<string, Measure[]>,
  tools: { wrk: string; ab: string; haproxy?: string },
): void {
  const runs = (scenario: string, server: string) => results.get(`${scenario}|${server}`) ?? [];
  const med = (scenario: string, server: string, pick: (m: Measure) => number) => median(runs(scenario, server).map(pick));
  const rps = (scenario: string, server: string) => med(scenario, server, (m) => m.rps);
  const ran = (scenario: string, server: string) => runs(scenario, server).length > 0;
  const has = (name: string) => servers.some((s) => s.name === name);
  /** The ratio of the medians, and the median and range of the per-round ratios (each pair measured seconds apart). */
  const compare = (a: [string, string], b: [string, string]) => {
    const theirs = runs(...b);
    const paired = runs(...a).map((m, i) => m.rps / (theirs[i]?.rps ?? Number.NaN));
    return { ratio: rps(...a) / rps(...b), median: median(paired), min: Math.min(...paired), max: Math.max(...paired) };
  };
  const range = (c: ReturnType<typeof compare>) => `${c.median.toFixed(2)} (${c.min.toFixed(2)}–${c.max.toFixed(2)})`;
  const ratio = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : '–');
  const ms = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(1));
  const sqlite = new Database(':memory:').prepare('select sqlite_version() v').pluck().get();
  const present = (name: string) => scenarios.some((s) => s.name === name);
  const usesAb = present('HEAD element');
  const lines = [
    '# Benchmark results',
    '',
    `Generated by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores; Node ${process.version}, SQLite ${sqlite}; data on ${fileSystem(tmpdir())} (${tmpdir()}).`,
    `${ROWS.toLocaleString('en')} users and pets; ${tools.wrk.split(' [')[0]}, 1 thread${usesAb ? ` (HEAD: ab ${/Version ([\d.]+)/.exec(tools.ab)?.[1] ?? ''}, as wrk waits for a body after HEAD)` : ''}; ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s per run, ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} in alternation, medians.`,
    hasTaskset
      ? `Servers pinned to core ${SERVER_CORE} (\`taskset\`), the load generator to core ${GENERATOR_CORE}.`
      : 'No CPU pinning (taskset unavailable or one core).',
    'restable runs its **default configuration** (only `DATABASE_PATH` and `PORT` set): `LOG_LEVEL=info`, one log line per request written to a file,',
    `\`DATABASE_SYNCHRONOUS=FULL\`. The floor (\`bench/floor.mjs\`) commits at NORMAL.${has(WIDE_NAME) ? ` \`${WIDE_NAME}\` is the same build serving the shipped schema plus generated tables (\`bench/tables.ts\`).` : ''}`,
    ...servers.filter((s) => s.note).map((s) => `\`${s.name}\`: ${s.note}.`),
    'Peak RSS is `VmHWM` of the server (and its workers) at the end of its run; `log B/req` is what it wrote to stdout per request.',
    '',
  ];
  const onPostgres = servers.filter((s) => s.postgres);
  if (onPostgres.length) {
    lines.splice(
      lines.length - 1,
      0,
      '',
      `Command: \`npx tsx bench/run.ts ${process.argv.slice(2).join(' ')}\` (checkout ${describeCheckout(ROOT)}).`,
      ...(postgres?.describe ?? []),
      `${onPostgres.map((s) => `\`${s.name}\``).join(' and ')}: the same build with only \`DATABASE_URL\` (a fresh \`CREATE DATABASE … TEMPLATE\` copy of a database seeded once with the same rows, migrated by \`dist/cli/migrate.js\`) and \`PORT\` set: \`LOG_LEVEL=info\` to a file, a pool of 10 connections per instance.`,
      `Where they ran: \`restable-postgres\` is pinned to core ${SERVER_CORE ?? '–'} like \`restable\`, PostgreSQL is not pinned (its backends may run on either core, the load generator's included); \`restable-postgres-3\` is three instances behind haproxy${tools.haproxy ? ` (${/version ([\d.]+)/i.exec(tools.haproxy)?.[1] ?? tools.haproxy}, 1 thread, round robin, keep-alive to the instances)` : ''}, with the instances, haproxy and PostgreSQL all unpinned.`,
      'So the PostgreSQL variants may use more CPU than the one core SQLite’s `restable` has. CPU over the measured seconds (`/proc`): `service CPU %` is the service’s processes (SQLite works inside them), `PostgreSQL CPU %` the whole PostgreSQL server (the postmaster and every process it forked, ended ones included: the pool replaces a connection after 10,000 queries), in % of one core; `CPU µs/req` is the two together per request; `cores busy %` is how busy each core of the machine was (everything: server, database, haproxy, load generator).',
      'Peak RSS of a PostgreSQL variant is the sum over its service processes (three for `restable-postgres-3`), not haproxy’s nor PostgreSQL’s.',
    );
  }
  // Each ratio column only when the run has what it compares with.
  const columns: { head: string; cell: (scenario: Scenario, server: ServerSpec, mine: number) => string }[] = [];
  const versus = (other: string) => (scenario: Scenario, server: ServerSpec, mine: number) =>
    other !== server.name && ran(scenario.name, other) ? ratio(mine / rps(scenario.name, other)) : '–';
  if (has('floor')) columns.push({ head: '× floor', cell: versus('floor') });
  if (has('restable') && servers.some((s) => s.kind === 'restable' && s.name !== 'restable')) {
    columns.push({
      head: '× restable',
      cell: (scenario, server, mine) => (server.kind === 'restable' ? versus('restable')(scenario, server, mine) : '–'),
    });
  }
  if (scenarios.some((s) => s.group === 'hot') && present('GET element')) {
    columns.push({
      head: '× own GET element',
      cell: (scenario, server, mine) =>
        scenario.group === 'hot' && ran('GET element', server.name) ? ratio(mine / rps('GET element', server.name)) : '–',
    });
  }
  if (has('json-server')) columns.push({ head: '× json-server', cell: versus('json-server') });
  /** CPU time of the service and its PostgreSQL backends per request, µs. */
  const perRequest = (m: Measure) => (1e6 * (m.serviceCpu + (Number.isNaN(m.databaseCpu) ? 0 : m.databaseCpu))) / Math.max(1, m.requests);
  if (onPostgres.length) {
    const cpu = (pick: (m: Measure) => number, digits: number) => (scenario: Scenario, server: ServerSpec) => {
      const value = med(scenario.name, server.name, pick);
      return Number.isFinite(value) ? value.toFixed(digits) : '–';
    };
    columns.push(
      { head: 'service CPU %', cell: cpu((m) => (100 * m.serviceCpu) / m.wall, 0) },
      { head: 'PostgreSQL CPU %', cell: cpu((m) => (100 * m.databaseCpu) / m.wall, 0) },
      { head: 'CPU µs/req', cell: cpu(perRequest, 0) },
    );
    columns.push({
      head: 'cores busy % 0/1',
      cell: (scenario, server) =>
        runs(scenario.name, server.name)[0]?.cores.length
          ? (runs(scenario.name, server.name)[0]?.cores ?? [])
              .map((_, i) => med(scenario.name, server.name, (m) => m.cores[i] ?? Number.NaN).toFixed(0))
              .join(' / ')
          : '–',
    });
  }
  lines.push(
    `| scenario | server | req/s | p50 ms | p99 ms | peak RSS MB | log B/req | ${columns.map((c) => `${c.head} | `).join('')}failures |`,
    `|---|---|---:|---:|---:|---:|---:|${columns.map(() => '---:|').join('')}---:|`,
  );
  for (const scenario of scenarios) {
    for (const server of servers) {
      if (!ran(scenario.name, server.name)) continue;
      const mine = rps(scenario.name, server.name);
      const pick = (p: (m: Measure) => number) => med(scenario.name, server.name, p);
      const failures = runs(scenario.name, server.name).reduce((sum, m) => sum + m.failures, 0);
      lines.push(
        `| ${scenario.name} | ${server.name} | ${Math.round(mine).toLocaleString('en')} | ${ms(pick((m) => m.p50))} | ${ms(pick((m) => m.p99))} | ${pick((m) => m.rss).toFixed(0)} | ${pick((m) => m.logPerRequest).toFixed(0)} | ${columns.map((c) => `${c.cell(scenario, server, mine)} | `).join('')}${failures} |`,
      );
    }
  }
  if (has('restable') && (has('floor') || has(WIDE_NAME))) {
    const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
    lines.push(
      '',
      '## Targets (issue 12)',
      '',
      '`measured` is the ratio of the medians; `per round` pairs the two runs of each round and gives the median and range of those ratios.',
      '',
      '| target | measured | per round: median (min–max) | verdict |',
      '|---|---:|---:|---|',
    );
    if (has('floor')) {
      for (const scenario of scenarios.filter((s) => s.floorTarget !== undefined)) {
        const c = compare([scenario.name, 'restable'], [scenario.name, 'floor']);
        const what =
          scenario.name === 'POST create'
            ? 'POST create (FULL) ≥ 0.80× the floor’s (NORMAL)'
            : `${scenario.name} ≥ ${scenario.floorTarget?.toFixed(2)}× floor`;
        lines.push(`| ${what} | ${c.ratio.toFixed(2)}× | ${range(c)} | ${verdict(c.ratio >= (scenario.floorTarget as number))} |`);
      }
      // No target of the issue: how far the contract's own work (floor-contract) already is from the floor.
      if (has('floor-contract')) {
        for (const scenario of scenarios.filter((s) => s.floorTarget !== undefined && ran(s.name, 'floor-contract'))) {
          const c = compare([scenario.name, 'floor-contract'], [scenario.name, 'floor']);
          lines.push(`| (for reference) ${scenario.name}: floor-contract vs floor | ${c.ratio.toFixed(2)}× | ${range(c)} | |`);
        }
      }
    }
    if (has(WIDE_NAME) && present('GET element')) {
      const c = compare(['GET element', WIDE_NAME], ['GET element', 'restable']);
      lines.push(
        `| GET element, ${WIDE_TABLES} tables within 5 % of the shipped schema's | ${c.ratio.toFixed(2)}× | ${range(c)} | ${verdict(Math.abs(c.ratio - 1) <= 0.05)} |`,
      );
    }
    const restables = servers.filter((s) => s.name === 'restable' || s.name === WIDE_NAME);
    const peaks = restables.flatMap((s) =>
      scenarios.filter((sc) => ran(sc.name, s.name)).map((sc) => ({ at: `${sc.name}, ${s.name}`, mb: med(sc.name, s.name, (m) => m.rss) })),
    );
    const worst = peaks.reduce((a, b) => (b.mb > a.mb ? b : a), { at: '', mb: 0 });
    lines.push(
      `| peak RSS < 100 MB in every run of ${restables.map((s) => s.name).join(' and ')} | ${worst.mb.toFixed(0)} MB (${worst.at}) | | ${verdict(worst.mb < 100)} |`,
    );
    const hot = scenarios.filter((s) => s.group === 'hot');
    if (hot.length && present('GET element')) {
      lines.push(
        '',
        '## Hot path',
        '',
        'No figure in the issue: each against GET element of the same server, and the wide schema against the shipped one.',
        '',
      );
      const wideToo = has(WIDE_NAME);
      lines.push(
        `| scenario | restable req/s | × its GET element${wideToo ? ` | ${WIDE_NAME} req/s | × its GET element | × restable, per round: median (min–max)` : ''} |`,
        `|---|---:|---:${wideToo ? '|---:|---:|---:' : ''}|`,
      );
      for (const { name } of hot) {
        const row = (server: string) =>
          `${Math.round(rps(name, server)).toLocaleString('en')} | ${ratio(rps(name, server) / rps('GET element', server))}`;
        lines.push(
          `| ${name} | ${row('restable')}${wideToo ? ` | ${row(WIDE_NAME)} | ${range(compare([name, WIDE_NAME], [name, 'restable']))}` : ''} |`,
        );
      }
    }
  }
  // The generators' own ceiling in this run: the fastest server each of them drove.
  const fastest = (pick: (s: Scenario) => boolean) =>
    [...results.entries()]
      .filter(([key]) => pick(scenarios.find((s) => s.name === key.split('|')[0]) as Scenario))
      .map(([key, measures]) => ({ key, rps: median(measures.map((m) => m.rps)) }))
      .reduce((a, b) => (b.rps > a.rps ? b : a), { key: '', rps: 0 });
  const wrkTop = fastest((s) => s.name !== 'HEAD element');
  const abTop = fastest((s) => s.name === 'HEAD element');
  lines.push(
    '',
    `Load generator headroom: wrk drove up to ${Math.round(wrkTop.rps).toLocaleString('en')} req/s in this run (${wrkTop.key.replace('|', ', ')})${abTop.key ? `, ab up to ${Math.round(abTop.rps).toLocaleString('en')} req/s (${abTop.key.replace('|', ', ')})` : ''}, each on its own core.`,
  );
  if (onPostgres.length && has('restable')) {
    lines.push(
      '',
      '## PostgreSQL vs SQLite (issue 13)',
      '',
      '`× restable` is the ratio of the medians to `restable` on SQLite (FULL) in this run; `per round` pairs the runs of each round and',
      'gives the median and range of those ratios. `3 × 1` is three instances behind haproxy against one, both on PostgreSQL.',
      '`CPU µs/req`: CPU time of the service’s processes (and of the PostgreSQL server) per request.',
      '',
    );
    const three = has('restable-postgres-3');
    const one = has('restable-postgres');
    const head = ['scenario', 'restable (SQLite) req/s'];
    if (one) head.push('restable-postgres req/s', '× restable', 'per round');
    if (three) head.push('restable-postgres-3 req/s', '× restable', 'per round');
    if (one && three) head.push('3 × 1');
    const which = `(SQLite${one ? ' / PG' : ''}${three ? ' / PG ×3' : ''})`;
    head.push(`p99 ms ${which}`, `CPU µs/req ${which}`);
    lines.push(
      `| ${head.join(' | ')} |`,
      `|---|${head
        .slice(1)
        .map(() => '---:|')
        .join('')}`,
    );
    for (const { name } of scenarios) {
      if (!ran(name, 'restable')) continue;
      const cells = [name, Math.round(rps(name, 'restable')).toLocaleString('en')];
      const against = (server: string) => {
        if (!ran(name, server)) return ['–', '–', '–'];
        const c = compare([name, server], [name, 'restable']);
        return [Math.round(rps(name, server)).toLocaleString('en'), c.ratio.toFixed(2), range(c)];
      };
      if (one) cells.push(...against('restable-postgres'));
      if (three) cells.push(...against('restable-postgres-3'));
      if (one && three) cells.push(ratio(rps(name, 'restable-postgres-3') / rps(name, 'restable-postgres')));
      const p99 = ['restable', ...(one ? ['restable-postgres'] : []), ...(three ? ['restable-postgres-3'] : [])];
      cells.push(p99.map((server) => (ran(name, server) ? ms(med(name, server, (m) => m.p99)) : '–')).join(' / '));
      cells.push(p99.map((server) => (ran(name, server) ? med(name, server, perRequest).toFixed(0) : '–')).join(' / '));
      lines.push(`| ${cells.join(' | ')} |`);
    }
  }
  if (BASELINE && has('restable') && has('restable-baseline')) {
    lines.push(
      '',
      '## restable vs restable-baseline',
      '',
      `This checkout: ${describeCheckout(ROOT)}; baseline: ${describeCheckout(BASELINE)} (${BASELINE}). Same rows, same settings, in the same rotation.`,
      '`× baseline` is the ratio of the two medians (> 1: this checkout is faster); `per round` pairs the two runs of',
      'each round (measured seconds apart) and gives the median and the range of those ratios: a range that straddles 1 is noise.',
      '',
      '| scenario | restable req/s | baseline req/s | × baseline | per round: median (min–max) | p99 ms (restable / baseline) | peak RSS MB (restable / baseline) |',
      '|---|---:|---:|---:|---:|---:|---:|',
    );
    for (const { name } of scenarios) {
      const c = compare([name, 'restable'], [name, 'restable-baseline']);
      const pair = (pick: (m: Measure) => number, digits: number) =>
        `${med(name, 'restable', pick).toFixed(digits)} / ${med(name, 'restable-baseline', pick).toFixed(digits)}`;
      lines.push(
        `| ${name} | ${Math.round(rps(name, 'restable')).toLocaleString('en')} | ${Math.round(rps(name, 'restable-baseline')).toLocaleString('en')} | ${c.ratio.toFixed(2)} | ${range(c)} | ${pair((m) => m.p99, 1)} | ${pair((m) => m.rss, 0)} |`,
      );
    }
  }
  const report = `${lines.join('\n')}\n`;
  writeFileSync(resolve(ROOT, args.out as string), report);
  console.log(`\n${report}`);
  const failures = [...results.values()].flat().reduce((sum, m) => sum + m.failures, 0);
  if (failures > 0) {
    console.error(`bench: ${failures} requests failed (errors, timeouts or an unexpected status); the figures above are not valid`);
    process.exitCode = 1;
  }
}

await main();

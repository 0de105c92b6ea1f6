// What recording a change costs a write on PostgreSQL, counted in instructions (callgrind: counts, not
// seconds) of every PostgreSQL process and of the service, with the feed's triggers and without.
// PostgreSQL: each run serves a fresh copy of the same users from a server started under valgrind and
// stopped after N writes; a short run and a long one per variant, so that start-up, shutdown and the
// connections' first statements cancel out: per write = (long − short) / the writes between them. Two
// endings: the writes alone (nobody follows the feed: the changes wait in the pending table), and the
// rest of each change's life after them: sequenced (moved from the pending table into the log, as the
// service's purge does at least once a minute), purged and vacuumed.
// The service: under valgrind itself, zeroed once warm and dumped after --writes writes; its main thread
// (V8's helper threads collect garbage when the timing suits them, which moves their counts run to run).
// Usage: npm run build && tsx bench/feed-instructions.ts [--writes 1500] [--warm 300] [--warm-service 3000]
//        [--connections 8] [--scenario PATCH|POST] [--only postgres|service] (needs valgrind and Debian's postgresql; makes its own
//        throwaway server; ~11 min for both scenarios)
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
// @ts-expect-error: a plain ES module of the tests, without types
import { startCluster, stopCluster } from '../test/support/pg-cluster.mjs';
import { freePort, START_ARGV, stop, waitUntilServing } from './processes.js';

const { values: args } = parseArgs({
  options: {
    writes: { type: 'string', default: '1500' },
    warm: { type: 'string', default: '300' },
    'warm-service': { type: 'string', default: '3000' },
    connections: { type: 'string', default: '8' },
    scenario: { type: 'string' },
    rows: { type: 'string', default: '10000' },
    // Only one side: postgres or service (both by default).
    only: { type: 'string' },
  },
});
const WRITES = Number(args.writes);
const WARM = Number(args.warm);
const WARM_SERVICE = Number(args['warm-service']);
const CONNECTIONS = Number(args.connections);
const ROWS = Number(args.rows);
const ONLY = args.only;
const SCENARIOS = args.scenario ? [args.scenario.toUpperCase()] : ['PATCH', 'POST'];
if (
  ![WRITES, WARM, WARM_SERVICE, CONNECTIONS, ROWS].every((n) => Number.isInteger(n) && n > 0) ||
  SCENARIOS.some((s) => s !== 'PATCH' && s !== 'POST')
) {
  console.error(
    'usage: tsx bench/feed-instructions.ts [--writes N] [--warm N] [--warm-service N] [--connections N] [--scenario PATCH|POST] [--only postgres|service]',
  );
  process.exit(2);
}

type Variant = 'feed' | 'triggers off';
const VARIANTS: Variant[] = ['feed', 'triggers off'];
const isRoot = process.getuid?.() === 0;
const scratch = join(tmpdir(), `restable-feed-instructions-${process.pid}`);
const dumps = join(scratch, 'callgrind');
mkdirSync(dumps, { recursive: true });
const stateFile = join(scratch, 'cluster.json');
/** The service started last: killed, the server stopped and its files removed however the run ends. */
let running: ChildProcess | undefined;
process.on('exit', () => {
  running?.kill('SIGKILL');
  stopCluster({ stateFile });
  rmSync(scratch, { recursive: true, force: true });
});
process.once('SIGINT', () => process.exit(130));
const cluster = (await startCluster({ stateFile })) as { url: string; data: string; bin: string; dir: string };
const admin = cluster.url;
const urlOf = (name: string) => admin.replace(/\/[^/]*$/, `/${name}`);

/** Runs a PostgreSQL program as its owner (postgres, when this process is root). */
const asOwner = (program: string, argv: string[]) =>
  execFileSync(isRoot ? 'runuser' : program, isRoot ? ['-u', 'postgres', '--', program, ...argv] : argv, { stdio: 'pipe' });

async function sql(url: string, text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(text, values);
  } finally {
    await client.end();
  }
}

// Every process the server forks runs under valgrind too; each writes its count when it exits.
const wrapper = join(scratch, 'postgres-under-callgrind.sh');
writeFileSync(
  wrapper,
  `#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=${dumps}/postgres.%p ${cluster.bin}/postgres "$@"\n`,
  { mode: 0o755 },
);
if (isRoot) {
  const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' })));
  for (const path of [scratch, dumps, wrapper]) chownSync(path, uid as number, gid as number);
}

/** The seeded database every run copies: this build's migrations and ROWS users. */
async function seed(): Promise<void> {
  await sql(admin, 'CREATE DATABASE feed_seed');
  execFileSync(process.execPath, ['dist/cli/migrate.js'], {
    env: { PATH: process.env.PATH, DATABASE_URL: urlOf('feed_seed') },
    stdio: 'ignore',
  });
  const now = new Date().toISOString();
  await sql(
    urlOf('feed_seed'),
    `INSERT INTO users (id, name, email, created_at, updated_at)
     SELECT i, 'user ' || i, 'user' || i || '@example.com', $1, $1 FROM generate_series(1, $2::int) AS i`,
    [now, ROWS],
  );
  await sql(urlOf('feed_seed'), `SELECT setval(pg_get_serial_sequence('users', 'id'), $1)`, [ROWS]);
  // The seed's own inserts are no changes of the runs.
  await sql(urlOf('feed_seed'), 'TRUNCATE restable_changes, restable_changes_pending');
  await sql(urlOf('feed_seed'), 'VACUUM ANALYZE');
}

/** The instructions of each dump whose name starts with `prefix` (callgrind's `summary:` line); removes them. */
function collect(prefix: string): number[] {
  return readdirSync(dumps)
    .filter((n) => n.startsWith(prefix))
    .map((name) => {
      const total = /^summary: (\d+)/m.exec(readFileSync(join(dumps, name), 'utf8'))?.[1];
      if (total === undefined) throw new Error(`${name}: a callgrind dump without its summary line`);
      rmSync(join(dumps, name));
      return Number(total);
    });
}
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
/** Removes the dumps whose name starts with `prefix`, unread (those a process wrote as it exited, after its counted one). */
const discard = (prefix: string) => {
  for (const name of readdirSync(dumps).filter((n) => n.startsWith(prefix))) rmSync(join(dumps, name));
};

/** `count` writes of `scenario`, CONNECTIONS at a time; throws on any unexpected answer. */
async function write(url: string, scenario: string, count: number, tag: string): Promise<void> {
  let next = 0;
  const one = async (n: number) => {
    const id = ((n * 7919) % ROWS) + 1;
    const [method, path, body, status] =
      scenario === 'PATCH'
        ? ['PATCH', `/users/${id}`, { name: `n${n}` }, 200]
        : ['POST', '/users', { name: 'Bench', email: `bench-${tag}-${n}@example.com` }, 201];
    const res = await fetch(url + path, { method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    await res.arrayBuffer();
    if (res.status !== status) throw new Error(`${method} ${path}: ${res.status}`);
  };
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

/** Drops the feed's triggers from a served database (the service made them at start): nothing is recorded. */
async function dropTriggers(url: string): Promise<void> {
  const { rows } = await sql(
    url,
    "SELECT t.tgname AS name, c.relname AS table FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND t.tgname LIKE 'restable_changes_%'",
  );
  if (rows.length === 0) throw new Error('the service installed no change-feed trigger to drop');
  for (const row of rows) await sql(url, `DROP TRIGGER "${row.name}" ON "${row.table}"`);
}

const pgCtl = (...argv: string[]) => asOwner(join(cluster.bin, 'pg_ctl'), ['-D', cluster.data, '-w', '-t', '300', ...argv]);

/** What follows the writes in a run: nothing, or the rest of every change's life. */
type Ending = 'write' | 'life';

/** The database a run serves: a fresh copy of the seed, made (and later dropped) while the server is not counted. */
const RUN_DATABASE = 'feed_run';

/**
 * Serves the run's database with the service (under callgrind when `counted`), drops the triggers for
 * `triggers off` and calls `use`. For `life`, it then reads the feed (which sequences every committed
 * change, as the service's purge does at least once a minute), purges it and vacuums (autovacuum is off
 * in a counted server, so that it runs at the same point of every run). Stops the service; checks that
 * every write was recorded (none with the triggers off) and, for `write`, that nothing was sequenced yet.
 */
async function serve(variant: Variant, counted: boolean, ending: Ending, writes: number, use: (url: string, pid: number) => Promise<void>) {
  const database = urlOf(RUN_DATABASE);
  const port = await freePort();
  const node = [process.execPath, ...START_ARGV];
  const [command, ...argv] = counted
    ? ['valgrind', '--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${dumps}/service.%p`, ...node]
    : node;
  const env = { PATH: process.env.PATH, DATABASE_URL: database, PORT: String(port), LOG_LEVEL: 'warn' };
  const service = spawn(command as string, argv, { env, stdio: 'ignore' });
  running = service;
  const url = `http://127.0.0.1:${port}`;
  const count = async (table: string) => Number((await sql(database, `SELECT count(*) AS n FROM ${table}`)).rows[0].n);
  try {
    await waitUntilServing(url, service, 600);
    if (variant === 'triggers off') await dropTriggers(database);
    await use(url, service.pid as number);
    const [logged, pending] = [await count('restable_changes'), await count('restable_changes_pending')];
    const expected = variant === 'feed' ? writes : 0;
    if (logged + pending !== expected) throw new Error(`${variant}: ${writes} writes, ${logged + pending} changes recorded`);
    // The service's purge timer (at least once a minute) sequences what is pending: then `write` would count more than the
    // writes. (A service under callgrind runs for minutes: what its timer does then is part of what it does.)
    if (ending === 'write' && !counted && logged > 0)
      throw new Error(`${variant}: the run lasted long enough for ${logged} changes to be sequenced`);
    if (ending === 'life') {
      const res = await fetch(`${url}/_changes?limit=1`);
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`GET /_changes: ${res.status}`);
      await sql(database, 'DELETE FROM restable_changes');
      await sql(database, 'VACUUM');
    }
  } finally {
    await stop(service);
  }
}

/** Runs `work` on a fresh copy of the seed, made before and dropped after on the server as it runs then. */
async function onFreshCopy<T>(work: () => Promise<T>): Promise<T> {
  await sql(admin, `DROP DATABASE IF EXISTS ${RUN_DATABASE}`);
  await sql(admin, `CREATE DATABASE ${RUN_DATABASE} TEMPLATE feed_seed`);
  try {
    return await work();
  } finally {
    await sql(admin, `DROP DATABASE IF EXISTS ${RUN_DATABASE}`);
  }
}

/**
 * PostgreSQL's instructions for `count` writes and their `ending`: every process of a server started under
 * callgrind for them (autovacuum and timed checkpoints off: nothing runs at a moment of its own choosing) and stopped after.
 */
function postgresRun(variant: Variant, scenario: string, count: number, ending: Ending): Promise<number> {
  return onFreshCopy(async () => {
    pgCtl('stop', '-m', 'fast');
    discard('postgres.');
    pgCtl('start', '-p', wrapper, '-o', '-c autovacuum=off -c checkpoint_timeout=1d', '-l', join(scratch, 'server.log'));
    try {
      await serve(variant, false, ending, count, (url) => write(url, scenario, count, `${variant === 'feed' ? 'on' : 'off'}${count}`));
    } finally {
      pgCtl('stop', '-m', 'fast');
      pgCtl('start', '-l', join(scratch, 'server.log'));
    }
    return sum(collect('postgres.'));
  });
}

/** The service's instructions per write once warm (WARM_SERVICE writes), over WRITES writes: zeroed and dumped around them. */
async function serviceRun(variant: Variant, scenario: string): Promise<number> {
  let total = 0;
  await onFreshCopy(() =>
    serve(variant, true, 'write', WARM_SERVICE + WRITES, async (url, pid) => {
      await write(url, scenario, WARM_SERVICE, 'warm');
      execFileSync('callgrind_control', ['-z', String(pid)], { stdio: 'ignore' });
      await write(url, scenario, WRITES, 'counted');
      execFileSync('callgrind_control', ['-d', String(pid)], { stdio: 'ignore' });
      await new Promise((resolve) => setTimeout(resolve, 2000));
      // The main thread (the largest count): V8's helper threads do its garbage collection when the timing suits them.
      total = Math.max(0, ...collect(`service.${pid}.`));
    }),
  );
  discard('service.');
  if (!total) throw new Error('callgrind dumped nothing for the service');
  return total / WRITES;
}

const k = (n: number) => `${(n / 1000).toFixed(1)}k`;
const pct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1)} %`;
const ENDINGS: Ending[] = ['write', 'life'];
interface Counted {
  /** PostgreSQL per write, by ending. */
  postgres: Record<Ending, number>;
  service: number;
}
const lines: string[] = [];
try {
  await seed();
  for (const scenario of SCENARIOS) {
    const per = new Map<Variant, Counted>();
    for (const variant of VARIANTS) {
      const postgres = { write: Number.NaN, life: Number.NaN };
      if (ONLY !== 'service') {
        for (const ending of ENDINGS) {
          const long = await postgresRun(variant, scenario, WARM + WRITES, ending);
          postgres[ending] = (long - (await postgresRun(variant, scenario, WARM, ending))) / WRITES;
        }
      }
      const counted = { postgres, service: ONLY === 'postgres' ? Number.NaN : await serviceRun(variant, scenario) };
      per.set(variant, counted);
      process.stderr.write(
        `${scenario} ${variant}: PostgreSQL ${k(postgres.write)} (with the rest of the change's life ${k(postgres.life)}), service ${k(counted.service)} instructions per write\n`,
      );
    }
    const on = per.get('feed') as Counted;
    const off = per.get('triggers off') as Counted;
    // The service does the same work either way (the triggers run inside PostgreSQL): its two counts differ by V8's
    // compiler and collector only, so their mean is its share of a write in both.
    const service = (on.service + off.service) / 2;
    const cells = ENDINGS.map((ending) => {
      const extra = on.postgres[ending] - off.postgres[ending];
      return `${k(on.postgres[ending])} / ${k(off.postgres[ending])} | +${k(extra)} (+${pct(extra, off.postgres[ending])}) | +${pct(extra, off.postgres[ending] + service)}`;
    });
    lines.push(`| ${scenario} | ${cells.join(' | ')} | ${k(on.service)} / ${k(off.service)} |`);
  }
  console.log(
    `${WRITES} writes counted per variant, ${CONNECTIONS} at a time, on ${ROWS.toLocaleString('en')} users. PostgreSQL: every process of the server, (after ${WARM + WRITES} writes − after ${WARM}) / ${WRITES}; \`write\`: the writes alone (the changes wait in the pending table), \`life\`: then the feed read (sequencing every change), purged and vacuumed. The service: its main thread once warm (after ${WARM_SERVICE} writes). \`of the whole\`: of PostgreSQL's count without the triggers plus the service's mean.`,
  );
  console.log(
    '\n| scenario | PostgreSQL, write (feed / triggers off) | recording | of the whole | PostgreSQL, life (feed / triggers off) | recording | of the whole | service (feed / triggers off) |\n|---|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (const line of lines) console.log(line);
} finally {
  stopCluster({ stateFile });
  rmSync(scratch, { recursive: true, force: true });
}

// The benchmark harness (`npm run bench`): this service, the floor (bench/floor.mjs) and
// json-server over the same data, loaded by autocannon per scenario, in alternation, medians.
// Writes bench/results.md. Options: --rows --duration --rounds --connections --servers --out --baseline <checkout>
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { closeDatabase, openDatabase } from '../src/db/client.js';
import { applyMigrations } from '../src/db/migrate.js';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
    // Without --servers: these four, plus restable-baseline when --baseline is given.
    servers: { type: 'string' },
    scenarios: { type: 'string' },
    out: { type: 'string', default: 'bench/results.md' },
    // Another checkout of restable, built (dist/ and node_modules/): served as `restable-baseline`.
    baseline: { type: 'string' },
  },
});
const ROWS = Number(args.rows);
const DURATION = Number(args.duration);
const WARMUP = Number(args.warmup);
const ROUNDS = Number(args.rounds);
const CONNECTIONS = Number(args.connections);
const ROOT = new URL('..', import.meta.url).pathname;
const BASELINE = args.baseline ? resolve(args.baseline) : undefined;
const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return cpus().length > 1;
  } catch {
    return false;
  }
})();

type Kind = 'restable' | 'floor' | 'json-server';
interface ServerSpec {
  name: string;
  kind: Kind;
  command: (data: string, port: number) => { argv: string[]; env: Record<string, string> };
  /** Pinned to one core (the load generator gets the other), unless it is the multi-core variant. */
  pin: boolean;
  /** Where the server runs (its argv is relative to it); this checkout unless said otherwise. */
  cwd?: string;
  /** The seeded SQLite file it gets a copy of; `app.db` (migrated by this checkout) unless said otherwise. */
  seedFile?: string;
}

// synchronous=NORMAL like the floor, so both do the same work per commit.
const restableEnv = (data: string, port: number) => ({
  DATABASE_PATH: join(data, 'app.db'),
  PORT: String(port),
  LOG_LEVEL: 'warn',
  DATABASE_SYNCHRONOUS: 'NORMAL',
});

const SERVERS: ServerSpec[] = [
  {
    name: 'restable',
    kind: 'restable',
    pin: true,
    command: (data, port) => ({ argv: ['dist/main.js'], env: restableEnv(data, port) }),
  },
  // The same service from another checkout (--baseline), on the same rows, so that a change is
  // judged by its ratio to the code before it within one run: this VM varies ±20 % between runs.
  ...(BASELINE
    ? [
        {
          name: 'restable-baseline',
          kind: 'restable',
          pin: true,
          cwd: BASELINE,
          seedFile: 'baseline.db',
          command: (data: string, port: number) => ({ argv: ['dist/main.js'], env: restableEnv(data, port) }),
        } satisfies ServerSpec,
      ]
    : []),
  {
    name: 'floor',
    kind: 'floor',
    pin: true,
    command: (data, port) => ({ argv: ['bench/floor.mjs'], env: { DATABASE_PATH: join(data, 'app.db'), PORT: String(port) } }),
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
  {
    name: 'restable-2-workers',
    kind: 'restable',
    pin: false,
    command: (data, port) => ({ argv: ['dist/main.js'], env: { ...restableEnv(data, port), WORKERS: '2' } }),
  },
];

let unique = 0;
const randomId = () => 1 + Math.floor(Math.random() * ROWS);
const json = { 'content-type': 'application/json' };

interface Scenario {
  name: string;
  requests: (kind: Kind) => autocannon.Request[];
}

/** A request whose path (and body) are drawn anew each time it is sent. */
function varying(method: 'GET' | 'POST' | 'PATCH', path: () => string, body?: () => object): autocannon.Request {
  return {
    setupRequest: (req) => ({ ...req, method, path: path(), ...(body ? { headers: json, body: JSON.stringify(body()) } : {}) }),
  };
}
const getElement = () => varying('GET', () => `/users/${randomId()}`);
const rename = () =>
  varying(
    'PATCH',
    () => `/users/${randomId()}`,
    () => ({ name: `n${++unique}` }),
  );

const SCENARIOS: Scenario[] = [
  { name: 'GET element', requests: () => [getElement()] },
  { name: 'GET first page of 100', requests: (kind) => [{ method: 'GET', path: kind === 'json-server' ? '/users?_limit=100' : '/users' }] },
  { name: 'GET related list', requests: () => [varying('GET', () => `/users/${randomId()}/pets`)] },
  {
    name: 'POST create',
    requests: () => [
      varying(
        'POST',
        () => '/users',
        () => ({ name: 'Bench', email: `bench-${process.pid}-${++unique}@example.com` }),
      ),
    ],
  },
  { name: 'PATCH', requests: () => [rename()] },
  { name: 'mix 90/10 read/write', requests: () => [...Array.from({ length: 9 }, getElement), rename()] },
];

/** The same rows for everyone: inserted into a migrated SQLite database, and returned for db.json. */
function insertRows(sqlite: Database.Database, now: string): { users: object[]; pets: object[] } {
  const users: object[] = [];
  const pets: object[] = [];
  const addUser = sqlite.prepare('INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, ?, ?)');
  const addPet = sqlite.prepare('INSERT INTO pets (name, species, owner_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)');
  sqlite.transaction(() => {
    for (let id = 1; id <= ROWS; id++) {
      addUser.run(`user ${id}`, `user${id}@example.com`, now, now);
      users.push({ id, name: `user ${id}`, email: `user${id}@example.com`, createdAt: now, updatedAt: now });
    }
    for (let id = 1; id <= ROWS; id++) {
      const owner = 1 + ((id * 7919) % ROWS);
      addPet.run(`pet ${id}`, 'dog', owner, now, now);
      pets.push({ id, name: `pet ${id}`, species: 'dog', userId: owner, createdAt: now, updatedAt: now });
    }
  })();
  return { users, pets };
}

/**
 * The same data for everyone: a SQLite file migrated by this checkout, an equivalent db.json and,
 * with --baseline, `baseline.db` migrated by the baseline's own `dist/cli/migrate.js` (the two may
 * differ in migrations, and each refuses a database migrated by a newer version) with the same rows.
 */
async function seed(dir: string): Promise<void> {
  const now = new Date().toISOString();
  const database = openDatabase(join(dir, 'app.db'));
  await applyMigrations(database);
  const { users, pets } = insertRows(database.sqlite, now);
  closeDatabase(database);
  writeFileSync(join(dir, 'db.json'), JSON.stringify({ users, pets }));
  if (BASELINE) {
    const file = join(dir, 'baseline.db');
    execFileSync(process.execPath, ['dist/cli/migrate.js'], {
      cwd: BASELINE,
      env: { PATH: process.env.PATH, DATABASE_PATH: file },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const sqlite = new Database(file);
    insertRows(sqlite, now);
    sqlite.close();
  }
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

/**
 * A port nobody listens on right now, picked by the OS: others may run servers (or this harness) on
 * the same machine, and a fixed port could make us load their server, or fail with EADDRINUSE.
 */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitUntilServing(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: the server exited with ${child.exitCode} before serving`);
    try {
      if ((await fetch(`${url}/users/1`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not start`);
}

interface Measure {
  rps: number;
  p50: number;
  p99: number;
  rss: number;
  failures: number;
  /** The statuses other than 2xx and how many of each, e.g. `503×12`, to tell why requests failed. */
  statuses: string;
}

async function measure(spec: ServerSpec, scenario: Scenario, seedDir: string, port: number): Promise<Measure> {
  const data = mkdtempSync(join(tmpdir(), 'restable-run-'));
  copyFileSync(join(seedDir, spec.seedFile ?? 'app.db'), join(data, 'app.db'));
  copyFileSync(join(seedDir, 'db.json'), join(data, 'db.json'));
  const { argv, env } = spec.command(data, port);
  const pinned = spec.pin && hasTaskset;
  const [file, ...rest] = pinned ? ['taskset', '-c', '1', process.execPath, ...argv] : [process.execPath, ...argv];
  const child = spawn(file as string, rest, {
    cwd: spec.cwd ?? ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntilServing(url, child);
    const requests = scenario.requests(spec.kind);
    if (WARMUP > 0) await autocannon({ url, connections: CONNECTIONS, duration: WARMUP, requests });
    const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, requests });
    return {
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      rss: peakRss(child.pid as number),
      failures: result.errors + result.timeouts + result.non2xx,
      statuses: Object.entries(result.statusCodeStats ?? {})
        .filter(([code]) => !code.startsWith('2'))
        .map(([code, { count }]) => `${code}×${count}`)
        .join(' '),
    };
  } finally {
    const exited = new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
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
  const names = (args.servers ?? `restable,floor,json-server,restable-2-workers${BASELINE ? ',restable-baseline' : ''}`).split(',');
  const unknown = names.filter((name) => !SERVERS.some((s) => s.name === name));
  if (unknown.length) {
    throw new Error(
      `unknown server(s): ${unknown.join(', ')}${unknown.includes('restable-baseline') ? ' (restable-baseline needs --baseline <checkout>)' : ''}`,
    );
  }
  const servers = SERVERS.filter((s) => names.includes(s.name));
  const scenarios = args.scenarios ? SCENARIOS.filter((s) => (args.scenarios as string).split(',').includes(s.name)) : SCENARIOS;
  const seedDir = mkdtempSync(join(tmpdir(), 'restable-seed-'));
  const results = new Map<string, Measure[]>();
  const total = ROUNDS * scenarios.length * servers.length;
  let done = 0;
  // A server that fails to start throws; the seeded files go either way (measure() stops its own server).
  try {
    process.stderr.write(`seeding ${ROWS} users and ${ROWS} pets… `);
    await seed(seedDir);
    process.stderr.write('done\n');
    for (let round = 0; round < ROUNDS; round++) {
      for (const scenario of scenarios) {
        // Alternate the order every round (A B C, B C A, …) so that drift of a noisy machine cancels out.
        const order = servers.map((_, i) => servers[(i + round) % servers.length] as ServerSpec);
        for (const spec of order) {
          const m = await measure(spec, scenario, seedDir, await freePort());
          const key = `${scenario.name}|${spec.name}`;
          results.set(key, [...(results.get(key) ?? []), m]);
          process.stderr.write(
            `[${++done}/${total}] round ${round + 1} ${scenario.name.padEnd(22)} ${spec.name.padEnd(19)} ${Math.round(m.rps).toLocaleString('en').padStart(8)} req/s  p99 ${m.p99} ms${m.failures ? `  ${m.failures} failures ${m.statuses}` : ''}\n`,
          );
        }
      }
    }
  } finally {
    rmSync(seedDir, { recursive: true, force: true });
  }
  writeReport(servers, scenarios, results);
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

function writeReport(servers: ServerSpec[], scenarios: Scenario[], results: Map<string, Measure[]>): void {
  const med = (scenario: string, server: string, pick: (m: Measure) => number) =>
    median((results.get(`${scenario}|${server}`) ?? []).map(pick));
  const has = (name: string) => servers.some((s) => s.name === name);
  const sqlite = new Database(':memory:').prepare('select sqlite_version() v').pluck().get();
  const lines = [
    '# Benchmark results',
    '',
    `Generated by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores; Node ${process.version}, SQLite ${sqlite};`,
    `${ROWS.toLocaleString('en')} users and pets; autocannon, ${CONNECTIONS} connections, ${WARMUP} s warm-up + ${DURATION} s per run, ${ROUNDS} rounds in alternation, medians.`,
    hasTaskset
      ? 'Single-process servers pinned to core 1 (`taskset`), the load generator on the other; `restable-2-workers` unpinned.'
      : 'No CPU pinning (taskset unavailable or one core).',
    '',
    '| scenario | server | req/s | p50 ms | p99 ms | peak RSS MB | × floor | × json-server | failures |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const scenario of scenarios) {
    const floor = has('floor') ? med(scenario.name, 'floor', (m) => m.rps) : Number.NaN;
    const peer = has('json-server') ? med(scenario.name, 'json-server', (m) => m.rps) : Number.NaN;
    for (const server of servers) {
      const rps = med(scenario.name, server.name, (m) => m.rps);
      const failures = (results.get(`${scenario.name}|${server.name}`) ?? []).reduce((sum, m) => sum + m.failures, 0);
      lines.push(
        `| ${scenario.name} | ${server.name} | ${Math.round(rps).toLocaleString('en')} | ${med(scenario.name, server.name, (m) => m.p50)} | ${med(scenario.name, server.name, (m) => m.p99)} | ${med(scenario.name, server.name, (m) => m.rss).toFixed(0)} | ${has('floor') ? (rps / floor).toFixed(2) : '–'} | ${has('json-server') ? (rps / peer).toFixed(1) : '–'} | ${failures} |`,
      );
    }
  }
  if (has('restable') && has('floor') && has('json-server')) {
    const ratio = (scenario: string, other: string) => med(scenario, 'restable', (m) => m.rps) / med(scenario, other, (m) => m.rps);
    const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');
    const present = (name: string) => scenarios.some((s) => s.name === name);
    lines.push('', '## Targets', '', '| target | measured | verdict |', '|---|---|---|');
    for (const name of ['GET element', 'POST create'].filter(present)) {
      lines.push(`| ${name} ≥ 0.90× floor | ${ratio(name, 'floor').toFixed(2)}× | ${verdict(ratio(name, 'floor') >= 0.9)} |`);
    }
    for (const { name } of scenarios)
      lines.push(`| ${name} ≥ 0.80× floor | ${ratio(name, 'floor').toFixed(2)}× | ${verdict(ratio(name, 'floor') >= 0.8)} |`);
    for (const name of ['POST create', 'PATCH'].filter(present)) {
      lines.push(`| ${name} ≥ 5× json-server | ${ratio(name, 'json-server').toFixed(1)}× | ${verdict(ratio(name, 'json-server') >= 5)} |`);
    }
    for (const { name } of scenarios)
      lines.push(
        `| ${name} ahead of json-server | ${ratio(name, 'json-server').toFixed(1)}× | ${verdict(ratio(name, 'json-server') > 1)} |`,
      );
    const rss = Math.max(...scenarios.map((s) => med(s.name, 'restable', (m) => m.rss)));
    lines.push(`| peak RSS under load < 120 MB | ${rss.toFixed(0)} MB | ${verdict(rss < 120)} |`);
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
      const mine = med(name, 'restable', (m) => m.rps);
      const base = med(name, 'restable-baseline', (m) => m.rps);
      const theirs = results.get(`${name}|restable-baseline`) ?? [];
      const paired = (results.get(`${name}|restable`) ?? []).map((m, i) => m.rps / (theirs[i]?.rps ?? Number.NaN));
      const pair = (pick: (m: Measure) => number, digits: number) =>
        `${med(name, 'restable', pick).toFixed(digits)} / ${med(name, 'restable-baseline', pick).toFixed(digits)}`;
      lines.push(
        `| ${name} | ${Math.round(mine).toLocaleString('en')} | ${Math.round(base).toLocaleString('en')} | ${(mine / base).toFixed(2)} | ${median(paired).toFixed(2)} (${Math.min(...paired).toFixed(2)}–${Math.max(...paired).toFixed(2)}) | ${pair((m) => m.p99, 0)} | ${pair((m) => m.rss, 0)} |`,
      );
    }
  }
  const report = `${lines.join('\n')}\n`;
  writeFileSync(resolve(ROOT, args.out as string), report);
  console.log(`\n${report}`);
  const failures = [...results.values()].flat().reduce((sum, m) => sum + m.failures, 0);
  if (failures > 0) {
    console.error(`bench: ${failures} requests failed (errors, timeouts or non-2xx); the figures above are not valid`);
    process.exitCode = 1;
  }
}

await main();

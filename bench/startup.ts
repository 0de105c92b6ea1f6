// Start-up with many tables (issue 14): for each table count, an install of the compiled service (bench/tables.ts) on a database
// it has already migrated; time to /healthz and /readyz, /openapi.json twice, /docs, peak RSS; medians over runs; --profile.
// Usage: npm run build && npx tsx bench/startup.ts [--tables 3,300,1000] [--runs 5] [--profile 300] [--browser]
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, copyFileSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { is } from 'drizzle-orm';
import { SQLiteTable } from 'drizzle-orm/sqlite-core';
import { freePort, START_ARGV } from './processes.js';
import { makeWideInstall } from './tables.js';

const { values: args } = parseArgs({
  options: {
    tables: { type: 'string', default: '3,300,1000' },
    runs: { type: 'string', default: '5' },
    // One more start at this table count under `node --cpu-prof`, and where its CPU went, by start-up phase.
    profile: { type: 'string' },
    // Once per table count: headless Chromium (/usr/bin/chromium, or CHROMIUM_PATH) opens /docs; time until Swagger UI shows the first kind.
    browser: { type: 'boolean', default: false },
  },
});
const ROOT = resolve(import.meta.dirname, '..');
const RUNS = Number(args.runs);
const COUNTS = (args.tables as string).split(',').map(Number);
const PROFILE = args.profile === undefined ? undefined : Number(args.profile);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error('--runs must be a whole number ≥ 1');
if (COUNTS.some((n) => !Number.isInteger(n)) || (PROFILE !== undefined && !Number.isInteger(PROFILE))) {
  throw new Error('--tables and --profile take whole numbers');
}
const work = mkdtempSync(join(tmpdir(), 'restable-startup-'));

/** How many tables the shipped schema has: that count is served by this checkout as it is, more by a generated install. */
const SHIPPED = Object.values(await import(pathToFileURL(join(ROOT, 'dist', 'db', 'schema.js')).href)).filter((v) =>
  is(v, SQLiteTable),
).length;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (i: number) => sorted[i] as number;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? at(mid) : (at(mid - 1) + at(mid)) / 2;
}

/** One GET on a new connection (node:http, not fetch: the harness's own first fetch would load undici inside the timing). */
/** A GET as a browser asks for pages (Accept names text/html), so /docs answers its HTML page, not the terminal's note. */
function get(port: number, path: string): Promise<{ status: number; bytes: number; ms: number }> {
  const at = performance.now();
  return new Promise((done, fail) => {
    request({ host: '127.0.0.1', port, path, agent: false, headers: { accept: 'text/html,application/json;q=0.9' } }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      res.on('end', () => done({ status: res.statusCode as number, bytes, ms: performance.now() - at }));
      res.on('error', fail);
    })
      .on('error', fail)
      .end();
  });
}

/** Peak resident memory (VmHWM) of a process so far, in MB. */
function peakRss(pid: number): number {
  return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

interface Started {
  child: ChildProcess;
  port: number;
  /** ms from spawn to the first 200 of each. */
  healthz: number;
  readyz: number;
  stop: () => Promise<void>;
}

/** Spawns the install's service on a copy of its migrated database (stdout, the request log, to a file) and polls until ready. */
async function start(dir: string, seed: string, name: string, nodeFlags: string[] = []): Promise<Started> {
  const file = join(work, `${name}.db`);
  copyFileSync(seed, file);
  const port = await freePort();
  const log = openSync(join(work, `${name}.log`), 'w');
  const started = performance.now();
  const child = spawn(process.execPath, [...nodeFlags, ...START_ARGV], {
    cwd: dir,
    env: { PATH: process.env.PATH, DATABASE_PATH: file, PORT: String(port) },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  let healthz: number | undefined;
  let readyz: number | undefined;
  // Every 5 ms each probe that has not answered 200 yet; a refused connection fails at once.
  while (healthz === undefined || readyz === undefined) {
    if (child.exitCode !== null) throw new Error(`${name}: the service exited with ${child.exitCode}; see ${join(work, `${name}.log`)}`);
    if (performance.now() - started > 60_000) {
      await stop();
      throw new Error(`${name}: not ready after 60 s`);
    }
    const probe = async (path: string) =>
      (await get(port, path).catch(() => undefined))?.status === 200 ? performance.now() - started : undefined;
    const [h, r] = await Promise.all([healthz ?? probe('/healthz'), readyz ?? probe('/readyz')]);
    healthz = h;
    readyz = r;
    if (healthz === undefined || readyz === undefined) await new Promise((r) => setTimeout(r, 5));
  }
  return { child, port, healthz, readyz, stop };
}

interface Run {
  healthz: number;
  readyz: number;
  rssReady: number;
  openapi1: number;
  openapi2: number;
  bytes: number;
  docs: number;
  rss: number;
}

async function measure(dir: string, seed: string, name: string): Promise<Run> {
  const service = await start(dir, seed, name);
  try {
    const rssReady = peakRss(service.child.pid as number);
    const first = await get(service.port, '/openapi.json');
    const second = await get(service.port, '/openapi.json');
    const docs = await get(service.port, '/docs');
    for (const [what, r] of [
      ['/openapi.json', first],
      ['/openapi.json', second],
      ['/docs', docs],
    ] as const) {
      if (r.status !== 200) throw new Error(`${name}: ${what} answered ${r.status}`);
    }
    if (first.bytes !== second.bytes) throw new Error(`${name}: /openapi.json changed size between two requests`);
    return {
      healthz: service.healthz,
      readyz: service.readyz,
      rssReady,
      openapi1: first.ms,
      openapi2: second.ms,
      bytes: first.bytes,
      docs: docs.ms,
      rss: peakRss(service.child.pid as number),
    };
  } finally {
    await service.stop();
  }
}

/** How long the browser gets to show anything: a page still blank after 2 minutes is not usable. */
const BROWSER_TIMEOUT = 120_000;

/**
 * Chromium opens /docs: ms until Swagger UI shows the first kind's section (nothing is readable before: it fetches, parses and
 * resolves the whole document first), how many sections are in the page then, and the page's JS heap.
 */
async function inBrowser(dir: string, seed: string, name: string): Promise<{ first: number; sections: number; heap: number }> {
  const { chromium } = await import('playwright-core');
  const service = await start(dir, seed, name);
  const profile = mkdtempSync(join(work, 'chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 1600 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    const at = performance.now();
    await page.goto(`http://127.0.0.1:${service.port}/docs`);
    await page.waitForSelector('.opblock-tag', { timeout: BROWSER_TIMEOUT });
    const first = performance.now() - at;
    const [sections, heap] = await page.evaluate(() => [
      document.querySelectorAll('.opblock-tag').length,
      // Chromium only (performance.memory): the page's JS heap in use.
      ((performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? Number.NaN) / 2 ** 20,
    ]);
    return { first, sections: sections as number, heap: heap as number };
  } finally {
    await browser.close();
    await service.stop();
  }
}

// ---- where the CPU of one start goes (node --cpu-prof), by phase ----

interface CpuNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: CpuNode[];
  samples: number[];
  timeDeltas: number[];
}
type Frame = CpuNode['callFrame'];
const named = (name: string, file?: string) => (f: Frame) => f.functionName === name && (file === undefined || f.url.endsWith(file));
const under = (stack: Frame[], test: (f: Frame) => boolean) => stack.some(test);

/**
 * Phases, most specific first; a sample counts for the first whose test its stack (root first) passes. JSON.stringify is a
 * builtin: the profiler charges it to its caller, so createApp's own time is the document's serialisation.
 */
const PHASES: [string, (stack: Frame[]) => boolean][] = [
  ['requests after start (/openapi.json ×2, /docs)', (s) => under(s, named('parserOnIncoming'))],
  // The schema module's own evaluation: drizzle's sqliteTable() for every table, before any of restable's code runs.
  ['evaluating dist/db/schema.js (sqliteTable per table)', (s) => under(s, (f) => f.url.endsWith('/dist/db/schema.js'))],
  ['module loading (node, dist/, node_modules/)', (s) => under(s, (f) => f.url.startsWith('node:internal/modules'))],
  ['openDatabase + applyMigrations (nothing pending)', (s) => under(s, named('migrate', 'dist/main.js'))],
  ['toOpenApi: drizzle-zod createSelectSchema per kind', (s) => under(s, named('toOpenApi')) && under(s, named('createSelectSchema'))],
  ['toOpenApi: zod toJSONSchema', (s) => under(s, named('toOpenApi')) && under(s, named('toJSONSchema'))],
  ['toOpenApi: the rest (paths, parameters, operations)', (s) => under(s, named('toOpenApi'))],
  ['JSON.stringify of the OpenAPI document (createApp)', (s) => s.at(-1)?.functionName === 'createApp'],
  [
    'createRegistry: drizzle-zod createInsertSchema per kind',
    (s) => under(s, named('createRegistry')) && under(s, named('createInsertSchema')),
  ],
  ['createRegistry: the rest (keys, relations, routes)', (s) => under(s, named('createRegistry'))],
  ['createBackend: drizzle builds each statement (toStatement)', (s) => under(s, named('createBackend')) && under(s, named('toStatement'))],
  ['createBackend: the rest (sqlite3 prepare, …)', (s) => under(s, named('createBackend'))],
  [
    'createResourceEndpoints + compile + createRouteTable',
    (s) => under(s, (f) => /^(createResourceEndpoints|compile|createRouteTable)$/.test(f.functionName)),
  ],
  ['createApp: the rest', (s) => under(s, named('createApp'))],
  ['idle (waiting for the probes, for I/O)', (s) => s.at(-1)?.functionName === '(idle)'],
];

/** ms per phase; garbage collection is charged to the phase of the sample before it (the allocations it collects). */
function phasesOf(profile: CpuProfile): Map<string, { ms: number; gc: number }> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const totals = new Map<string, { ms: number; gc: number }>();
  let previous = 'other (node bootstrap, timers, pino)';
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    const stack: Frame[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.unshift((byId.get(at) as CpuNode).callFrame);
    const gc = stack.at(-1)?.functionName === '(garbage collector)';
    const phase = gc ? previous : (PHASES.find(([, test]) => test(stack))?.[0] ?? 'other (node bootstrap, timers, pino)');
    const entry = totals.get(phase) ?? { ms: 0, gc: 0 };
    entry.ms += ms;
    if (gc) entry.gc += ms;
    totals.set(phase, entry);
    previous = phase;
  });
  return totals;
}

async function profileStart(dir: string, seed: string, total: number): Promise<string[]> {
  const out = mkdtempSync(join(work, 'cpu-'));
  // 0.2 ms between samples (the default is 1 ms): phases of a few ms still show.
  const service = await start(dir, seed, `profile-${total}`, ['--cpu-prof', '--cpu-prof-dir', out, '--cpu-prof-interval', '200']);
  const ready = service.readyz;
  for (const path of ['/openapi.json', '/openapi.json', '/docs']) await get(service.port, path);
  await service.stop();
  const file = readdirSync(out).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('node --cpu-prof wrote no profile: did the service exit cleanly on SIGTERM?');
  const phases = phasesOf(JSON.parse(readFileSync(join(out, file), 'utf8')) as CpuProfile);
  const busy = [...phases].filter(([name]) => !name.startsWith('idle') && !name.startsWith('requests'));
  const startup = busy.reduce((sum, [, p]) => sum + p.ms, 0);
  const lines = [
    `Where the CPU of one start with ${total} tables goes (\`node --cpu-prof\`, this start ready in ${ready.toFixed(0)} ms under the profiler;`,
    `shares of the ${startup.toFixed(0)} ms of start-up CPU, i.e. without idle time and the requests after it; GC charged to the phase it interrupted):`,
    '',
    '| phase | ms | share | of which GC (ms) |',
    '|---|---:|---:|---:|',
  ];
  for (const [name, p] of [...phases].sort((a, b) => b[1].ms - a[1].ms)) {
    const share = busy.some(([n]) => n === name) ? `${((100 * p.ms) / startup).toFixed(0)} %` : '–';
    lines.push(`| ${name} | ${p.ms.toFixed(0)} | ${share} | ${p.gc.toFixed(0)} |`);
  }
  return lines;
}

// ---- main ----

const rows: string[] = [];
const browserRows: string[] = [];
let profileLines: string[] = [];
const counts = [...new Set([...COUNTS, ...(PROFILE === undefined ? [] : [PROFILE])])];
try {
  for (const total of counts) {
    if (total < SHIPPED) throw new Error(`--tables ${total}: the shipped schema already has ${SHIPPED} tables`);
    const install = total === SHIPPED ? { dir: ROOT, remove: () => {} } : await makeWideInstall(ROOT, total);
    try {
      // The database the service is given already exists and is migrated: issue 14 serves a database you already have.
      const seed = join(work, `seed-${total}.db`);
      const at = performance.now();
      execFileSync(process.execPath, ['dist/cli/migrate.js'], {
        cwd: install.dir,
        env: { PATH: process.env.PATH, DATABASE_PATH: seed },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const migrated = performance.now() - at;
      if (COUNTS.includes(total)) {
        const runs: Run[] = [];
        for (let run = 1; run <= RUNS; run++) {
          const r = await measure(install.dir, seed, `t${total}-r${run}`);
          runs.push(r);
          console.error(
            `${total} tables, run ${run}/${RUNS}: /healthz ${r.healthz.toFixed(0)} ms, /readyz ${r.readyz.toFixed(0)} ms, /openapi.json ${r.openapi1.toFixed(0)} + ${r.openapi2.toFixed(0)} ms (${(r.bytes / 1e6).toFixed(1)} MB), /docs ${r.docs.toFixed(1)} ms, peak RSS ${r.rss.toFixed(0)} MB`,
          );
        }
        const m = (pick: (r: Run) => number, digits = 0) => median(runs.map(pick)).toFixed(digits);
        rows.push(
          `| ${total} | ${migrated.toFixed(0)} | ${m((r) => r.healthz)} | ${m((r) => r.readyz)} | ${m((r) => r.openapi1)} | ${m((r) => r.openapi2)} | ${m((r) => r.bytes / 1e6, 2)} | ${m((r) => r.docs, 1)} | ${m((r) => r.rssReady)} | ${m((r) => r.rss)} |`,
        );
        if (args.browser) {
          const b = await inBrowser(install.dir, seed, `t${total}-browser`).catch((error: Error) => {
            console.error(`${total} tables, Chromium: ${error.message.split('\n')[0]}`);
            return undefined;
          });
          if (!b) browserRows.push(`| ${total} | nothing after ${BROWSER_TIMEOUT / 1000} s | – | – |`);
          else {
            console.error(
              `${total} tables, Chromium: first section after ${b.first.toFixed(0)} ms (${b.sections} in the page), JS heap ${b.heap.toFixed(0)} MB`,
            );
            browserRows.push(`| ${total} | ${(b.first / 1000).toFixed(1)} | ${b.sections} | ${b.heap.toFixed(0)} |`);
          }
        }
      }
      if (total === PROFILE) profileLines = await profileStart(install.dir, seed, total);
    } finally {
      install.remove();
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const report = [
  `Medians of ${RUNS} start(s) per table count (Node ${process.version}); ms unless said; the database is migrated beforehand (its time: first column).`,
  '',
  '| tables | migrate a new file (once) | spawn → `/healthz` 200 | spawn → `/readyz` 200 | 1st `/openapi.json` | 2nd `/openapi.json` | its size (MB) | `/docs` | peak RSS at ready (MB) | peak RSS after the requests (MB) |',
  '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...rows,
];
if (browserRows.length) {
  report.push(
    '',
    'Headless Chromium on `/docs` (one start per table count): seconds until Swagger UI shows the first kind, the sections in the page then, its JS heap.',
    '',
    '| tables | first kind shown (s) | sections in the page | page JS heap (MB) |',
    '|---:|---:|---:|---:|',
    ...browserRows,
  );
}
if (profileLines.length) report.push('', ...profileLines);
console.log(report.join('\n'));

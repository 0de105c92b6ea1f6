// Profiles the compiled service under one benchmark scenario: runs it with `node --cpu-prof`, loads
// it with autocannon, and prints where the CPU went (self time by package and by function).
// Usage: npm run build && tsx bench/profile.ts [--path /users/1] [--method GET] [--body '{…}'] [--seconds 5] [--wrk]
// (--wrk: GET load from Debian's wrk pinned to core 0, 32 connections, which keeps the server busier than autocannon can)
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { insertRows, migrate } from './rows.js';

const { values: args } = parseArgs({
  options: {
    path: { type: 'string', default: '/users/1' },
    method: { type: 'string', default: 'GET' },
    body: { type: 'string' },
    seconds: { type: 'string', default: '5' },
    rows: { type: 'string', default: '1000' },
    wrk: { type: 'boolean', default: false },
  },
});
const dir = mkdtempSync(join(tmpdir(), 'restable-profile-'));
migrate('.', join(dir, 'app.db'));
insertRows(join(dir, 'app.db'), Number(args.rows), new Date().toISOString());

const child = spawn('taskset', ['-c', '1', process.execPath, '--cpu-prof', `--cpu-prof-dir=${dir}`, 'dist/main.js'], {
  env: { PATH: process.env.PATH, DATABASE_PATH: join(dir, 'app.db'), PORT: '39199', LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
await new Promise((r) => setTimeout(r, 1000));
let n = 0;
if (args.wrk) {
  const out = execFileSync('taskset', ['-c', '0', 'wrk', '-t1', '-c32', `-d${args.seconds}s`, `http://127.0.0.1:39199${args.path}`], {
    encoding: 'utf8',
  });
  console.log(/Requests\/sec:.*/.exec(out)?.[0]);
}
const result = await autocannon({
  url: 'http://127.0.0.1:39199',
  connections: 10,
  duration: args.wrk ? 0.1 : Number(args.seconds),
  requests: [
    {
      setupRequest: (req) => ({
        ...req,
        method: args.method as 'GET',
        path: args.path as string,
        ...(args.body ? { headers: { 'content-type': 'application/json' }, body: (args.body as string).replace('$n', String(++n)) } : {}),
      }),
    },
  ],
});
console.log(`${Math.round(result.requests.average)} req/s, ${result.non2xx} non-2xx`);
await new Promise((resolve) => child.once('exit', resolve).kill('SIGTERM'));

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile')) as string;
const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { nodes: Node[] };
const total = profile.nodes.reduce((sum, node) => sum + node.hitCount, 0);
const tally = (key: (node: Node) => string) => {
  const sums = new Map<string, number>();
  for (const node of profile.nodes) sums.set(key(node), (sums.get(key(node)) ?? 0) + node.hitCount);
  return [...sums].sort((a, b) => b[1] - a[1]);
};
const where = ({ callFrame: { url } }: Node) =>
  /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url)?.[1] ??
  (url.includes('/dist/') ? `restable ${url.split('/dist/')[1]}` : url.startsWith('node:') ? url : url || '(native/gc/idle)');
const pct = (hits: number) => `${((100 * hits) / total).toFixed(1).padStart(5)}%`;
console.log('\nself time by package/file:');
for (const [name, hits] of tally(where).slice(0, 18)) console.log(`${pct(hits)}  ${name}`);
console.log('\nself time by function:');
for (const [name, hits] of tally(
  (node) => `${node.callFrame.functionName || '(anonymous)'}  ${where(node)}:${node.callFrame.lineNumber + 1}`,
).slice(0, 25)) {
  console.log(`${pct(hits)}  ${name}`);
}

// Inclusive time: a function's samples with everything it called (counted once per stack, so recursion
// does not count twice). Shows what a step of the request path costs as a whole.
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const inclusive = new Map<string, number>();
const label = (node: Node) => `${node.callFrame.functionName || '(anonymous)'}  ${where(node)}:${node.callFrame.lineNumber + 1}`;
const walk = (node: Node, onStack: Set<string>): number => {
  let hits = node.hitCount;
  const name = label(node);
  const fresh = !onStack.has(name);
  if (fresh) onStack.add(name);
  for (const child of node.children ?? []) hits += walk(byId.get(child) as Node, onStack);
  if (fresh) {
    onStack.delete(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + hits);
  }
  return hits;
};
walk(profile.nodes[0] as Node, new Set());
console.log('\ninclusive time by function (restable and polka):');
for (const [name, hits] of [...inclusive]
  .filter(([name]) => / (restable|polka|trouter)/.test(name))
  .sort((a, b) => b[1] - a[1])
  .slice(0, 40)) {
  console.log(`${pct(hits)}  ${name}`);
}

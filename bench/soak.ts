// Long-run soak (`npm run soak -- --minutes N`; not part of CI): mixed load against the compiled
// service in slices, reporting RSS and latency over time, and whether RSS trends upwards.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const { values: args } = parseArgs({ options: { minutes: { type: 'string', default: '10' }, slices: { type: 'string', default: '20' } } });
const slices = Number(args.slices);
const sliceSeconds = Math.max(1, Math.round((Number(args.minutes) * 60) / slices));
const dir = mkdtempSync(join(tmpdir(), 'restable-soak-'));
const port = 39300;
const child = spawn(process.execPath, ['dist/main.js'], {
  env: { PATH: process.env.PATH, DATABASE_PATH: join(dir, 'soak.db'), PORT: String(port), LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const url = `http://127.0.0.1:${port}`;
for (
  let i = 0;
  (await fetch(`${url}/readyz`).then(
    (r) => r.ok,
    () => false,
  )) === false;
  i++
) {
  if (i > 100) throw new Error('the service did not start');
  await new Promise((r) => setTimeout(r, 100));
}
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

let created = 0;
let n = 0;
const json = { 'content-type': 'application/json' };
const someId = () => 1 + Math.floor(Math.random() * Math.max(1, created));
const requests: autocannon.Request[] = [
  {
    setupRequest: (req) => ({
      ...req,
      method: 'POST',
      path: '/users',
      headers: json,
      body: JSON.stringify({ name: 'soak', email: `soak${++n}@example.com` }),
    }),
    onResponse: (status) => void (status === 201 && created++),
  },
  ...Array.from(
    { length: 6 },
    (): autocannon.Request => ({ setupRequest: (req) => ({ ...req, method: 'GET', path: `/users/${someId()}` }) }),
  ),
  { setupRequest: (req) => ({ ...req, method: 'GET', path: `/users?limit=50&sort=-id&count=true` }) },
  {
    setupRequest: (req) => ({
      ...req,
      method: 'PATCH',
      path: `/users/${someId()}`,
      headers: json,
      body: JSON.stringify({ name: `s${++n}` }),
    }),
  },
  { setupRequest: (req) => ({ ...req, method: 'GET', path: `/users/${someId()}/pets` }) },
];

const rows: { minute: number; rss: number; rps: number; p50: number; p99: number; failures: number }[] = [];
console.log(`soak: ${args.minutes} min in ${slices} slices of ${sliceSeconds} s; minute, RSS MB, req/s, p50 ms, p99 ms, failures`);
for (let i = 0; i < slices; i++) {
  const result = await autocannon({ url, connections: 10, duration: sliceSeconds, requests });
  const row = {
    minute: ((i + 1) * sliceSeconds) / 60,
    rss: rssMb(),
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: result.errors + result.timeouts + result.non2xx,
  };
  rows.push(row);
  console.log(
    `${row.minute.toFixed(1).padStart(5)}  ${row.rss.toFixed(1).padStart(6)}  ${Math.round(row.rps).toString().padStart(6)}  ${String(row.p50).padStart(4)}  ${String(row.p99).padStart(5)}  ${row.failures}`,
  );
}
await new Promise((resolve) => child.once('exit', resolve).kill('SIGTERM'));
rmSync(dir, { recursive: true, force: true });

// Least-squares slope of RSS over the second half (after warm-up), in MB per minute.
const tail = rows.slice(Math.floor(rows.length / 2));
const mx = tail.reduce((s, r) => s + r.minute, 0) / tail.length;
const my = tail.reduce((s, r) => s + r.rss, 0) / tail.length;
const slope =
  tail.reduce((s, r) => s + (r.minute - mx) * (r.rss - my), 0) /
  Math.max(
    1e-9,
    tail.reduce((s, r) => s + (r.minute - mx) ** 2, 0),
  );
const failures = rows.reduce((s, r) => s + r.failures, 0);
console.log(
  `\nsoak: ${created} elements created; RSS ${rows[0]?.rss.toFixed(1)} → ${rows.at(-1)?.rss.toFixed(1)} MB; second-half RSS slope ${slope.toFixed(2)} MB/min; ${failures} failed requests`,
);
process.exitCode = failures > 0 ? 1 : 0;

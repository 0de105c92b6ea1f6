// Long-run soak (`npm run soak -- --minutes N`; not part of CI): mixed load against the compiled
// service in slices, reporting RSS and latency over time, and whether RSS trends upwards.
// `--hostile` swaps the mix for abusive requests from many connections, to measure peak memory.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { START_ARGV } from './processes.js';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    slices: { type: 'string', default: '20' },
    hostile: { type: 'boolean', default: false },
    connections: { type: 'string' },
  },
});
const connections = Number(args.connections ?? (args.hostile ? 400 : 10));
const slices = Number(args.slices);
const sliceSeconds = Math.max(1, Math.round((Number(args.minutes) * 60) / slices));
const dir = mkdtempSync(join(tmpdir(), 'restable-soak-'));
const port = 39300;
const child = spawn(process.execPath, START_ARGV, {
  env: { ...process.env, DATABASE_PATH: join(dir, 'soak.db'), PORT: String(port), LOG_LEVEL: 'silent' },
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
const statusMb = (field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const rssMb = () => statusMb('VmRSS');

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

/** Abuse that is cheap to send: ~1 MB bodies of unknown keys, deep nesting, a thousand filters, wrong types. */
const manyKeys = JSON.stringify(Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i])));
const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
const filters = Array.from({ length: 1200 }, (_, i) => `id[ne]=${i}`).join('&');
const hostile: autocannon.Request[] = [
  { method: 'POST', path: '/users', headers: json, body: manyKeys },
  { method: 'PATCH', path: '/users/1', headers: json, body: manyKeys },
  { method: 'POST', path: '/users', headers: json, body: deep },
  { method: 'PUT', path: '/users/1', headers: json, body: `{"name":${deep}}` },
  { method: 'GET', path: `/users?${filters}` },
  { method: 'POST', path: '/users', headers: json, body: JSON.stringify({ name: 'x'.repeat(900_000), email: 7 }) },
  ...requests,
];

const rows: { minute: number; rss: number; rps: number; p50: number; p99: number; failures: number }[] = [];
/** Connections the server closed on a client still sending (expected after a 413 or a shed 503), and requests that timed out. */
const dropped = { errors: 0, timeouts: 0 };
console.log(
  `soak${args.hostile ? ' (hostile)' : ''}: ${args.minutes} min in ${slices} slices of ${sliceSeconds} s, ${connections} connections; minute, RSS MB, req/s, p50 ms, p99 ms, failures`,
);
const shed = { 503: 0, total: 0 };
for (let i = 0; i < slices; i++) {
  const result = await autocannon({ url, connections, duration: sliceSeconds, requests: args.hostile ? hostile : requests });
  const codes = (result as unknown as { statusCodeStats: Record<string, { count: number }> }).statusCodeStats;
  const fiveHundreds = Object.entries(codes)
    .filter(([code]) => code.startsWith('5') && code !== '503')
    .reduce((sum, [, { count }]) => sum + count, 0);
  shed[503] += codes['503']?.count ?? 0;
  dropped.errors += result.errors;
  dropped.timeouts += result.timeouts;
  shed.total += Object.values(codes).reduce((sum, { count }) => sum + count, 0);
  const row = {
    minute: ((i + 1) * sliceSeconds) / 60,
    rss: rssMb(),
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    // Hostile requests are meant to fail with a 4xx (or be shed with 503): a 5xx or a timeout is a failure, and a
    // connection closed on a client still sending its body is expected (after a 413 or a 503; counted apart below).
    failures: args.hostile ? fiveHundreds + result.timeouts : result.errors + result.timeouts + result.non2xx,
  };
  rows.push(row);
  console.log(
    `${row.minute.toFixed(1).padStart(5)}  ${row.rss.toFixed(1).padStart(6)}  ${Math.round(row.rps).toString().padStart(6)}  ${String(row.p50).padStart(4)}  ${String(row.p99).padStart(5)}  ${row.failures}`,
  );
}
const peak = statusMb('VmHWM');
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
  `\nsoak: ${created} elements created; RSS ${rows[0]?.rss.toFixed(1)} → ${rows.at(-1)?.rss.toFixed(1)} MB, peak ${peak.toFixed(1)} MB; ` +
    `second-half RSS slope ${slope.toFixed(2)} MB/min; ${failures} failed requests; ${shed[503]} of ${shed.total} shed with 503` +
    (args.hostile ? `; ${dropped.errors} connections closed mid-upload, ${dropped.timeouts} timeouts` : ''),
);
process.exitCode = failures > 0 ? 1 : 0;

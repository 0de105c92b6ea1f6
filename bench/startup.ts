// Start-up with many tables (issue 14): for each table count, an install of the compiled service whose
// schema has that many tables (bench/tables.ts), started on a new file; time to /readyz, /openapi.json, /docs.
// Usage: npm run build && npx tsx bench/startup.ts [--tables 3,300,1000] [--runs 2]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { makeWideInstall } from './tables.js';

const { values: args } = parseArgs({
  options: { tables: { type: 'string', default: '3,300,1000' }, runs: { type: 'string', default: '2' } },
});
const ROOT = resolve(import.meta.dirname, '..');

async function until<T>(attempt: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}

console.log('| tables | run | start to /readyz 200 (ms) | /openapi.json (ms, MB) | /docs (ms) |');
console.log('|---:|---:|---:|---:|---:|');
for (const total of (args.tables as string).split(',').map(Number)) {
  // 3 is the shipped schema itself; more are generated next to it.
  const install = total === 3 ? { dir: ROOT, remove: () => {} } : await makeWideInstall(ROOT, total);
  const dir = mkdtempSync(join(tmpdir(), 'restable-startup-'));
  try {
    for (let run = 0; run < Number(args.runs); run++) {
      const port = 39_000 + (total % 1000) + run;
      const started = performance.now();
      const child = spawn(process.execPath, ['dist/main.js'], {
        cwd: install.dir,
        env: { ...process.env, PORT: String(port), DATABASE_PATH: join(dir, `app-${run}.db`), LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      });
      const base = `http://127.0.0.1:${port}`;
      const ready = await until(async () => ((await fetch(`${base}/readyz`)).status === 200 ? performance.now() - started : undefined));
      let at = performance.now();
      const doc = await (await fetch(`${base}/openapi.json`)).text();
      const openapi = performance.now() - at;
      at = performance.now();
      const docs = await fetch(`${base}/docs`);
      if (docs.status !== 200) throw new Error(`/docs answered ${docs.status}`);
      await docs.text();
      const page = performance.now() - at;
      console.log(
        `| ${total} | ${run + 1} | ${ready.toFixed(0)} | ${openapi.toFixed(0)}, ${(doc.length / 1e6).toFixed(1)} | ${page.toFixed(0)} |`,
      );
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  } finally {
    install.remove();
    rmSync(dir, { recursive: true, force: true });
  }
}

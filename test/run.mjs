// Runs the uvu suites in test/ (TypeScript through tsx) and ends the output with one summary
// line of passed and failed counts, which CI reads; the exit code is uvu's.
// `node test/run.mjs` runs *.test.ts; `browser` runs *.browser.ts (needs Chromium); `faults` runs
// *.faults.ts (needs root: it mounts a small tmpfs).
import { spawn } from 'node:child_process';
import { stripVTControlCharacters } from 'node:util';

const pattern = { browser: '\\.browser\\.ts$', faults: '\\.faults\\.ts$' }[process.argv[2] ?? ''] ?? '\\.test\\.ts$';
const uvu = spawn(process.execPath, ['--import', 'tsx', 'node_modules/uvu/bin.js', 'test', pattern], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let output = '';
uvu.stdout.on('data', (chunk) => {
  output += chunk;
  process.stdout.write(chunk);
});
uvu.on('exit', (code) => {
  const plain = stripVTControlCharacters(output);
  const count = (label) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? 0);
  const [total, passed, skipped] = [count('Total'), count('Passed'), count('Skipped')];
  const failed = total - passed - skipped;
  console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped (${total} total)`);
  process.exit(code || (failed > 0 || total === 0 ? 1 : 0));
});

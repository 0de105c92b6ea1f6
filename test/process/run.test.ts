// The test runner itself (test/run.mjs) over the fixtures in test/run-fixtures/: a run always ends
// with its summary line and the right exit code, even when a test hangs or leaves a service running.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ROOT, tempDir } from '../support/helpers.js';

interface Run {
  code: number | null;
  output: string;
  /** Whether the run ended on its own within the bound (a hanging runner is killed and fails here). */
  ended: boolean;
}

/** Runs `node test/run.mjs` over one fixture, killed (with everything it started) after 90 s. */
function runFixture(fixture: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, ['test/run.mjs', '--dir', 'test/run-fixtures', '--pattern', `^${fixture}\\.ts$`, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, so a runner that hangs can be killed with all it started
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  let ended = true;
  const bound = setTimeout(() => {
    ended = false;
    process.kill(-(child.pid as number), 'SIGKILL');
  }, 90_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(bound);
      resolve({ code, output, ended });
    }),
  );
}

/** Whether a process still runs (a zombie awaiting its reaper does not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = `/proc/${pid}/stat`;
  return !existsSync(stat) || !/^\d+ \(.*\) Z/.test(readFileSync(stat, 'utf8'));
}

const lastLine = (output: string) => output.trim().split('\n').at(-1);

const test = suite<{ runs: Record<string, Run>; pid: number }>('test runner');

test.before(async (ctx) => {
  const temp = tempDir();
  const pidFile = join(temp.dir, 'pid');
  try {
    const [leaves, hangs, passes, fails] = await Promise.all([
      runFixture('leaves-a-service', ['--grace-ms', '1000'], { RUN_FIXTURE_PID_FILE: pidFile }),
      runFixture('never-ends', ['--timeout-ms', '8000']),
      runFixture('passes', []),
      runFixture('fails', []),
    ]);
    ctx.runs = { leaves, hangs, passes, fails };
    ctx.pid = Number(readFileSync(pidFile, 'utf8'));
  } finally {
    temp.remove();
  }
});

test('a failing test that leaves a spawned service running still ends the run, with no process left', ({ runs, pid }) => {
  const { code, output, ended } = runs.leaves as Run;
  assert.ok(ended, `the run did not end:\n${output}`);
  assert.is(lastLine(output), 'tests: 0 passed, 1 failed, 0 skipped (1 total)');
  assert.is(code, 1);
  assert.match(output, /still running .* later/);
  assert.ok(pid > 0 && !alive(pid), `the spawned service (pid ${pid}) is still running`);
});

test('a test that never ends is stopped by the overall bound; the summary counts it as failed', ({ runs }) => {
  const { code, output, ended } = runs.hangs as Run;
  assert.ok(ended, `the run did not end:\n${output}`);
  assert.is(lastLine(output), 'tests: 1 passed, 1 failed, 0 skipped (2 total)');
  assert.is(code, 1);
  assert.match(output, /longer than 8 s: a test did not finish/);
});

test('a run where everything passes ends by itself with exit code 0', ({ runs }) => {
  const { code, output, ended } = runs.passes as Run;
  assert.ok(ended, `the run did not end:\n${output}`);
  assert.is(lastLine(output), 'tests: 1 passed, 0 failed, 0 skipped (1 total)');
  assert.is(code, 0, output);
  assert.not.match(output, /run\.mjs:/);
});

test('a failure is named again just above the summary, so a log cut to its tail still shows it', ({ runs }) => {
  const { code, output, ended } = runs.fails as Run;
  assert.ok(ended, `the run did not end:\n${output}`);
  const tail = stripVTControlCharacters(output).trim().split('\n').slice(-3);
  assert.equal(tail, [
    '  fails.ts: a failing test  "fails": one and one make two  (is)',
    '',
    'tests: 1 passed, 1 failed, 0 skipped (2 total)',
  ]);
  assert.is(code, 1);
});

test.run();

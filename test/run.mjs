// Runs the uvu suites in test/ (TypeScript through tsx) and always ends the output with one summary
// line of passed and failed counts, which CI reads, even when a test hangs or leaves a process behind.
// `node test/run.mjs` runs *.test.ts; `browser` runs *.browser.ts (needs Chromium); `faults` runs
// *.faults.ts (needs root: it mounts a small tmpfs); `pg` runs the shared suites and *.pg.ts on PostgreSQL
// (TEST_DATABASE_URL's server, else a throwaway one from test/support/pg-cluster.mjs, stopped at the end). Options:
// --dir, --pattern (another folder or file regex), --timeout-ms (the whole run; default 30 min),
// --grace-ms (after uvu's summary; default 15 s).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, stripVTControlCharacters } from 'node:util';
import { startCluster, stopCluster } from './support/pg-cluster.mjs';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    dir: { type: 'string', default: 'test' },
    pattern: { type: 'string' },
    'timeout-ms': { type: 'string', default: String(30 * 60_000) },
    'grace-ms': { type: 'string', default: '15000' },
  },
});
/** The suites that run on either engine (startService follows TEST_BACKEND), and every PostgreSQL-only *.pg.ts. */
const SHARED =
  '^http/(contract|collections|safe-clients|hostile|openapi|openapi-clients|openapi-session|shaping|search|bulk|batch|changes|protocol)\\.test\\.ts$|\\.pg\\.ts$';
const mode = positionals[0] ?? '';
const pattern = values.pattern ?? { browser: '\\.browser\\.ts$', faults: '\\.faults\\.ts$', pg: SHARED }[mode] ?? '\\.test\\.ts$';

/** Prints the summary line CI reads for a run that could not start, and exits. */
function abort(message) {
  process.stderr.write(`run.mjs: ${message}\n`);
  console.log('\ntests: 0 passed, 1 failed, 0 skipped (1 total)');
  process.exit(1);
}

const env = { ...process.env };
/** Stops the PostgreSQL server this run started, if it did (never one it was given). */
let stopServer = () => {};
if (mode === 'pg') {
  env.TEST_BACKEND = 'postgres';
  if (!env.TEST_DATABASE_URL) {
    const stateDir = mkdtempSync(join(tmpdir(), 'restable-run-'));
    const stateFile = join(stateDir, 'cluster.json');
    try {
      env.TEST_DATABASE_URL = (await startCluster({ stateFile })).url;
    } catch (error) {
      rmSync(stateDir, { recursive: true, force: true });
      abort(`cannot start a PostgreSQL server for the tests: ${error.message}`);
    }
    process.stderr.write(`run.mjs: started a PostgreSQL server for the tests at ${env.TEST_DATABASE_URL}\n`);
    stopServer = () => {
      stopServer = () => {};
      try {
        stopCluster({ stateFile });
      } catch (error) {
        process.stderr.write(`run.mjs: could not stop the test PostgreSQL server: ${error.message}\n`);
      }
      rmSync(stateDir, { recursive: true, force: true });
    };
    // Also when this script itself fails: the server must not outlive the run (the calls are synchronous).
    process.on('exit', () => stopServer());
  }
}

// Its own process group, so the watchdog can stop uvu and every service a test spawned in one signal.
const uvu = spawn(process.execPath, ['--import', 'tsx', 'node_modules/uvu/bin.js', values.dir, pattern], {
  stdio: ['ignore', 'pipe', 'inherit'],
  detached: true,
  env,
});
let output = '';
/** Why the watchdog stopped the run, if it did. */
let stopped;

/** Signals uvu's process group: SIGTERM first (services stop cleanly), SIGKILL for what is left. */
function stopGroup(reason) {
  if (stopped) return;
  stopped = reason;
  process.stderr.write(`\nrun.mjs: ${reason}; stopping the test processes\n`);
  signalGroup('SIGTERM');
  setTimeout(() => signalGroup('SIGKILL'), 5000).unref();
}

function signalGroup(signal) {
  try {
    process.kill(-uvu.pid, signal);
    return true;
  } catch {
    return false; // ESRCH: nothing left in the group
  }
}

const timeoutMs = Number(values['timeout-ms']);
const overall = setTimeout(() => stopGroup(`the run took longer than ${timeoutMs / 1000} s: a test did not finish`), timeoutMs);
let grace;
uvu.stdout.on('data', (chunk) => {
  output += chunk;
  process.stdout.write(chunk);
  // uvu prints its totals when every suite has run; a test process that lives on holds something open.
  if (!grace && /Duration:/.test(stripVTControlCharacters(output))) {
    const graceMs = Number(values['grace-ms']);
    grace = setTimeout(
      () => stopGroup(`the tests ended but their process was still running ${graceMs / 1000} s later (a process or server left open)`),
      graceMs,
    );
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => stopGroup(`received ${signal}`));
}

uvu.on('exit', async (code) => {
  clearTimeout(overall);
  clearTimeout(grace);
  // Kill whatever uvu left behind and wait (briefly: a zombie never leaves) until it is gone.
  for (let waited = 0; signalGroup('SIGKILL') && waited < 2000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  const plain = stripVTControlCharacters(output);
  const count = (label) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? 0);
  let [total, passed, skipped] = [count('Total'), count('Passed'), count('Skipped')];
  if (!/Total:/.test(plain)) {
    // No totals: add up the suites that finished, `(passed / run)` each; of the unfinished suite, the
    // marks on its last line (• passed, ✘ failed) and the test that never ended, as a failure.
    for (const [, done, run] of plain.matchAll(/\((\d+) \/ (\d+)\)\n/g)) {
      passed += Number(done);
      total += Number(run);
    }
    const unfinished = plain.slice(plain.lastIndexOf('\n') + 1);
    const marks = (mark) => unfinished.split(mark).length - 1;
    passed += marks('•');
    total += marks('•') + marks('✘') + 1;
  }
  // uvu's Total counts the tests it ran: a skipped test is in Skipped only.
  const failed = total - passed;
  stopServer();
  const recap = failures(plain);
  if (recap.length > 0) console.log(`\nfailed (repeated from above, where the details are):\n${recap.join('\n')}`);
  console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped (${total + skipped} total)`);
  process.exit(stopped || failed > 0 || total === 0 ? 1 : code || 0);
});

/**
 * Each failure uvu reported, one line apiece: its file, suite and test, and the first line of its message.
 * Repeated just above the summary so that a log cut to its tail (CI keeps the end) still names them.
 */
function failures(plain) {
  const lines = [];
  let file = '';
  const text = plain.split('\n');
  text.forEach((line, i) => {
    if (/^\S+\.[cm]?[jt]s$/.test(line)) file = line; // uvu names each file on a line of its own
    const fail = /^\s+FAIL\s+(.*)$/.exec(line);
    if (fail) lines.push(`  ${file ? `${file}: ` : ''}${fail[1]}: ${text[i + 1]?.trim() ?? ''}`);
  });
  return lines;
}

// Counts the instructions one server spends per GET (a random element by default), with valgrind's
// callgrind: counts, not seconds, repeatable to ~1 % for one build on a VM whose timings swing ±20 %.
// Usage: npm run build && tsx bench/instructions.ts [--path '/users/{id}'] [--main bench/floor.mjs] [--warm 60] [--count 20] [--keep]
// (needs valgrind and Debian's wrk; LOG_LEVEL and FLOOR_CONTRACT pass through to the server)
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, GENERATOR_CORE, pinned, SERVER_CORE, START_ARGV, waitUntilServing } from './processes.js';
import { insertRows, migrate } from './rows.js';

const { values: args } = parseArgs({
  options: {
    path: { type: 'string', default: '/users/{id}' },
    main: { type: 'string' },
    rows: { type: 'string', default: '10000' },
    warm: { type: 'string', default: '60' },
    count: { type: 'string', default: '20' },
    keep: { type: 'boolean', default: false },
  },
});
const rows = Number(args.rows);
const dir = mkdtempSync(join(tmpdir(), 'restable-instructions-'));
const file = join(dir, 'app.db');
migrate('.', file);
insertRows(file, rows, new Date().toISOString());
// `{id}` is a random key of the rows, drawn by wrk for each request.
writeFileSync(
  join(dir, 'random.lua'),
  `request = function()\n  return wrk.format("GET", (wrk.path:gsub("{id}", math.random(1, ${rows}))))\nend\n`,
);

// npm start's node arguments, under valgrind; --main swaps the entry point (the floor, say).
const node = args.main ? [...START_ARGV.slice(0, -1), args.main] : START_ARGV;
const valgrind = ['valgrind', '--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${join(dir, 'callgrind.out')}`];
const [command, ...rest] = pinned(SERVER_CORE, [...valgrind, process.execPath, ...node]);
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const server = spawn(command as string, rest, {
  env: { PATH: process.env.PATH, DATABASE_PATH: file, PORT: String(port), ...pick('LOG_LEVEL', 'FLOOR_CONTRACT') },
  stdio: ['ignore', 'ignore', 'ignore'],
});
const wrk = (seconds: string) => {
  const [bin, ...wrkArgs] = pinned(GENERATOR_CORE, ['wrk', '-t1', '-c32', `-d${seconds}s`, '-s', join(dir, 'random.lua'), url + args.path]);
  return execFileSync(bin as string, wrkArgs, { encoding: 'utf8' });
};
try {
  await waitUntilServing(url, server, 300);
  wrk(args.warm as string);
  execFileSync('callgrind_control', ['-z', String(server.pid)], { stdio: 'ignore' });
  const requests = Number(/(\d+) requests in/.exec(wrk(args.count as string))?.[1]);
  execFileSync('callgrind_control', ['-d', String(server.pid)], { stdio: 'ignore' });
  await new Promise((resolve) => setTimeout(resolve, 2000));
  // The main thread's dump is the largest (one file per thread).
  const dumps = readdirSync(dir).filter((name) => name.startsWith('callgrind.out') && statSync(join(dir, name)).size > 0);
  const totalOf = (name: string) => Number(/^totals: (\d+)/m.exec(readFileSync(join(dir, name), 'utf8'))?.[1] ?? 0);
  const main = dumps.sort((a, b) => totalOf(b) - totalOf(a))[0] as string;
  const annotated = execFileSync('callgrind_annotate', ['--threshold=100', '--auto=no', join(dir, main)], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  // V8's optimizing compiler at work in the counted window: under valgrind the clock runs ~50× slower,
  // so code called per unit of time (timers, log flushes) is still compiled late. Leave it out to compare.
  let compiler = 0;
  for (const line of annotated.split('\n')) {
    const match = /^\s*([\d,]+) \(.*compiler::/.exec(line);
    if (match) compiler += Number((match[1] as string).replaceAll(',', ''));
  }
  const per = (n: number) => Math.round(n / requests).toLocaleString('en-US');
  console.log(
    `${args.main ?? 'restable'} GET ${args.path}: ${requests} requests counted; main thread ${per(totalOf(main))} instructions a request, ` +
      `${per(compiler)} of them V8's optimizing compiler`,
  );
} finally {
  if (server.exitCode === null && server.signalCode === null) {
    server.kill();
    await new Promise((resolve) => server.once('exit', resolve));
  }
  if (args.keep) console.log(`profile kept in ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}

/** The variables of `names` this process has, for the server. */
function pick(...names: string[]): Record<string, string> {
  return Object.fromEntries(names.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name] as string]])));
}

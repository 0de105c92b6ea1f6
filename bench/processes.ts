// What the harnesses share about the servers they start: a free port to give each one, the cores to
// pin them and their load generator to, the wait until one serves and its stop (bench/run.ts, feed.ts, startup.ts, soak.ts, service.ts).
import { type ChildProcess, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { cpus } from 'node:os';

/**
 * node's arguments as `npm start` gives them (its V8 flags, then dist/main.js): every harness starts
 * the service the way users do, so what it measures is the default configuration.
 */
export const START_ARGV = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start as string)
  .replace(/^exec\s+/, '') // the shell hands its process to node, which so gets npm's signals
  .split(/\s+/)
  .slice(1);

/** Whether processes can be pinned to a core here: taskset is installed and there is more than one core. */
export const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return cpus().length > 1;
  } catch {
    return false;
  }
})();
/** Single-process servers run on core 1 and the load generator on core 0, so neither takes the other's CPU. */
export const SERVER_CORE = hasTaskset ? 1 : undefined;
export const GENERATOR_CORE = hasTaskset ? 0 : undefined;

/** `command` run on `core` with taskset, or as it is when there is no core to pin to (undefined). */
export const pinned = (core: number | undefined, command: string[]): string[] =>
  core === undefined ? command : ['taskset', '-c', String(core), ...command];

/**
 * A port nobody listens on right now, picked by the OS: others may run servers (or this harness) on
 * the same machine, and a fixed port could make us load their server, or fail with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Waits until the server `child` started answers GET /users/1 at `url`: 30 s by default (hundreds of
 * tables compile at start-up), more for a server under valgrind.
 */
export async function waitUntilServing(url: string, child: ChildProcess, seconds = 30): Promise<void> {
  for (let i = 0; i < seconds * 20; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: the server exited with ${child.exitCode} before serving`);
    try {
      if ((await fetch(`${url}/users/1`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not start`);
}

/** SIGTERM (the service checkpoints, closes its streams and its database), SIGKILL after 15 s. */
export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await exited;
  }
}

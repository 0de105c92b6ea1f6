// A throwaway PostgreSQL server for the tests, from Debian's binaries (`apt-get install postgresql`):
// `start` makes and starts one in a temp folder and prints its admin URL, `env` prints it, `stop` removes it.

/*
 * node test/support/pg-cluster.mjs start|env|stop [--state FILE]; FILE (restable-pg-cluster.json in the temp
 * folder by default) records the running cluster. It listens on 127.0.0.1, a free port, with trust
 * authentication (tests only: anyone on this machine may connect as postgres). As root, initdb and the
 * server run as the `postgres` user: PostgreSQL refuses to run as root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export const DEFAULT_STATE = join(tmpdir(), 'restable-pg-cluster.json');

/**
 * Settings of a test server: enough connections for the scale-out tests (several instances, each
 * with a pool); fsync and synchronous commit stay on, because tests check that acknowledged writes
 * survive a crash; small shared memory, so that it starts anywhere.
 */
const SETTINGS = {
  max_connections: '300',
  shared_buffers: "'32MB'",
  fsync: 'on',
  synchronous_commit: 'on',
  full_page_writes: 'on',
  listen_addresses: "'127.0.0.1'",
  log_destination: "'stderr'",
  log_min_messages: 'warning',
  log_connections: 'off',
};

/** The bin folder of the newest PostgreSQL installed under /usr/lib/postgresql (Debian's layout). */
export function findBinaries(root = '/usr/lib/postgresql') {
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions.length) {
    throw new Error(`no PostgreSQL server binaries under ${root}/*/bin: install them (Debian/Ubuntu: apt-get install postgresql)`);
  }
  return join(root, versions[0], 'bin');
}

const isRoot = process.getuid?.() === 0;

/** Runs a PostgreSQL program, as the postgres user when this process is root; throws with its output. */
function run(program, args) {
  const [command, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
  const result = spawnSync(command, argv, { encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    const error = new Error(
      `${program.split('/').pop()} ${args.join(' ')} exited with ${result.status}:\n${result.stdout}${result.stderr}`,
    );
    error.output = result.stdout + result.stderr;
    throw error;
  }
  return result.stdout;
}

/** A TCP port free on 127.0.0.1 right now (the kernel picks it; the server takes it a moment later). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function readState(stateFile) {
  if (!existsSync(stateFile)) return undefined;
  return JSON.parse(readFileSync(stateFile, 'utf8'));
}

/** Whether the cluster a state file describes still runs (pg_ctl status exits 0). */
function running(state) {
  try {
    run(join(state.bin, 'pg_ctl'), ['status', '-D', state.data]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes a cluster in a new temp folder and starts it; resolves with its state ({ url, dir, data,
 * port, bin }), also written to `stateFile`. A cluster already recorded there and running is reused.
 */
export async function startCluster({ stateFile = DEFAULT_STATE } = {}) {
  const existing = readState(stateFile);
  if (existing && running(existing)) return existing;
  const bin = findBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'restable-pg-'));
  const data = join(dir, 'data');
  const sockets = join(dir, 'sockets');
  mkdirSync(sockets);
  try {
    if (isRoot) {
      let ids;
      try {
        ids = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: 'pipe' })));
      } catch {
        throw new Error('as root, PostgreSQL runs as the `postgres` user, which does not exist (apt-get install postgresql creates it)');
      }
      for (const path of [dir, sockets]) chownSync(path, ids[0], ids[1]);
    }
    const initdb = ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'];
    try {
      run(join(bin, 'initdb'), [...initdb, '--locale=C.UTF-8']);
    } catch {
      // An older system without the C.UTF-8 locale: C orders the same (by code point).
      rmSync(data, { recursive: true, force: true });
      run(join(bin, 'initdb'), [...initdb, '--locale=C']);
    }
    const settings = { ...SETTINGS, unix_socket_directories: `'${sockets}'` };
    // Another process may take the port between the check and the start: try a few.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const conf = Object.entries({ ...settings, port: String(port) }).map(([key, value]) => `${key} = ${value}`);
      appendFileSync(join(data, 'postgresql.conf'), `\n# test/support/pg-cluster.mjs\n${conf.join('\n')}\n`);
      try {
        run(join(bin, 'pg_ctl'), ['start', '-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60']);
      } catch (error) {
        if (attempt < 3 && /could not bind|address already in use/i.test(readLog(dir))) continue;
        throw new Error(`${error.message}\n${readLog(dir)}`);
      }
      // pg_ctl -w returns once the server accepts connections; confirm it does so over TCP.
      run(join(bin, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-t', '30']);
      const state = { url: `postgres://postgres@127.0.0.1:${port}/postgres`, dir, data, port, bin };
      writeFileSync(stateFile, `${JSON.stringify(state, null, 2)}\n`);
      return state;
    }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

function readLog(dir) {
  try {
    return readFileSync(join(dir, 'server.log'), 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}

/** Stops the cluster recorded in `stateFile` (fast: open sessions are ended) and deletes its folder. */
export function stopCluster({ stateFile = DEFAULT_STATE } = {}) {
  const state = readState(stateFile);
  if (!state) return false;
  if (running(state)) {
    try {
      run(join(state.bin, 'pg_ctl'), ['stop', '-D', state.data, '-m', 'fast', '-w', '-t', '60']);
    } catch {
      run(join(state.bin, 'pg_ctl'), ['stop', '-D', state.data, '-m', 'immediate', '-w']);
    }
  }
  rmSync(state.dir, { recursive: true, force: true });
  rmSync(stateFile, { force: true });
  return true;
}

async function main() {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { state: { type: 'string', default: DEFAULT_STATE } } });
  const stateFile = values.state;
  switch (positionals[0]) {
    case 'start': {
      const state = await startCluster({ stateFile });
      console.log(state.url);
      break;
    }
    case 'env': {
      const state = readState(stateFile);
      if (!state || !running(state))
        throw new Error(`no test cluster is running (state file ${stateFile}): run \`node test/support/pg-cluster.mjs start\``);
      console.log(`TEST_DATABASE_URL=${state.url}`);
      break;
    }
    case 'stop':
      if (!stopCluster({ stateFile })) console.error(`no test cluster recorded in ${stateFile}; nothing to stop`);
      break;
    default:
      throw new Error('usage: node test/support/pg-cluster.mjs start|stop|env [--state FILE]');
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error) => {
    console.error(`pg-cluster: ${error.message}`);
    process.exit(1);
  });
}

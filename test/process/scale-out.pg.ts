// Scale-out: three instances of the compiled service on one PostgreSQL database behind haproxy
// (round-robin, health checks on /readyz); races across instances, kill -9 and a PostgreSQL restart under load.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createPgDatabase,
  PET_SHOP_PG_MIGRATIONS,
  type Process,
  type Reply,
  request,
  spawnService,
  tempDir,
  withTempDir,
} from '../support/helpers.js';

if (!process.env.TEST_DATABASE_URL)
  throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL)');

const HAPROXY = ['/usr/sbin/haproxy', '/usr/local/sbin/haproxy', '/usr/bin/haproxy'].find((path) => existsSync(path));
if (!HAPROXY) throw new Error('haproxy is not installed: the scale-out test needs it (Debian: apt-get install haproxy)');

const INSTANCES = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it holds (every 100 ms, at most `tries` times): waits for a condition, asserts no duration. */
async function until(what: string, check: () => Promise<boolean> | boolean, tries = 600): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** A reply, or 'network' when the connection failed (a killed instance's requests, seen through the balancer). */
async function attempt(base: string, method: string, path: string, options?: Parameters<typeof request>[3]): Promise<Reply | 'network'> {
  try {
    return await request(base, method, path, options);
  } catch {
    return 'network';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

interface Fleet {
  /** The balancer's URL. */
  url: string;
  instances: Process[];
  stop: () => Promise<void>;
}

/**
 * Starts three instances on `databaseUrl` at once (they race to migrate) and haproxy in front of them:
 * round-robin, health checks on /readyz, X-Served-By naming the instance that answered.
 */
async function startFleet(databaseUrl: string, dir: string): Promise<Fleet> {
  const env = { DATABASE_URL: databaseUrl, PG_CONNECT_TIMEOUT_MS: '2000' };
  const started = await Promise.allSettled(Array.from({ length: INSTANCES }, () => spawnService(env)));
  const instances = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) {
    await Promise.all(instances.map((instance) => instance.stop()));
    throw failed.reason;
  }
  const port = await freePort();
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(
    config,
    [
      'global',
      '  maxconn 2000',
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout client 30s',
      '  timeout server 30s',
      '  timeout http-keep-alive 5s',
      // A connection refused by a dead instance is retried on another one.
      '  retries 3',
      '  option redispatch',
      'frontend restable',
      `  bind 127.0.0.1:${port}`,
      '  default_backend instances',
      'backend instances',
      '  balance roundrobin',
      '  option httpchk',
      '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost',
      '  http-check expect status 200',
      '  http-response set-header X-Served-By %[srv_name]',
      '  default-server check inter 200ms fall 2 rise 2',
      ...instances.map((instance, i) => `  server s${i + 1} ${new URL(instance.url).host}`),
      '',
    ].join('\n'),
  );
  const haproxy = spawn(HAPROXY as string, ['-f', config, '-db'], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(haproxy);
  let output = '';
  haproxy.stdout.on('data', (chunk) => (output += chunk));
  haproxy.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => haproxy.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    haproxy.kill('SIGTERM');
    await exited;
    children.delete(haproxy);
    await Promise.all(instances.map((instance) => instance.stop()));
  };
  try {
    await until('haproxy to serve', async () => {
      if (haproxy.exitCode !== null) throw new Error(`haproxy exited with ${haproxy.exitCode}:\n${output}`);
      const reply = await attempt(url, 'GET', '/readyz');
      return reply !== 'network' && reply.status === 200;
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, instances, stop };
}

interface Acknowledged {
  name: string;
  etag: string | null;
}

/** Writers POSTing pets through `base` until stopped; every 201 is recorded, every other answer counted by status. */
function startLoad(base: string, label: string, writers = 8) {
  const acked = new Map<number, Acknowledged>();
  const statuses = new Map<number | 'network', number>();
  let running = true;
  let sent = 0;
  const writer = async (w: number) => {
    while (running) {
      const name = `${label}-${w}-${sent++}`;
      const reply = await attempt(base, 'POST', '/pets', { body: { name, species: 'cat' } });
      const status = reply === 'network' ? 'network' : reply.status;
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (reply !== 'network' && reply.status === 201) {
        assert.is(reply.body.name, name);
        acked.set(reply.body.id, { name, etag: reply.headers.get('etag') });
      } else {
        await sleep(20); // no busy loop while the service refuses
      }
    }
  };
  const done = Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  return {
    acked,
    statuses,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

/** Every element of a collection, page by page through one instance. */
async function listAll(base: string, path: string): Promise<Map<number, Record<string, unknown>>> {
  const rows = new Map<number, Record<string, unknown>>();
  let next: string | undefined = `${path}?limit=1000`;
  while (next) {
    const reply = await request(base, 'GET', next);
    assert.is(reply.status, 200, `GET ${next}`);
    for (const row of reply.body as Record<string, unknown>[]) rows.set(row.id as number, row);
    next = /^<([^>]+)>; rel="next"$/.exec(reply.headers.get('link') ?? '')?.[1];
  }
  return rows;
}

/** Every acknowledged write is stored as acknowledged (read through `base`, an instance directly). */
async function assertAllStored(base: string, acked: Map<number, Acknowledged>): Promise<void> {
  const stored = await listAll(base, '/pets');
  const missing = [...acked].filter(([id, { name }]) => stored.get(id)?.name !== name);
  assert.equal(missing, [], 'acknowledged writes missing');
  for (const [id, { etag }] of acked) {
    const reply = await request(base, 'GET', `/pets/${id}`);
    assert.is(reply.headers.get('etag'), etag, `ETag of /pets/${id}`);
  }
}

const unexpected = (statuses: Map<number | 'network', number>, allowed: (number | 'network')[]) =>
  Object.fromEntries([...statuses].filter(([status]) => !allowed.includes(status)));

// --- three instances on the test server's database ------------------------------------------------

const Fleet = suite<{ fleet?: Fleet; temp?: ReturnType<typeof tempDir>; drop?: () => Promise<void>; databaseUrl?: string }>(
  'scale-out: three instances behind haproxy',
);

Fleet.before(async (context) => {
  context.temp = tempDir();
  const database = await createPgDatabase();
  context.drop = database.drop;
  context.databaseUrl = database.url;
  context.fleet = await startFleet(database.url, context.temp.dir);
});

Fleet.after(async (context) => {
  await context.fleet?.stop();
  await context.drop?.();
  context.temp?.remove();
});

Fleet('three instances starting at once migrate the database once', async ({ databaseUrl }) => {
  const journal = JSON.parse(readFileSync(join(PET_SHOP_PG_MIGRATIONS, 'meta', '_journal.json'), 'utf8')).entries;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations');
    assert.is(rows[0].n, journal.length);
  } finally {
    await client.end();
  }
});

Fleet('writes go through every instance, and each element reads back the same through each instance', async ({ fleet }) => {
  const { url, instances } = fleet as Fleet;
  const servedBy = new Set<string>();
  const created: Reply[] = [];
  for (let i = 0; i < 12; i++) {
    const reply = await request(url, 'POST', '/users', { body: { name: `Spread ${i}`, email: `spread${i}@example.com` } });
    assert.is(reply.status, 201);
    servedBy.add(reply.headers.get('x-served-by') ?? '');
    created.push(reply);
  }
  assert.equal([...servedBy].sort(), ['s1', 's2', 's3'], 'round-robin reached every instance');
  for (const reply of created) {
    for (const instance of instances) {
      const read = await request(instance.url, 'GET', reply.headers.get('location') as string);
      assert.is(read.status, 200);
      assert.is(read.text, reply.text);
      assert.is(read.headers.get('etag'), reply.headers.get('etag'));
    }
  }
});

Fleet('concurrent If-Match PATCHes of one element through different instances: exactly one 200, the rest 412', async ({ fleet }) => {
  const { instances } = fleet as Fleet;
  for (let round = 0; round < 5; round++) {
    const created = await request(instances[0]?.url as string, 'POST', '/pets', { body: { name: `Raced ${round}`, species: 'dog' } });
    assert.is(created.status, 201);
    const path = created.headers.get('location') as string;
    const etag = created.headers.get('etag') as string;
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        request(instances[i % INSTANCES]?.url as string, 'PATCH', path, { body: { name: `Winner ${i}` }, headers: { 'if-match': etag } }),
      ),
    );
    const statuses = replies.map((reply) => reply.status).sort();
    assert.equal(statuses, [200, ...Array(11).fill(412)], `round ${round}`);
    const winner = replies.find((reply) => reply.status === 200) as Reply;
    for (const instance of instances) {
      const read = await request(instance.url, 'GET', path);
      assert.is(read.body.name, winner.body.name);
      assert.is(read.headers.get('etag'), winner.headers.get('etag'));
    }
  }
});

Fleet('the same Idempotency-Key retried concurrently through different instances creates one element', async ({ fleet }) => {
  const { instances } = fleet as Fleet;
  for (let round = 0; round < 5; round++) {
    const email = `once${round}@example.com`;
    const key = `scale-out-${round}-${Math.random().toString(36).slice(2)}`;
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        request(instances[i % INSTANCES]?.url as string, 'POST', '/users', {
          body: { name: 'Once', email },
          headers: { 'idempotency-key': key },
        }),
      ),
    );
    assert.equal(
      replies.map((reply) => reply.status),
      Array(12).fill(201),
    );
    assert.is(new Set(replies.map((reply) => reply.text)).size, 1, 'identical bodies');
    assert.is(new Set(replies.map((reply) => reply.headers.get('etag'))).size, 1, 'identical ETags');
    const replayed = replies.filter((reply) => reply.headers.get('idempotent-replayed') === 'true');
    assert.is(replayed.length, 11, 'all but the first are replays');
    const found = await request(instances[2]?.url as string, 'GET', `/users?email=${encodeURIComponent(email)}`);
    assert.is(found.body.length, 1, 'one element');
  }
});

Fleet('kill -9 of one instance under write load: no acknowledged write lost, the others keep serving', async ({ fleet }) => {
  const { url, instances } = fleet as Fleet;
  const [survivor, victim, other] = instances as [Process, Process, Process];
  const load = startLoad(url, 'kill');
  try {
    await until('writes before the kill', () => load.acked.size >= 100);
    victim.child.kill('SIGKILL');
    await victim.exited;
    const atKill = load.acked.size;
    // The balancer's health checks drop the dead instance; writes keep being acknowledged without it.
    await until('writes after the kill', () => load.acked.size >= atKill + 200);
  } finally {
    await load.stop();
  }
  // A request the killed instance held when it died is a 502 from the balancer (or a reset); never a 500.
  assert.equal(unexpected(load.statuses, [201, 502, 503, 'network']), {}, 'statuses other than 201/502/503');
  await assertAllStored(survivor.url, load.acked);
  for (const instance of [survivor, other]) {
    assert.is((await request(instance.url, 'GET', '/readyz')).status, 200);
    assert.is((await request(instance.url, 'POST', '/pets', { body: { name: 'After the kill', species: 'fish' } })).status, 201);
  }
});

// --- a PostgreSQL server of this test's own, restarted under load ---------------------------------

/** Runs pg_ctl on the test's own cluster, as the postgres user when this is root (PostgreSQL refuses root). */
function pgCtl(cluster: { bin: string; data: string; dir: string }, args: string[]): void {
  const program = join(cluster.bin, 'pg_ctl');
  const [command, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
  const result = spawnSync(command, argv, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`pg_ctl ${args.join(' ')} exited with ${result.status}: ${result.stdout}${result.stderr}`);
}

const Restart = suite('scale-out: PostgreSQL restarted under load');

Restart('503s (never a 500) while PostgreSQL is down, full service after, nothing acknowledged lost', async () => {
  // test/support/pg-cluster.mjs is plain JavaScript; imported by a computed name so TypeScript does not ask for its types.
  const clusterModule = '../support/pg-cluster.mjs';
  const { startCluster, stopCluster } = (await import(clusterModule)) as {
    startCluster(options: { stateFile: string }): Promise<{ url: string; bin: string; data: string; dir: string }>;
    stopCluster(options: { stateFile: string }): boolean;
  };
  await withTempDir(async (dir) => {
    const stateFile = join(dir, 'cluster.json');
    const cluster = await startCluster({ stateFile });
    let fleet: Fleet | undefined;
    try {
      const admin = new pg.Client({ connectionString: cluster.url });
      await admin.connect();
      await admin.query('CREATE DATABASE restable_restart');
      await admin.end();
      const databaseUrl = cluster.url.replace(/\/postgres$/, '/restable_restart');
      fleet = await startFleet(databaseUrl, dir);
      const { url, instances } = fleet;
      const load = startLoad(url, 'restart');
      const direct = new Map<number | 'network', number>();
      try {
        await until('writes before the restart', () => load.acked.size >= 100);
        pgCtl(cluster, ['stop', '-D', cluster.data, '-m', 'fast', '-w', '-t', '60']);
        // Down: each instance answers a write with a 503 problem (Retry-After) and /readyz with 503.
        for (const instance of instances) {
          await until('a 503 for a write while PostgreSQL is down', async () => {
            const reply = await request(instance.url, 'POST', '/pets', { body: { name: 'while down', species: 'bird' } });
            direct.set(reply.status, (direct.get(reply.status) ?? 0) + 1);
            if (reply.status !== 503) return false;
            assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
            assert.ok(reply.headers.get('retry-after'), 'Retry-After');
            return true;
          });
          const ready = await request(instance.url, 'GET', '/readyz');
          assert.is(ready.status, 503, '/readyz while PostgreSQL is down');
        }
        await until(
          'the balancer to answer 503',
          async () => (await request(url, 'POST', '/pets', { body: { name: 'x', species: 'cat' } })).status === 503,
        );
        const whileDown = load.acked.size;
        pgCtl(cluster, ['start', '-D', cluster.data, '-l', join(cluster.dir, 'server.log'), '-w', '-t', '60']);
        // Back: every instance ready again without a restart of its own, and writes acknowledged again.
        for (const instance of instances) {
          await until('/readyz 200 after PostgreSQL is back', async () => (await request(instance.url, 'GET', '/readyz')).status === 200);
        }
        await until('writes after the restart', () => load.acked.size >= whileDown + 200);
      } finally {
        await load.stop();
      }
      assert.equal(unexpected(load.statuses, [201, 503]), {}, 'through the balancer: only 201 and 503');
      assert.equal(unexpected(direct, [201, 503]), {}, 'directly: only 201 and 503');
      for (const instance of instances) {
        assert.is((await request(instance.url, 'POST', '/pets', { body: { name: 'after', species: 'dog' } })).status, 201);
      }
      await assertAllStored(instances[1]?.url as string, load.acked);
    } finally {
      await fleet?.stop();
      stopCluster({ stateFile });
    }
  });
});

const Terminated = suite('scale-out: connections PostgreSQL ends under load');

Terminated('an instance whose connections PostgreSQL ends while requests use them answers 503 and serves on', async () => {
  const database = await createPgDatabase();
  const service = await spawnService({ DATABASE_URL: database.url, PG_CONNECT_TIMEOUT_MS: '2000' });
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const statuses = new Map<number | 'network', number>();
  let running = true;
  const client = async () => {
    for (let i = 0; running; i++) {
      const reply =
        i % 2 === 0
          ? await request(service.url, 'GET', '/users?limit=5&count=true').catch(() => undefined)
          : await request(service.url, 'POST', '/users', { body: { name: 'T', email: `t${process.hrtime.bigint()}@ended.test` } }).catch(
              () => undefined,
            );
      const status = reply?.status ?? 'network';
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  };
  try {
    const clients = Array.from({ length: 8 }, client);
    // PostgreSQL ends every connection of the service (a restart or failover does the same), over and over.
    for (let round = 0; round < 30; round++) {
      await sleep(50);
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'restable'",
      );
    }
    running = false;
    await Promise.all(clients);
    assert.is(service.child.exitCode, null, `the service is still running: ${service.output()}`);
    assert.equal(unexpected(statuses, [200, 201, 503]), {}, 'only 200, 201 and 503');
    // Once PostgreSQL leaves its connections alone, requests are served again (a pooled connection it ended
    // last may still fail one request with a 503 before the pool drops it).
    await until('a read served again', async () => (await request(service.url, 'GET', '/users?limit=1')).status === 200, 20);
    const after = { name: 'After', email: 'after@ended.test' };
    await until('a write served again', async () => (await request(service.url, 'POST', '/users', { body: after })).status === 201, 20);
  } finally {
    running = false;
    await admin.end();
    await service.stop();
    await database.drop();
  }
});

Fleet.run();
Restart.run();
Terminated.run();

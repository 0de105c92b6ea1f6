// Reliability: no acknowledged write is lost when the process is killed; two services on
// one file both stay correct; the WAL stays bounded under continuous reads and writes.
import { rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { userSample } from '../support/fixtures.js';
import { inspect, type Process, request, spawnService, startService, withTempDir } from '../support/helpers.js';

type Row = Record<string, any>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const integrity = (path: string) => inspect(path, (db) => db.pragma('integrity_check', { simple: true }));

/** Every element of a collection, following the `Link: rel="next"` pages. */
async function listAll(base: string, path: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (let next: string | undefined = `${path}?limit=1000`; next; ) {
    const reply = await request(base, 'GET', next);
    assert.is(reply.status, 200, reply.text);
    rows.push(...reply.body);
    next = /<([^>]+)>;\s*rel="next"/.exec(reply.headers.get('link') ?? '')?.[1];
  }
  return rows;
}

const test = suite('reliability');

test('SIGKILL under concurrent writes: every acknowledged write is there after a restart', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'crash.db') };
    // A write sent but not answered when the process died may or may not have committed: the oracle
    // demands every acknowledged state and accepts, beyond it, only states some sent request wrote.
    const posted = new Map<string, Row>(); // every POST body sent, by its unique email
    const elements = new Map<number, { acknowledged: Row; since: string[] }>(); // names PATCHed since the last answer
    const service = await spawnService(env);
    let again: Process | undefined;
    try {
      let running = true;
      // Each writer PATCHes only elements it created, one request at a time: per element, writes are sequential.
      const writer = async () => {
        const mine: number[] = [];
        while (running) {
          try {
            if (mine.length > 0 && Math.random() < 0.3) {
              const id = mine[Math.floor(Math.random() * mine.length)] as number;
              const element = elements.get(id) as { acknowledged: Row; since: string[] };
              const name = `v${Math.random()}`;
              element.since.push(name);
              const reply = await request(service.url, 'PATCH', `/users/${id}`, { body: { name } });
              if (reply.status === 200) elements.set(id, { acknowledged: reply.body, since: [] });
            } else {
              const body = userSample();
              posted.set(body.email, body);
              const reply = await request(service.url, 'POST', '/users', { body });
              if (reply.status === 201) {
                elements.set(reply.body.id, { acknowledged: reply.body, since: [] });
                mine.push(reply.body.id);
              }
            }
          } catch {
            // the connection died with the process: that write was never acknowledged
          }
        }
      };
      const writers = Array.from({ length: 8 }, writer);
      await sleep(1500);
      service.child.kill('SIGKILL');
      await service.exited;
      running = false;
      await Promise.all(writers);
      assert.ok(elements.size > 20, `only ${elements.size} creations were acknowledged`);

      again = await spawnService(env);
      const rows = new Map((await listAll(again.url, '/users')).map((row) => [row.id as number, row]));
      for (const [id, { acknowledged, since }] of elements) {
        const row = rows.get(id);
        assert.ok(row, `acknowledged user ${id} is gone`);
        if (since.length > 0 && row.name !== acknowledged.name) {
          // a PATCH that committed but whose answer was lost: its name, nothing else changed
          assert.ok(since.includes(row.name), `user ${id} has a name no request sent: ${row.name}`);
          assert.equal({ ...row, name: acknowledged.name, updatedAt: acknowledged.updatedAt }, acknowledged, `user ${id}`);
          assert.ok(row.updatedAt >= acknowledged.updatedAt, `user ${id} went back in time`);
        } else {
          assert.equal(row, acknowledged, `user ${id} is not as acknowledged`);
        }
      }
      for (const row of rows.values()) {
        if (elements.has(row.id)) continue;
        // created by a POST whose answer never arrived: it must be exactly what was sent
        const sent = posted.get(row.email);
        assert.ok(sent, `user ${row.id} was never sent`);
        assert.is(row.name, sent.name);
      }
      assert.is(await again.stop(), 0);
      assert.is(integrity(env.DATABASE_PATH), 'ok');
    } finally {
      await Promise.all([service.stop(), again?.stop()]);
    }
  });
});

test('two services on one file: concurrent writes through both, no 5xx, all readable through both', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'shared.db') };
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)]);
    try {
      const replies = await Promise.all(
        Array.from({ length: 120 }, (_, i) => request(i % 2 ? a.url : b.url, 'POST', '/users', { body: userSample() })),
      );
      assert.equal([...new Set(replies.map((r) => r.status))], [201]);
      const patched = await Promise.all(
        replies.slice(0, 40).map((r, i) => request(i % 2 ? b.url : a.url, 'PATCH', `/users/${r.body.id}`, { body: { name: `p${i}` } })),
      );
      assert.equal([...new Set(patched.map((r) => r.status))], [200]);
      for (const service of [a, b]) {
        for (const reply of [...patched, ...replies.slice(40)]) {
          assert.equal((await request(service.url, 'GET', `/users/${reply.body.id}`)).body, reply.body);
        }
      }
      for (const service of [a, b]) assert.is(await service.stop(), 0);
      assert.is(integrity(env.DATABASE_PATH), 'ok');
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

test('the WAL stays bounded under continuous reads and writes (checkpoints are not starved)', async () => {
  const service = await startService({ env: { DATABASE_SYNCHRONOUS: 'NORMAL' } });
  const wal = `${service.config.databasePath}-wal`;
  let running = true;
  let writes = 0;
  let largest = 0;
  try {
    const readers = Array.from({ length: 4 }, async () => {
      while (running) await service.request('GET', '/users?limit=100');
    });
    const writers = Array.from({ length: 4 }, async () => {
      while (running) if ((await service.request('POST', '/users', { body: userSample() })).status === 201) writes++;
    });
    const sampler = (async () => {
      while (running) {
        largest = Math.max(largest, statSync(wal, { throwIfNoEntry: false })?.size ?? 0);
        await sleep(20);
      }
    })();
    while (writes < 6000) await sleep(100); // at least one 4 KiB WAL frame each: > 24 MB of WAL in all
    running = false;
    await Promise.all([...readers, ...writers, sampler]);
    const bound = 8 * 1024 * 1024;
    assert.ok(writes * 4096 > 2.5 * bound, 'enough was written to pass the bound several times over without checkpoints');
    assert.ok(largest < bound, `the WAL reached ${largest} bytes`);
  } finally {
    running = false;
    await service.close();
  }
});

test('a database file removed or replaced under the service: /readyz says so (503), so it is taken out of rotation', async () => {
  for (const how of ['removed', 'replaced'] as const) {
    const service = await startService();
    try {
      const path = service.config.databasePath;
      assert.is((await service.request('GET', '/readyz')).status, 200);
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
      if (how === 'replaced') writeFileSync(path, '');
      const ready = await service.request('GET', '/readyz');
      assert.is(ready.status, 503, ready.text);
      assert.is(
        ready.body.detail,
        `Not ready: the database file (DATABASE_PATH) was ${how} since the service opened it; restart the service.`,
      );
      assert.not.ok(ready.text.includes(path), 'no file path reaches a client (API.md §4)');
    } finally {
      await service.close();
    }
  }
});

test.run();

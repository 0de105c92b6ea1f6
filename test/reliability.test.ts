// Reliability (issue 8): no acknowledged write is lost when the process is killed; two services on
// one file both stay correct; the WAL stays bounded under continuous reads and writes.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { userSample } from './fixtures.js';
import { inspect, request, spawnService, startService, withTempDir } from './helpers.js';

type Row = Record<string, unknown>;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const integrity = (path: string) => inspect(path, (db) => db.pragma('integrity_check', { simple: true }));

const test = suite('reliability');

test('SIGKILL under concurrent writes: every acknowledged write is there after a restart', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'crash.db') };
    const service = await spawnService(env);
    const acknowledged = new Map<number, Row>();
    let running = true;
    const writer = async () => {
      const mine: number[] = [];
      while (running) {
        try {
          const reply =
            mine.length > 0 && Math.random() < 0.3
              ? await request(service.url, 'PATCH', `/users/${mine[Math.floor(Math.random() * mine.length)]}`, {
                  body: { name: `v${Math.random()}` },
                })
              : await request(service.url, 'POST', '/users', { body: userSample() });
          if (reply.status === 201) mine.push(reply.body.id);
          if (reply.status === 200 || reply.status === 201) acknowledged.set(reply.body.id, reply.body);
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
    assert.ok(acknowledged.size > 20, `only ${acknowledged.size} writes were acknowledged`);

    const again = await spawnService(env);
    for (const [id, body] of acknowledged) {
      const reply = await request(again.url, 'GET', `/users/${id}`);
      assert.is(reply.status, 200, `acknowledged user ${id} is gone`);
      assert.equal(reply.body, body, `user ${id} is not as acknowledged`);
    }
    again.child.kill('SIGTERM');
    assert.is(await again.exited, 0);
    assert.is(integrity(env.DATABASE_PATH), 'ok');
  });
});

test('two services on one file: concurrent writes through both, no 5xx, all readable through both', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'shared.db') };
    const [a, b] = await Promise.all([spawnService(env), spawnService(env)]);
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
    for (const service of [a, b]) {
      service.child.kill('SIGTERM');
      assert.is(await service.exited, 0);
    }
    assert.is(integrity(env.DATABASE_PATH), 'ok');
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

test.run();

// Disk trouble (needs root to mount a small tmpfs; `npm run test:faults`, run by CI):
// when the disk fills up, writes answer 503, reads keep working, /readyz says why, nothing is
// half-written, and the service recovers by itself once space returns.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { closeDatabase, MIN_FREE_BYTES, openDatabase, probeWrite } from '../../src/engine/sqlite/connection.js';
import { userSample } from '../support/fixtures.js';
import { fill, request, type Service, spawnService, startService } from '../support/helpers.js';

const test = suite<{ dir: string; service: Service }>('disk full');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'restable-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', ctx.dir]);
  ctx.service = await startService({ env: { DATABASE_PATH: join(ctx.dir, 'app.db') } });
});
test.after(async ({ dir, service }) => {
  await service.close();
  execFileSync('umount', [dir]);
  rmdirSync(dir);
});

test('writes answer 503, reads keep working, /readyz says why, and it recovers when space returns', async ({ dir, service }) => {
  const kept = await service.request('POST', '/users', { body: userSample() });
  assert.is(kept.status, 201);
  service.database.sqlite.pragma('wal_checkpoint(TRUNCATE)'); // the next write must grow the WAL
  const filler = fill(dir);

  const statuses: number[] = [];
  let refused: Awaited<ReturnType<Service['request']>> | undefined;
  for (let i = 0; i < 50 && !refused; i++) {
    const reply = await service.request('POST', '/users', { body: userSample() });
    statuses.push(reply.status);
    if (reply.status === 503) refused = reply;
  }
  assert.ok(refused, `no write was refused: ${statuses.join(' ')}`);
  assert.ok(
    statuses.every((s) => s === 201 || s === 503),
    `unexpected statuses ${statuses.join(' ')}`,
  );
  assert.match(refused?.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(refused?.headers.get('retry-after'), '1');
  const patch = await service.request('PATCH', kept.headers.get('location') as string, { body: { name: 'x'.repeat(20_000) } });
  assert.is(patch.status, 503);

  assert.equal((await service.request('GET', kept.headers.get('location') as string)).body, kept.body);
  assert.is((await service.request('GET', '/users?count=true')).status, 200);
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 503);
  assert.match(ready.body.detail, /writes are failing \(database or disk is full\); reads still work/);
  assert.is(service.database.sqlite.pragma('integrity_check', { simple: true }), 'ok');

  rmSync(filler);
  assert.is((await service.request('GET', '/readyz')).status, 200);
  const after = await service.request('POST', '/users', { body: userSample() });
  assert.is(after.status, 201);
  assert.is(service.database.sqlite.pragma('integrity_check', { simple: true }), 'ok');
  const count = Number((await service.request('GET', '/users?count=true&limit=1')).headers.get('x-total-count'));
  assert.is(count, 2 + statuses.filter((s) => s === 201).length, 'no refused write was half-stored');
});

test('the readiness probe asks for room to write, not for one page: under MIN_FREE_BYTES free it fails', async ({ dir }) => {
  // A database of its own on the same small disk, healthy: one page could still be written.
  const database = openDatabase(join(dir, 'probe.db'), 'FULL');
  try {
    assert.is(probeWrite(database), undefined);
    const spacer = join(dir, 'spacer');
    writeFileSync(spacer, Buffer.alloc(512 * 1024));
    const filler = fill(dir);
    rmSync(spacer);
    const { bavail, bsize } = statfsSync(dir);
    assert.ok(bavail * bsize < MIN_FREE_BYTES, `${bavail * bsize} bytes free`);
    assert.match(probeWrite(database) ?? '', /^the disk holding the database has \d+ bytes free$/);
    rmSync(filler);
    assert.is(probeWrite(database), undefined);
  } finally {
    closeDatabase(database);
  }
});

test('SIGTERM on a full disk: the WAL cannot be checkpointed, the process says so and exits 0, and nothing is lost', async ({ dir }) => {
  const path = join(dir, 'stop.db');
  const service = await spawnService({ DATABASE_PATH: path });
  let filler: string | undefined;
  try {
    for (let i = 0; i < 20; i++) assert.is((await request(service.url, 'POST', '/users', { body: userSample() })).status, 201);
    filler = fill(dir);
    assert.is(await service.stop(), 0, service.output());
    assert.match(service.output(), /its WAL could not be checkpointed/);
    assert.not.match(service.output(), /SqliteError|\n\s+at /);
  } finally {
    if (filler) rmSync(filler);
  }
  const reopened = openDatabase(path, 'FULL');
  try {
    assert.is(reopened.sqlite.prepare('SELECT count(*) FROM users').pluck().get(), 20);
  } finally {
    closeDatabase(reopened);
  }
});

test.run();

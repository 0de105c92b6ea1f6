// Disk full during a group (needs root to mount a small tmpfs, `npm run test:faults`): many
// writes in flight together while the disk fills answer 2xx or 503, never another 5xx; every 2xx is
// in the file and no 503 left anything; once space returns the service recovers without a restart.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { userSample } from '../support/fixtures.js';
import { type Answer, burst, type Row, readFile, type Write } from '../support/group-commit.js';
import { fill, type Process, request, spawnService } from '../support/helpers.js';

const test = suite<{ dir: string }>('disk full during a group');

test.before((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'restable-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', ctx.dir]);
});
test.after(({ dir }) => {
  execFileSync('umount', [dir]);
  rmdirSync(dir);
});

/** A name long enough that each write needs a page or more of WAL. */
const long = (marker: string) => `${marker}-${'x'.repeat(3000)}`;

test('writes in flight together while the disk fills: 2xx or 503 each, nothing acknowledged lost, recovery', async ({ dir }) => {
  const env = { DATABASE_PATH: join(dir, 'app.db') }; // DATABASE_SYNCHRONOUS left at its default, FULL
  const services: Process[] = [];
  try {
    const service = await spawnService(env);
    services.push(service);
    const base = service.url;
    // Users the bursts PATCH, each once per burst: per user, the last 200 is what the file must hold.
    const patched = new Map<number, Row>();
    for (let i = 0; i < 10; i++) {
      const reply = await request(base, 'POST', '/users', { body: userSample() });
      assert.is(reply.status, 201);
      patched.set(reply.body.id, reply.body);
    }
    const created = new Map<string, Row>(); // acknowledged creations, by email
    const refused = new Set<string>(); // emails of creations answered 503
    const unexpected: string[] = [];
    let refusals = 0;

    /** One burst of 40 creations and 10 PATCHes, all in flight at once; records every answer. */
    const fire = async (round: string) => {
      const writes: Write[] = [];
      for (let i = 0; i < 40; i++)
        writes.push({ method: 'POST', path: '/users', body: { ...userSample(), name: long(`new-${round}-${i}`) } });
      for (const id of patched.keys()) writes.push({ method: 'PATCH', path: `/users/${id}`, body: { name: long(`patch-${round}-${id}`) } });
      const answers = await burst(base, writes);
      for (const [i, write] of writes.entries()) {
        const answer = answers[i] as Answer;
        const sent = write.body as Row;
        const ok = write.method === 'POST' ? 201 : 200;
        if (answer.status === ok) {
          assert.is(answer.body.name, sent.name, 'the answer is the one of this request');
          if (write.method === 'POST') created.set(sent.email, answer.body);
          else patched.set(answer.body.id, answer.body);
        } else if (answer.status === 503) {
          refusals++;
          assert.match(String(answer.headers['content-type']), /^application\/problem\+json/);
          assert.is(answer.headers['retry-after'], '1');
          if (write.method === 'POST') refused.add(sent.email);
        } else {
          unexpected.push(`${write.method} ${write.path}: ${answer.status} ${answer.text.slice(0, 200)}`);
        }
      }
    };

    // An empty WAL, so the next commits must grow it; then a full disk with a little room left, so the
    // first groups commit and a later one meets the end of the disk part-way.
    const db = new Database(env.DATABASE_PATH);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    const filler = fill(dir);
    truncateSync(filler, statSync(filler).size - 192 * 1024);
    for (let round = 0; round < 40 && refusals === 0 && unexpected.length === 0; round++) await fire(`full-${round}`);
    assert.equal(unexpected, [], 'every answer is 2xx or 503');
    assert.ok(refusals > 0, 'no write was refused on a full disk (were writes acknowledged before their commit?)');
    await fire('still-full'); // once more while full, also after the service has seen a failed commit
    assert.equal(unexpected, [], 'every answer is 2xx or 503');

    // Reads keep working while writes fail.
    for (const element of [...created.values()].slice(0, 5)) {
      assert.equal((await request(base, 'GET', `/users/${element.id}`)).body, element);
    }

    // Space returns: the service takes writes again, by itself.
    rmSync(filler);
    assert.is((await request(base, 'GET', '/readyz')).status, 200);
    const before = created.size;
    await fire('after');
    assert.equal(unexpected, [], 'every answer after recovery is 2xx');
    assert.is(created.size, before + 40, 'every creation after recovery succeeded');

    for (const element of [...created.values(), ...patched.values()]) {
      const read = await request(base, 'GET', `/users/${element.id}`);
      assert.equal(read.body, element, `user ${element.id} is not as acknowledged`);
    }
    assert.is(await service.stop(), 0);

    // The file: every acknowledged write as acknowledged, no refused creation, an intact database.
    const file = readFile(env.DATABASE_PATH);
    assert.is(file.integrity, 'ok');
    for (const element of [...created.values(), ...patched.values()]) {
      assert.equal(file.users.get(element.id), element, `user ${element.id} is not as acknowledged in the file`);
    }
    const emails = new Set([...file.users.values()].map((row) => row.email));
    const leftovers = [...refused].filter((email) => emails.has(email));
    assert.equal(leftovers, [], 'a creation answered 503 was stored');
    assert.is(file.users.size, created.size + patched.size, 'the file holds the acknowledged users and nothing else');

    // And a restart on that file serves it.
    const again = await spawnService(env);
    services.push(again);
    assert.is((await request(again.url, 'GET', '/readyz')).status, 200);
    const [some] = created.values();
    assert.equal((await request(again.url, 'GET', `/users/${some?.id}`)).body, some);
    assert.is((await request(again.url, 'POST', '/users', { body: userSample() })).status, 201);
    assert.is(await again.stop(), 0);
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    rmSync(join(dir, 'filler'), { force: true });
  }
});

test.run();

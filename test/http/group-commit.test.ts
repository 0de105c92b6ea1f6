// Group commit (docs/operations.md#durability-and-failure-behaviour) over HTTP: writes that reach the service together each get their own
// answer, failing ones (409, 412, 422) leave nothing and take nothing down with them, and every
// acknowledged write is in the file, also after a SIGKILL under concurrent write load.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { petSample, userSample } from '../support/fixtures.js';
import { type Answer, burst, listAll, type Row, readFile, sleep, type Write } from '../support/group-commit.js';
import { inspect, type Process, request, spawnService, withTempDir } from '../support/helpers.js';

const test = suite('group commit');

/** Creates an element before the burst; returns its body and ETag. */
async function made(base: string, path: string, body: unknown): Promise<{ body: Row; etag: string }> {
  const reply = await request(base, 'POST', path, { body });
  assert.is(reply.status, 201, reply.text);
  return { body: reply.body, etag: reply.headers.get('etag') as string };
}

const total = async (base: string, path: string) =>
  Number((await request(base, 'GET', `${path}${path.includes('?') ? '&' : '?'}count=true&limit=1`)).headers.get('x-total-count'));

const problem = (answer: Answer, status: number, what: string) => {
  assert.is(answer.status, status, `${what}: ${answer.text}`);
  assert.match(String(answer.headers['content-type']), /^application\/problem\+json/, what);
};

test('a group where some writes fail: each client gets its own answer, the others are committed, the failed leave nothing', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'group.db') }; // DATABASE_SYNCHRONOUS left at its default, FULL
    const service = await spawnService(env);
    try {
      const base = service.url;
      const burstKeys: string[] = [];
      for (let round = 0; round < 3; round++) {
        // The elements the burst works on, each touched by one kind of write only, so every answer is known in advance.
        const taken = await made(base, '/users', userSample());
        const raced = await made(base, '/users', userSample());
        const stale = await Promise.all(
          Array.from({ length: 5 }, async () => {
            const first = await made(base, '/users', userSample());
            const now = await request(base, 'PATCH', `/users/${first.body.id}`, { body: { name: 'changed since read' } });
            assert.is(now.status, 200);
            return { etag: first.etag, body: now.body as Row, current: now.headers.get('etag') as string };
          }),
        );
        const patched = await Promise.all(Array.from({ length: 5 }, () => made(base, '/users', userSample())));
        const clashing = await Promise.all(Array.from({ length: 3 }, () => made(base, '/users', userSample())));
        const deleted = await Promise.all(Array.from({ length: 3 }, () => made(base, '/users', userSample())));
        const owner = await made(base, '/users', userSample());
        const pet = await made(base, '/pets', petSample());
        const restricted = await Promise.all(
          Array.from({ length: 3 }, async () => {
            const user = await made(base, '/users', userSample());
            await made(base, '/orders', { userId: user.body.id, petId: pet.body.id });
            return user;
          }),
        );
        const replaced = await made(base, '/users', userSample());
        const refusedPut = await made(base, '/users', userSample());
        const stored = userSample();
        const storedKey = `stored-${round}`;
        const storedReply = await request(base, 'POST', '/users', { body: stored, headers: { 'idempotency-key': storedKey } });
        assert.is(storedReply.status, 201);
        const burstKey = `burst-${round}`;
        burstKeys.push(burstKey);
        const keyed = userSample();
        const pairs = [userSample().email, userSample().email];
        const usersBefore = await total(base, '/users');
        const petsBefore = await total(base, '/pets');
        const ordersBefore = await total(base, '/orders');

        type Case = { write: Write; check: (answer: Answer) => void };
        const cases: Case[] = [];
        const add = (write: Write, check: (answer: Answer) => void) => cases.push({ write, check });
        const creates: Row[] = [];
        for (let i = 0; i < 12; i++) {
          const body = userSample();
          creates.push(body);
          add({ method: 'POST', path: '/users', body }, (a) => {
            assert.is(a.status, 201, a.text);
            assert.is(a.body.email, body.email, 'the answer is the one of this request');
            assert.is(a.headers.location, `/users/${a.body.id}`);
          });
        }
        for (let i = 0; i < 4; i++) {
          add({ method: 'POST', path: '/users', body: { name: `bad-dup-${i}`, email: taken.body.email } }, (a) =>
            problem(a, 409, 'taken email'),
          );
        }
        const pairAnswers: Answer[][] = pairs.map(() => []);
        pairs.forEach((email, pair) => {
          for (const side of ['a', 'b']) {
            add({ method: 'POST', path: '/users', body: { name: `pair-${side}`, email } }, (a) => pairAnswers[pair]?.push(a));
          }
        });
        for (let i = 0; i < 3; i++)
          add({ method: 'POST', path: '/users', body: { name: `bad-no-email-${i}` } }, (a) => problem(a, 422, 'no email'));
        for (let i = 0; i < 2; i++) {
          add({ method: 'POST', path: '/users', body: { ...userSample(), name: `bad-unknown-${i}`, nickname: 'x' } }, (a) =>
            problem(a, 422, 'unknown field'),
          );
        }
        for (let i = 0; i < 3; i++) {
          add({ method: 'POST', path: '/pets', body: { name: `bad-orphan-${i}`, species: 'cat', ownerId: 99_999_999 } }, (a) => {
            problem(a, 422, 'missing owner');
            assert.equal(
              a.body.errors.map((e: Row) => e.path),
              ['ownerId'],
            );
          });
        }
        for (let i = 0; i < 2; i++) {
          add({ method: 'POST', path: '/orders', body: { userId: owner.body.id, petId: 99_999_999 } }, (a) => {
            problem(a, 422, 'missing pet');
            assert.equal(
              a.body.errors.map((e: Row) => e.path),
              ['petId'],
            );
          });
        }
        for (let i = 0; i < 4; i++) {
          const body = { name: `pet-${round}-${i}`, species: 'dog', ownerId: owner.body.id };
          add({ method: 'POST', path: '/pets', body }, (a) => {
            assert.is(a.status, 201, a.text);
            assert.is(a.body.name, body.name);
          });
        }
        for (let i = 0; i < 3; i++) {
          const body = { name: `child-${round}-${i}`, species: 'fish' };
          add({ method: 'POST', path: `/users/${owner.body.id}/pets`, body }, (a) => {
            assert.is(a.status, 201, a.text);
            assert.equal([a.body.name, a.body.ownerId], [body.name, owner.body.id]);
          });
        }
        for (const s of stale) {
          add({ method: 'PATCH', path: `/users/${s.body.id}`, body: { name: 'bad-stale' }, headers: { 'if-match': s.etag } }, (a) => {
            problem(a, 412, 'stale If-Match');
            assert.is(a.headers.etag, s.current, 'a 412 carries the current ETag');
          });
        }
        for (const p of patched) {
          const name = `patched-${p.body.id}`;
          add({ method: 'PATCH', path: `/users/${p.body.id}`, body: { name } }, (a) => {
            assert.is(a.status, 200, a.text);
            assert.equal([a.body.id, a.body.name, a.body.email], [p.body.id, name, p.body.email]);
          });
        }
        const raceAnswers: Answer[] = [];
        for (let i = 0; i < 10; i++) {
          add(
            {
              method: 'PATCH',
              path: `/users/${raced.body.id}`,
              body: { name: `race-${i}` },
              headers: { 'content-type': 'application/merge-patch+json', 'if-match': raced.etag },
            },
            (a) => raceAnswers.push(a),
          );
        }
        for (const c of clashing) {
          add({ method: 'PATCH', path: `/users/${c.body.id}`, body: { name: 'bad-clash', email: taken.body.email } }, (a) =>
            problem(a, 409, 'PATCH to a taken email'),
          );
        }
        for (const d of deleted) add({ method: 'DELETE', path: `/users/${d.body.id}` }, (a) => assert.is(a.status, 204, a.text));
        for (const r of restricted)
          add({ method: 'DELETE', path: `/users/${r.body.id}` }, (a) => problem(a, 409, 'DELETE of a user with orders'));
        add({ method: 'PUT', path: `/users/${replaced.body.id}`, body: { name: 'replaced', email: replaced.body.email } }, (a) => {
          assert.is(a.status, 200, a.text);
          assert.is(a.body.name, 'replaced');
        });
        add(
          {
            method: 'PUT',
            path: `/users/${refusedPut.body.id}`,
            body: { ...refusedPut.body, name: 'bad-put', createdAt: '2000-01-01T00:00:00.000Z' },
          },
          (a) => problem(a, 422, 'PUT changing createdAt'),
        );
        const keyAnswers: Answer[] = [];
        for (let i = 0; i < 10; i++) {
          add({ method: 'POST', path: '/users', body: keyed, headers: { 'idempotency-key': burstKey } }, (a) => keyAnswers.push(a));
        }
        add({ method: 'POST', path: '/users', body: stored, headers: { 'idempotency-key': storedKey } }, (a) => {
          assert.is(a.status, 201, a.text);
          assert.is(a.headers['idempotent-replayed'], 'true');
          assert.is(a.text, storedReply.text);
        });
        add(
          { method: 'POST', path: '/users', body: { ...userSample(), name: 'bad-key-reuse' }, headers: { 'idempotency-key': storedKey } },
          (a) => problem(a, 422, 'a stored key with another body'),
        );

        // Interleaved, so failing writes sit between succeeding ones wherever the service cuts its groups.
        const order = cases.map((_, i) => i).sort((i, j) => ((i * 7919) % 97) - ((j * 7919) % 97));
        const answers = await burst(
          base,
          order.map((i) => (cases[i] as Case).write),
        );
        for (const [at, i] of order.entries()) (cases[i] as Case).check(answers[at] as Answer);

        for (const [pair, replies] of pairAnswers.entries()) {
          assert.equal(replies.map((a) => a.status).sort(), [201, 409], `pair ${pair}: one of two creations with one email wins`);
        }
        assert.equal(raceAnswers.map((a) => a.status).sort(), [200, ...Array(9).fill(412)], 'ten PATCHes with one If-Match: one wins');
        assert.ok(keyAnswers.every((a) => a.status === 201));
        assert.is(new Set(keyAnswers.map((a) => a.text)).size, 1, 'every answer to one Idempotency-Key is the same');
        assert.is(new Set(keyAnswers.map((a) => `${a.headers.location} ${a.headers.etag}`)).size, 1, 'same Location and ETag');
        assert.is(keyAnswers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 9, 'all but the first are replays');

        // Every 2xx with a body is what the service now holds, byte for byte (same ETag).
        for (const [at, i] of order.entries()) {
          const { write } = cases[i] as Case;
          const a = answers[at] as Answer;
          if (a.status !== 200 && a.status !== 201) continue;
          const path = a.status === 201 ? (a.headers.location as string) : write.path;
          const read = await request(base, 'GET', path);
          assert.is(read.status, 200, `${path} was acknowledged but is not there`);
          assert.equal(read.body, a.body, `${path} is not as acknowledged`);
          assert.is(read.headers.get('etag'), a.headers.etag);
        }
        // Nothing a failed write sent was stored, and the elements it aimed at are untouched.
        assert.is(await total(base, '/users?name[startsWith]=bad'), 0, 'a failed user write left a row');
        assert.is(await total(base, '/pets?name[startsWith]=bad'), 0, 'a failed pet write left a row');
        for (const element of [
          ...stale.map((s) => s.body),
          ...clashing.map((c) => c.body),
          ...restricted.map((r) => r.body),
          refusedPut.body,
        ]) {
          assert.equal((await request(base, 'GET', `/users/${element.id}`)).body, element, `user ${element.id} changed`);
        }
        for (const d of deleted) assert.is((await request(base, 'GET', `/users/${d.body.id}`)).status, 404);
        const createdUsers = creates.length + pairs.length + 1; // the valid ones, one per pair, one per Idempotency-Key
        assert.is(await total(base, '/users'), usersBefore + createdUsers - deleted.length);
        assert.is(await total(base, '/pets'), petsBefore + 7);
        assert.is(await total(base, '/orders'), ordersBefore);
      }

      // The file holds exactly what the API serves (no row the API does not show, none missing).
      const users = await listAll(base, '/users');
      const pets = await listAll(base, '/pets');
      assert.is(await service.stop(), 0);
      const file = readFile(env.DATABASE_PATH);
      assert.equal([...file.users.values()], users);
      assert.equal([...file.pets.values()], pets);
      assert.is(file.integrity, 'ok');
      assert.equal(file.foreignKeys, []);
      assert.ok(users.every((u) => !u.name.startsWith('bad')));
      const keys = inspect(env.DATABASE_PATH, (db) =>
        burstKeys.map((key) => db.prepare('SELECT count(*) FROM restable_idempotency_keys WHERE key = ?').pluck().get(key)),
      );
      assert.equal(keys, [1, 1, 1], 'each burst key is stored once');
    } finally {
      await service.stop();
    }
  });
});

test('a write lock held by another connection: writes wait without stopping reads, then commit, or get a 503 after 5 s', async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, 'locked.db');
    const service = await spawnService({ DATABASE_PATH: file });
    const other = new Database(file);
    try {
      const base = service.url;
      const first = await made(base, '/users', userSample());
      other.prepare('BEGIN IMMEDIATE').run(); // the write lock, held by another connection
      const waiting = request(base, 'POST', '/users', { body: userSample() });
      let answered = false;
      void waiting.then(() => {
        answered = true;
      });
      // Reads are served while the write waits for the lock (it waits between turns of the event loop).
      for (let i = 0; i < 5; i++) {
        const read = await request(base, 'GET', `/users/${first.body.id}`);
        assert.is(read.status, 200, read.text);
      }
      assert.not.ok(answered, 'the write did not wait for the lock');
      other.prepare('COMMIT').run();
      const created = await waiting;
      assert.is(created.status, 201, created.text);
      // Held past the 5 s a write waits: a 503 with Retry-After, and nothing stored.
      other.prepare('BEGIN IMMEDIATE').run();
      const before = await total(base, '/users');
      const refused = await request(base, 'POST', '/users', { body: userSample() });
      assert.is(refused.status, 503, refused.text);
      assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.ok(refused.headers.get('retry-after'));
      other.prepare('COMMIT').run();
      assert.is(await total(base, '/users'), before);
      assert.is((await request(base, 'POST', '/users', { body: userSample() })).status, 201);
    } finally {
      if (other.inTransaction) other.prepare('COMMIT').run();
      other.close();
      await service.stop();
    }
  });
});

test('SIGKILL under concurrent write load: every acknowledged write is in the file as acknowledged', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'crash.db') }; // DATABASE_SYNCHRONOUS left at its default, FULL
    const service = await spawnService(env);
    let again: Process | undefined;
    try {
      // What was sent, by unique email (users) or name (pets): a row may come from a write never answered, never from nowhere.
      const sentUsers = new Map<string, Row>();
      const sentPets = new Map<string, Row>();
      // Per acknowledged user: its acknowledged state and the name of the PATCH in flight when the process died, if any.
      const users = new Map<number, { acknowledged: Row; pending?: string }>();
      const pets = new Map<number, Row>();
      const surprises: string[] = [];
      let answered = 0;
      let alive = true;

      // 32 clients, each with its own users: every user is written by one client, one request at a time, and each
      // PATCH carries the ETag of that client's last acknowledged state, so it must succeed while the service lives.
      const client = async (c: number) => {
        const mine: { id: number; etag: string }[] = [];
        for (let step = 0; alive; step++) {
          try {
            const own = mine[step % Math.max(mine.length, 1)];
            const op = own ? step % 6 : 0;
            if (op === 0 || op === 3) {
              const body = userSample();
              sentUsers.set(body.email, body);
              const reply = await request(service.url, 'POST', '/users', { body });
              if (reply.status !== 201) throw new Error(`POST /users: ${reply.status} ${reply.text}`);
              users.set(reply.body.id, { acknowledged: reply.body });
              mine.push({ id: reply.body.id, etag: reply.headers.get('etag') as string });
            } else if (op === 1 && own) {
              const name = `c${c}-s${step}`;
              const entry = users.get(own.id) as { acknowledged: Row; pending?: string };
              entry.pending = name;
              const reply = await request(service.url, 'PATCH', `/users/${own.id}`, { body: { name }, headers: { 'if-match': own.etag } });
              if (reply.status !== 200) throw new Error(`PATCH /users/${own.id}: ${reply.status} ${reply.text}`);
              users.set(own.id, { acknowledged: reply.body });
              own.etag = reply.headers.get('etag') as string;
            } else if (op === 2 && own) {
              const body = { name: `pet-c${c}-s${step}`, species: 'bird' };
              sentPets.set(body.name, { ...body, ownerId: own.id });
              const reply = await request(service.url, 'POST', `/users/${own.id}/pets`, { body });
              if (reply.status !== 201) throw new Error(`POST pet: ${reply.status} ${reply.text}`);
              pets.set(reply.body.id, reply.body);
            } else if (op === 4 && own) {
              // Fails in the middle of others' writes: a taken email (409) or a stale ETag (412).
              const taken = users.get(mine[0]?.id as number)?.acknowledged.email;
              const reply =
                step % 12 === 4
                  ? await request(service.url, 'POST', '/users', { body: { name: `bad-c${c}`, email: taken } })
                  : await request(service.url, 'PATCH', `/users/${own.id}`, {
                      body: { name: `bad-c${c}` },
                      headers: { 'if-match': '"stale"' },
                    });
              if (reply.status !== (step % 12 === 4 ? 409 : 412)) throw new Error(`failing write: ${reply.status} ${reply.text}`);
            } else {
              const reply = await request(service.url, 'POST', '/pets', {
                body: { name: `bad-c${c}`, species: 'cat', ownerId: 99_999_999 },
              });
              if (reply.status !== 422) throw new Error(`orphan pet: ${reply.status} ${reply.text}`);
            }
            answered++;
          } catch (error) {
            // Once the process is gone a request fails without an answer: that write was never acknowledged.
            if (alive) surprises.push(String(error));
            return;
          }
        }
      };
      const clients = Array.from({ length: 32 }, (_, c) => client(c));
      // Killed after a number of answers, not a time: the load is well under way whatever the machine's speed.
      while (answered < 1500 && surprises.length === 0) await sleep(5);
      alive = false; // from here on a request without an answer is expected (set first: the kill is immediate)
      service.child.kill('SIGKILL');
      await service.exited;
      await Promise.all(clients);
      assert.equal(surprises, [], 'while the service lived, every write got the answer it should');

      // The file as the killed process left it (its WAL included), read before anything opens it for writing.
      const file = readFile(env.DATABASE_PATH);
      assert.is(file.integrity, 'ok');
      assert.equal(file.foreignKeys, []);
      for (const [id, { acknowledged: ack, pending }] of users) {
        const row = file.users.get(id);
        assert.ok(row, `acknowledged user ${id} is gone`);
        if (pending !== undefined && row.name === pending) {
          // the PATCH in flight committed but its answer was lost: its name, a later updatedAt, nothing else
          assert.equal({ ...row, name: ack.name, updatedAt: ack.updatedAt }, ack, `user ${id}`);
          assert.ok(row.updatedAt >= ack.updatedAt, `user ${id} went back in time`);
        } else {
          assert.equal(row, ack, `user ${id} is not as acknowledged`);
        }
      }
      for (const [id, ack] of pets) assert.equal(file.pets.get(id), ack, `pet ${id} is not as acknowledged`);
      for (const row of file.users.values()) {
        if (users.has(row.id)) continue;
        const sent = sentUsers.get(row.email); // a creation whose answer never arrived: exactly what was sent
        assert.ok(sent, `user ${row.id} was never sent: ${JSON.stringify(row)}`);
        assert.is(row.name, sent.name);
      }
      for (const row of file.pets.values()) {
        if (pets.has(row.id)) continue;
        const sent = sentPets.get(row.name);
        assert.ok(sent, `pet ${row.id} was never sent: ${JSON.stringify(row)}`);
        assert.equal([row.species, row.ownerId], [sent.species, sent.ownerId]);
      }

      // And the service comes back on that file and takes writes.
      again = await spawnService(env);
      assert.is((await request(again.url, 'GET', '/readyz')).status, 200);
      assert.is((await request(again.url, 'POST', '/users', { body: userSample() })).status, 201);
      assert.is(await again.stop(), 0);
    } finally {
      await Promise.all([service.stop(), again?.stop()]);
    }
  });
});

test.run();

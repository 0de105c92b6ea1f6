// Where a process's event streams start reading the log (src/api/change-stream.ts): a stream far
// behind catches up at its client's pace, and a stream opened past the end silences no other one.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStream, sleep, until } from '../support/changes.js';
import { startService } from '../support/helpers.js';

const test = suite('change streams: where the first stream of a process starts');

test('a stream that resumes 5,000 changes behind, alone in its process, gets them all, a page at a time', async () => {
  const service = await startService();
  try {
    for (let r = 0; r < 5; r++) {
      const users = Array.from({ length: 1000 }, (_, i) => ({ name: `U${i}`, email: `b${r}-${i}@x.test` }));
      assert.is((await service.request('POST', '/users', { body: users })).status, 201);
    }
    let last = '0';
    const tries: string[] = [];
    for (let attempt = 0; attempt < 5 && Number(last) < 5000; attempt++) {
      try {
        const stream = await openStream(service.url, '/_changes', { 'last-event-id': last });
        await until('all', () => Number(stream.lastId() ?? last) >= 5000, 5000).catch(() => undefined);
        tries.push(`${stream.status}: ${stream.events.length} events`);
        last = stream.lastId() ?? last;
        stream.close();
      } catch (error) {
        tries.push((error as Error).message); // "socket hang up": destroyed before its headers left
      }
    }
    const closed = service.logs.filter((l) => /fell behind/.test(l.msg)).map((l) => l.unsent);
    assert.is(last, '5000', `${tries.join('; ')}; closed with unsent bytes: ${closed.join(', ')}`);
  } finally {
    await service.close();
  }
});

test('a stream opened first with a seq past the end (a stale Last-Event-ID) silences no later stream', async () => {
  const service = await startService();
  try {
    assert.is((await service.request('POST', '/users', { body: { name: 'A', email: 'a@x.test' } })).status, 201);
    const stale = await openStream(service.url, '/_changes', { 'last-event-id': '1000000' });
    assert.is(stale.status, 200);
    await sleep(300);
    const follower = await openStream(service.url, '/_changes');
    assert.is(follower.status, 200);
    await sleep(300);
    stale.close();
    assert.is((await service.request('POST', '/users', { body: { name: 'B', email: 'b@x.test' } })).status, 201);
    await until('the follower gets the new change', () => follower.events.length === 1, 5000).finally(() => follower.close());
  } finally {
    await service.close();
  }
});

test.run();

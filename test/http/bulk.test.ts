// Bulk creates (API.md §7): a JSON array POSTed to a collection or related path creates every element
// in one transaction or none, a refusal names the element by its index, an Idempotency-Key covers the
// whole array, and the array has its own body limit. Runs on both backends.

import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { created, userSample } from '../support/fixtures.js';
import { BACKEND, type Reply, type Service, startService } from '../support/helpers.js';

type Row = Record<string, unknown>;

const users = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => ({ name: `${prefix} ${i}`, email: `${prefix}-${i}-${userSample().email}` }));

async function total(service: Service, path: string): Promise<number> {
  const reply = await service.request('GET', `${path}${path.includes('?') ? '&' : '?'}count=true&limit=1`);
  assert.is(reply.status, 200, reply.text);
  return Number(reply.headers.get('x-total-count'));
}

function assertRefused(reply: Reply, status: number, paths: string[]): void {
  assert.is(reply.status, status, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    paths,
  );
}

const bulk = suite<{ service: Service }>('bulk create: an array, all or nothing');

bulk.before(async (ctx) => {
  ctx.service = await startService({ env: { MAX_BULK_BODY_BYTES: String(3 * 1024 * 1024) } });
});

bulk.after(async (ctx) => ctx.service?.close());

bulk('an array creates every element in order: 201 with the created elements, no Location', async ({ service }) => {
  const body = users(5, 'Bulk');
  const reply = await service.request('POST', '/users', { body });
  assert.is(reply.status, 201, reply.text);
  assert.is(reply.headers.get('location'), null);
  assert.is(reply.body.length, 5);
  reply.body.forEach((user: Row, i: number) => {
    assert.is(user.name, body[i]?.name);
    assert.type(user.id, 'number');
  });
  const ids = reply.body.map((u: Row) => u.id as number);
  assert.equal(
    ids,
    [...ids].sort((a, b) => a - b),
  );
  for (const user of reply.body) assert.equal((await service.request('GET', `/users/${user.id}`)).body, user);
});

bulk('a large array (several multi-row statements) answers in request order', async ({ service }) => {
  // 1000 = 7 statements of 128 and one each of 64, 32, 8; every third pet leaves its optional owner out.
  const body = Array.from({ length: 1000 }, (_, i) =>
    i % 3 === 0 ? { name: `Order ${i}`, species: 'dog' } : { name: `Order ${i}`, species: 'cat', ownerId: null },
  );
  const reply = await service.request('POST', '/pets', { body });
  assert.is(reply.status, 201, reply.text);
  assert.equal(
    reply.body.map((pet: Row) => pet.name),
    body.map((pet) => pet.name),
  );
  const ids = reply.body.map((pet: Row) => pet.id as number);
  assert.equal(
    ids,
    [...ids].sort((a, b) => a - b),
  );
  for (const i of [0, 127, 128, 500, 999]) {
    assert.equal((await service.request('GET', `/pets/${ids[i]}`)).body, reply.body[i]);
  }
});

bulk('a related path fixes the parent of every element; an element naming another is refused by index', async ({ service }) => {
  const owner = await created(service, '/users', userSample());
  const reply = await service.request('POST', `/users/${owner}/pets`, {
    body: [
      { name: 'One', species: 'dog' },
      { name: 'Two', species: 'cat', ownerId: owner },
    ],
  });
  assert.is(reply.status, 201, reply.text);
  assert.equal(
    reply.body.map((p: Row) => p.ownerId),
    [owner, owner],
  );
  const before = await total(service, '/pets');
  const other = await service.request('POST', `/users/${owner}/pets`, {
    body: [
      { name: 'Three', species: 'dog' },
      { name: 'Four', species: 'dog', ownerId: owner + 1000 },
    ],
  });
  assertRefused(other, 422, ['1/ownerId']);
  assert.is(await total(service, '/pets'), before);
});

bulk('a failing element leaves nothing behind: validation (422), a unique value (409), a reference (422)', async ({ service }) => {
  const before = await total(service, '/users');
  const invalid = users(4, 'Invalid') as Row[];
  invalid[2] = { name: 'no email' };
  assertRefused(await service.request('POST', '/users', { body: invalid }), 422, ['2/email']);

  const taken = users(4, 'Taken');
  (taken[3] as Row).email = (taken[1] as Row).email; // a duplicate within the array
  const duplicate = await service.request('POST', '/users', { body: taken });
  assertRefused(duplicate, 409, ['3/email']);
  assert.match(duplicate.body.detail, /^Element 3: /);

  const existing = (await service.request('GET', '/users?limit=1')).body[0] as Row;
  const clash = users(3, 'Clash');
  (clash[0] as Row).email = existing.email;
  assertRefused(await service.request('POST', '/users', { body: clash }), 409, ['0/email']);
  assert.is(await total(service, '/users'), before);

  const pet = await created(service, '/pets', { name: 'Rex', species: 'dog' });
  const orders = [
    { userId: existing.id, petId: pet },
    { userId: existing.id, petId: pet + 1000 },
  ];
  const ordersBefore = await total(service, '/orders');
  assertRefused(await service.request('POST', '/orders', { body: orders }), 422, ['1/petId']);
  assert.is(await total(service, '/orders'), ordersBefore);
});

bulk('the array holds 1 to 1000 objects', async ({ service }) => {
  const empty = await service.request('POST', '/users', { body: [] });
  assert.is(empty.status, 422, empty.text);
  assert.match(empty.body.detail, /1 to 1000 elements; this array holds 0/);
  const many = await service.request('POST', '/users', { body: users(1001, 'Many') });
  assert.is(many.status, 422, many.text);
  assert.match(many.body.detail, /holds 1001/);
  assertRefused(await service.request('POST', '/users', { body: [userSample(), 'text'] }), 422, ['1']);
  assertRefused(await service.request('POST', '/users', { body: [[userSample()]] }), 422, ['0']);
  const thousand = await service.request('POST', '/users', { body: users(1000, 'Thousand') });
  assert.is(thousand.status, 201, thousand.text);
  assert.is(thousand.body.length, 1000);
});

bulk('an array has its own body limit (MAX_BULK_BODY_BYTES); one element keeps MAX_BODY_BYTES', async ({ service }) => {
  // ~1.5 MB of names: past MAX_BODY_BYTES (1 MiB) but within this service's 3 MiB for arrays.
  const long = Array.from({ length: 300 }, (_, i) => ({ name: 'x'.repeat(5000), email: `long-${i}-${userSample().email}` }));
  const reply = await service.request('POST', '/users', { body: long });
  assert.is(reply.status, 201, reply.text);
  const object = await service.request('POST', '/users', { body: { name: 'x'.repeat(1_100_000), email: userSample().email } });
  assert.is(object.status, 413, object.text);
  const huge = Array.from({ length: 700 }, (_, i) => ({ name: 'x'.repeat(5000), email: `huge-${i}@example.com` }));
  assert.is((await service.request('POST', '/users', { body: huge })).status, 413);
  // An element is held to MAX_BODY_BYTES in an array too: what is created can be sent back with PUT.
  const before = await total(service, '/users');
  const oversized = [userSample(), { name: 'x'.repeat(1_100_000), email: userSample().email }];
  const refused = await service.request('POST', '/users', { body: oversized });
  assert.is(refused.status, 413, refused.text);
  assert.equal(refused.body.errors, [{ path: '1', message: `is larger than ${1024 * 1024} bytes` }]);
  const inBatch = await service.request('POST', '/_batch', { body: { operations: [{ method: 'POST', path: '/users', body: oversized }] } });
  assert.is(inBatch.status, 413, inBatch.text);
  assert.is(await total(service, '/users'), before);
});

bulk('an Idempotency-Key covers the whole array: replayed as it was, another array refused', async ({ service }) => {
  const body = users(3, 'Once');
  const headers = { 'Idempotency-Key': `bulk-${userSample().email}` };
  const first = await service.request('POST', '/users', { body, headers });
  assert.is(first.status, 201, first.text);
  const before = await total(service, '/users');
  const again = await service.request('POST', '/users', { body, headers });
  assert.is(again.status, 201, again.text);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.body, first.body);
  assert.is(await total(service, '/users'), before);
  const other = await service.request('POST', '/users', { body: users(3, 'Other'), headers });
  assert.is(other.status, 422, other.text);
  // The key is the request's, not an element's: no index in the detail or the paths.
  assert.not.match(other.body.detail, /^Element/);
  assert.equal(other.body.errors, undefined);
  assert.is(await total(service, '/users'), before);
});

bulk("a lone surrogate in an element is named by the element's index as every bulk refusal is (1/name)", async ({ service }) => {
  const raw = `[{"name":"Fine","email":"fine-${Date.now()}@example.com"},{"name":"\\ud800","email":"lone-${Date.now()}@example.com"},{"name":"\\udc00"}]`;
  const reply = await service.request('POST', '/users', { raw, headers: { 'content-type': 'application/json' } });
  assert.is(reply.status, 422, reply.text);
  // The first refused element's answer alone, prefixed: its detail and its errors, not those of the elements after it.
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    ['1/name'],
  );
  assert.match(reply.body.detail, /^Element 1: The request body holds text that is not well-formed Unicode/);
});

bulk("a value the engine cannot store is a 422 in the contract's words, never the engine's", async ({ service }) => {
  // PostgreSQL stores no NUL in text, and a unique index row holds ~2.7 kB; SQLite stores both.
  const nul = await service.request('POST', '/users', { body: [userSample(), { ...userSample(), name: 'nul\u0000' }] });
  const long = await service.request('POST', '/users', {
    body: { name: 'Long', email: `${randomBytes(2000).toString('hex')}@example.com` },
  });
  if (BACKEND === 'sqlite') {
    assert.is(nul.status, 201, nul.text);
    assert.is(long.status, 201, long.text);
    return;
  }
  assert.is(nul.status, 422, nul.text);
  assert.match(nul.body.detail, /^Element 1: The users element holds text PostgreSQL cannot store/);
  assert.is(long.status, 422, long.text.slice(0, 300));
  for (const reply of [nul, long]) assert.not.match(reply.text, /UTF8|encoding|btree|index row|users_email_unique|0x00/);
});

bulk.run();

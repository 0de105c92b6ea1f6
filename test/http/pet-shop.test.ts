// Behaviour of the pet shop (the tests' copy of the shipped schema) beyond the shared contract:
// uniqueness, references on write and delete, the service endpoints, unexpected failures.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { petSample, userSample } from '../support/fixtures.js';
import { type Service, startService } from '../support/helpers.js';

const test = suite<{ service: Service }>('pet shop');

test.before(async (ctx) => {
  ctx.service = await startService();
});
test.after(async ({ service }) => service.close());

test('a taken email is a 409 naming the field', async ({ service }) => {
  const user = userSample();
  assert.is((await service.request('POST', '/users', { body: user })).status, 201);
  const again = await service.request('POST', '/users', { body: { ...user, name: 'Other' } });
  assert.is(again.status, 409);
  assert.equal(again.body.errors, [{ path: 'email', message: 'is already taken' }]);
  const other = await service.request('POST', '/users', { body: userSample() });
  const patch = await service.request('PATCH', `/users/${other.body.id}`, { body: { email: user.email } });
  assert.is(patch.status, 409);
});

test('a reference to a missing element is a 422 naming the field', async ({ service }) => {
  const pet = await service.request('POST', '/pets', { body: { ...petSample(), ownerId: 424242 } });
  assert.is(pet.status, 422);
  assert.equal(pet.body.errors, [{ path: 'ownerId', message: 'names no users element' }]);
  const order = await service.request('POST', '/orders', { body: { userId: 424242, petId: 424243 } });
  assert.is(order.status, 422);
  assert.equal(
    order.body.errors.map((e: { path: string }) => e.path),
    ['userId', 'petId'],
  );
});

test("deleting a pet's owner sets its ownerId to null", async ({ service }) => {
  const owner = await service.request('POST', '/users', { body: userSample() });
  const pet = await service.request('POST', `/users/${owner.body.id}/pets`, { body: petSample() });
  assert.is((await service.request('DELETE', `/users/${owner.body.id}`)).status, 204);
  const after = await service.request('GET', `/pets/${pet.body.id}`);
  assert.is(after.status, 200);
  assert.is(after.body.ownerId, null);
});

test('deleting a user or pet that has orders is a 409, and both stay', async ({ service }) => {
  const user = await service.request('POST', '/users', { body: userSample() });
  const pet = await service.request('POST', '/pets', { body: petSample() });
  const order = await service.request('POST', '/orders', { body: { userId: user.body.id, petId: pet.body.id } });
  assert.is(order.status, 201);
  assert.is(order.body.status, 'placed');
  assert.is(order.body.quantity, 1);
  const blocked = await service.request('DELETE', `/users/${user.body.id}`);
  assert.is(blocked.status, 409);
  assert.match(blocked.body.detail, /orders \(userId\)/);
  assert.is((await service.request('DELETE', `/pets/${pet.body.id}`)).status, 409);
  assert.is((await service.request('GET', `/users/${user.body.id}`)).status, 200);
  assert.is((await service.request('DELETE', `/orders/${order.body.id}`)).status, 204);
  assert.is((await service.request('DELETE', `/users/${user.body.id}`)).status, 204);
});

test('PUT gives left-out fields their defaults', async ({ service }) => {
  const user = await service.request('POST', '/users', { body: userSample() });
  const pet = await service.request('POST', '/pets', { body: { ...petSample(), ownerId: user.body.id } });
  const order = await service.request('POST', '/orders', {
    body: { userId: user.body.id, petId: pet.body.id, status: 'approved', quantity: 3 },
  });
  const put = await service.request('PUT', `/orders/${order.body.id}`, { body: { userId: user.body.id, petId: pet.body.id } });
  assert.is(put.status, 200);
  assert.is(put.body.status, 'placed');
  assert.is(put.body.quantity, 1);
  const putPet = await service.request('PUT', `/pets/${pet.body.id}`, { body: petSample() });
  assert.is(putPet.body.ownerId, null);
});

test('an integer past 2^53 is one 422 error for its field, not one per check it fails', async ({ service }) => {
  const user = await service.request('POST', '/users', { body: userSample() });
  const pet = await service.request('POST', '/pets', { body: petSample() });
  const order = await service.request('POST', '/orders', { body: { userId: user.body.id, petId: pet.body.id } });
  for (const [method, path, body] of [
    ['PATCH', `/orders/${order.body.id}`, { quantity: 2 ** 53 }],
    ['POST', '/orders', { userId: user.body.id, petId: -(2 ** 53) - 2, quantity: 1e300 }],
  ] as const) {
    const reply = await service.request(method, path, { body });
    assert.is(reply.status, 422, reply.text);
    const paths = reply.body.errors.map((e: { path: string }) => e.path);
    assert.equal(paths, [...new Set(paths)], reply.text);
  }
});

test('an enum value outside the schema is a 422', async ({ service }) => {
  const reply = await service.request('POST', '/pets', { body: { name: 'Nemo', species: 'dragon' } });
  assert.is(reply.status, 422);
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    ['species'],
  );
});

test('GET / lists every resource kind with its collection path', async ({ service }) => {
  const reply = await service.request('GET', '/');
  assert.is(reply.status, 200);
  assert.equal(reply.body.resources, [
    { name: 'orders', href: '/orders' },
    { name: 'pets', href: '/pets' },
    { name: 'users', href: '/users' },
  ]);
  assert.equal(reply.body.links, {
    docs: '/docs',
    openapi: '/openapi.json',
    health: '/healthz',
    ready: '/readyz',
    batch: '/_batch',
    changes: '/_changes',
  });
});

test('/healthz and /readyz answer 200; other methods are 405', async ({ service }) => {
  assert.is((await service.request('GET', '/healthz')).status, 200);
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 200);
  assert.equal(ready.body, { status: 'ready' });
  const post = await service.request('POST', '/readyz', { body: {} });
  assert.is(post.status, 405);
  assert.is(post.headers.get('allow'), 'GET, HEAD, OPTIONS');
});

test('a path that matches no route is a 404 problem (paths are case-sensitive)', async ({ service }) => {
  for (const path of ['/nope', '/Users', '/users/1/nope', '/users/1/pets/2', '//users', '/orders/1/pets']) {
    const reply = await service.request('GET', path);
    assert.is(reply.status, 404, path);
    assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  }
});

test('a 404 names the id as the client meant it: percent-decoded, or as sent when it cannot be', async ({ service }) => {
  for (const [method, path, shown] of [
    ['GET', '/users/%39%39%39%39', '9999'],
    ['POST', '/users/%39%39%39%39/pets', '9999'],
    ['GET', '/users/abc%20d', 'abc d'],
    ['GET', '/users/%ZZ', '%ZZ'],
  ] as const) {
    const reply = await service.request(method, path, { body: method === 'POST' ? petSample() : undefined });
    assert.is(reply.status, 404, path);
    assert.ok(reply.body.detail.includes(`with id "${shown}"`), `${path}: ${reply.body.detail}`);
  }
});

test.run();

const failures = suite<{ service: Service }>('unexpected failures');

failures.before(async (ctx) => {
  ctx.service = await startService();
});
failures.after(async ({ service }) => service.close());

failures('a closed database makes /readyz 503 and requests a generic, logged 500', async ({ service }) => {
  service.database.sqlite.close();
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 503);
  assert.is(ready.headers.get('retry-after'), '1');
  assert.match(ready.body.detail, /database is closed/);
  const reply = await service.request('GET', '/users');
  assert.is(reply.status, 500);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(Object.keys(reply.body).sort(), ['code', 'detail', 'instance', 'status', 'title', 'type']);
  assert.not.match(reply.text, /database connection|at |\.ts|\.js/);
  const logged = service.logs.find((line) => line.level === 50 && line.err);
  assert.ok(logged, 'the failure is logged');
  assert.match(logged?.err?.message ?? '', /database connection is not open/);
  assert.is(logged?.path, '/users');
  const line = service.logs.find((l) => l.msg === 'GET /users 500');
  assert.is(line?.level, 50);
  assert.equal(line?.req, { method: 'GET', path: '/users' });
  assert.is(line?.requestId, reply.headers.get('x-request-id'));
  assert.type(line?.durationMs, 'number');
  assert.is(service.logs.find((l) => l.msg === 'GET /readyz 503')?.level, 40);
});

failures.run();

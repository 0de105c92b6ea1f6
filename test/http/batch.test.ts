// POST /_batch (API.md §7): 1–100 operations on resource paths run in order in one transaction, all or
// nothing. Each result is what its operation answers alone (status, its ETag/Location/Link/X-Total-Count,
// body); the first operation answering ≥ 400 rolls everything back and its problem, with the operation's
// index, is the batch's answer. Labels and {"$ref"} name elements created earlier in the batch; a malformed
// envelope is a 400 before anything runs. Runs on both backends.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_ECHOED_LENGTH } from '../../src/errors.js';
import { created, userSample } from '../support/fixtures.js';
import type { Reply, Service } from '../support/helpers.js';
import { startService } from '../support/helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Row = Record<string, any>;

interface Operation {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, unknown>;
  label?: unknown;
}

interface Result {
  status: number;
  headers: Record<string, string>;
  body: any;
}

/** The headers an operation's result carries when its answer alone does, as the result spells them. */
const RESULT_HEADERS = ['ETag', 'Location', 'Link', 'X-Total-Count'] as const;

/** Sends a batch of `operations` (anything else as the whole body with `raw`). */
const batch = (service: Service, operations: unknown[], headers?: Record<string, string>) =>
  service.request('POST', '/_batch', { body: { operations }, headers });

/** A standalone answer as a batch result would give it: its status, its result headers, its JSON body (null for none). */
function asResult(reply: Reply): Result {
  const headers: Record<string, string> = {};
  for (const name of RESULT_HEADERS) {
    const value = reply.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  return { status: reply.status, headers, body: reply.body ?? null };
}

/** What `method path` answers alone right now, as a batch result. */
async function alone(service: Service, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}) {
  return asResult(await service.request(method, path, options));
}

/** The results of a batch that must have succeeded: 200 with one result per operation. */
function resultsOf(reply: Reply, count: number): Result[] {
  assert.is(reply.status, 200, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(Object.keys(reply.body), ['results']);
  assert.is(reply.body.results.length, count);
  for (const result of reply.body.results as Result[]) {
    assert.equal(Object.keys(result).sort(), ['body', 'headers', 'status']);
    for (const name of Object.keys(result.headers))
      assert.ok((RESULT_HEADERS as readonly string[]).includes(name), `result header ${name}`);
  }
  return reply.body.results;
}

/** A batch refused by its operation `index`: the batch answers that operation's own problem plus `operation`. */
function assertFailedAt(reply: Reply, index: number, problem: Result): void {
  assert.ok(problem.status >= 400, `the standalone answer is a failure: ${JSON.stringify(problem)}`);
  assert.is(reply.status, problem.status, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(reply.body, { ...problem.body, operation: index });
}

/** A malformed batch: 400 problem whose `errors` paths are `paths` exactly. */
function assertMalformed(reply: Reply, paths: string[]): void {
  assert.is(reply.status, 400, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.body.status, 400);
  assert.type(reply.body.title, 'string');
  assert.type(reply.body.detail, 'string');
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    paths,
    reply.text,
  );
  for (const error of reply.body.errors) assert.type(error.message, 'string');
}

/** A malformed batch whose every error lies under `prefix` (where the spec leaves the exact member open). */
function assertMalformedUnder(reply: Reply, prefix: string): void {
  assert.is(reply.status, 400, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.ok(Array.isArray(reply.body.errors) && reply.body.errors.length > 0, reply.text);
  for (const error of reply.body.errors) {
    assert.ok(error.path === prefix || error.path.startsWith(`${prefix}/`), `${error.path} is under ${prefix}: ${reply.text}`);
    assert.type(error.message, 'string');
  }
}

/** The rows matching `path`'s filters, by `count=true`'s X-Total-Count. */
async function total(service: Service, path: string): Promise<number> {
  const reply = await service.request('GET', `${path}${path.includes('?') ? '&' : '?'}count=true&limit=1`);
  assert.is(reply.status, 200, reply.text);
  return Number(reply.headers.get('x-total-count'));
}

/** How many rows of each pet-shop table there are. */
const totals = async (service: Service) => ({
  users: await total(service, '/users'),
  pets: await total(service, '/pets'),
  orders: await total(service, '/orders'),
});

/** Whether a user with this email exists. */
const userWithEmail = async (service: Service, email: string) => (await total(service, `/users?email=${encodeURIComponent(email)}`)) > 0;

const newUser = (name = 'Ada') => ({ ...userSample(), name });

// ---------------------------------------------------------------------------------------------------------

const results = suite<{ service: Service }>('batch: each result is what the operation answers alone');

results.before(async (ctx) => {
  ctx.service = await startService();
});

results.after(async (ctx) => ctx.service?.close());

results('reads: element, list with Link and X-Total-Count, related list; each equals the standalone answer', async ({ service }) => {
  const owner = await created(service, '/users', newUser());
  for (let i = 0; i < 3; i++) await created(service, '/users', newUser()); // more users than a page of 2
  for (let i = 0; i < 3; i++) await created(service, `/users/${owner}/pets`, { name: `Pet ${i}`, species: 'cat' });
  const paths = [
    `/users/${owner}`,
    '/users?limit=2&count=true',
    `/users/${owner}/pets?count=true`,
    `/users/${owner}/pets?limit=1`,
    '/pets',
  ];
  const reply = await batch(
    service,
    paths.map((path) => ({ method: 'GET', path })),
  );
  const got = resultsOf(reply, paths.length);
  for (const [i, path] of paths.entries()) assert.equal(got[i], await alone(service, 'GET', path), path);
  // The shapes the standalone answers have, spelled as the spec spells them.
  assert.equal(Object.keys(got[0]?.headers ?? {}), ['ETag']);
  assert.equal(Object.keys(got[1]?.headers ?? {}).sort(), ['Link', 'X-Total-Count']);
  assert.is(got[2]?.headers['X-Total-Count'], '3');
  assert.is(got[2]?.body.length, 3);
  assert.equal(Object.keys(got[3]?.headers ?? {}), ['Link']);
});

results('writes: POST 201 with Location and ETag, PATCH and PUT 200 with ETag, DELETE 204; all kept, as alone', async ({ service }) => {
  const patched = await created(service, '/users', newUser());
  const replaced = await created(service, '/users', newUser());
  const deleted = await created(service, '/users', newUser());
  const fresh = newUser('Fresh');
  const replacement = newUser('Replaced');
  const before = await totals(service);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: fresh },
    { method: 'PATCH', path: `/users/${patched}`, body: { name: 'Patched' } },
    { method: 'PUT', path: `/users/${replaced}`, body: replacement },
    { method: 'DELETE', path: `/users/${deleted}` },
  ]);
  const [post, patch, put, del] = resultsOf(reply, 4) as [Result, Result, Result, Result];

  assert.is(post.status, 201);
  assert.equal(Object.keys(post.headers).sort(), ['ETag', 'Location']);
  assert.is(post.body.name, 'Fresh');
  assert.is(post.body.email, fresh.email);
  assert.is(post.headers.Location, `/users/${post.body.id}`);
  assert.equal(await alone(service, 'GET', `/users/${post.body.id}`), {
    status: 200,
    headers: { ETag: post.headers.ETag },
    body: post.body,
  });

  assert.is(patch.status, 200);
  assert.is(patch.body.name, 'Patched');
  assert.equal(await alone(service, 'GET', `/users/${patched}`), patch);

  assert.is(put.status, 200);
  assert.is(put.body.name, 'Replaced');
  assert.is(put.body.email, replacement.email);
  assert.equal(await alone(service, 'GET', `/users/${replaced}`), put);

  assert.equal(del, { status: 204, headers: {}, body: null });
  assert.is((await service.request('GET', `/users/${deleted}`)).status, 404);

  assert.equal(await totals(service), before); // one user created, one deleted
});

results('a bulk create (an array body) is one operation: 201 with the created array, as alone', async ({ service }) => {
  const owner = await created(service, '/users', newUser());
  const pets = [
    { name: 'One', species: 'dog' },
    { name: 'Two', species: 'bird' },
    { name: 'Three', species: 'fish' },
  ];
  const before = await total(service, '/pets');
  const reply = await batch(service, [
    { method: 'POST', path: `/users/${owner}/pets`, body: pets },
    { method: 'GET', path: `/users/${owner}/pets?count=true` },
  ]);
  const [bulk, list] = resultsOf(reply, 2) as [Result, Result];
  assert.is(bulk.status, 201);
  // A bulk create answers no Location (nor anything else among the result headers) alone.
  const standalone = asResult(await service.request('POST', '/users', { body: [newUser()] }));
  assert.is(standalone.status, 201);
  assert.equal(bulk.headers, standalone.headers);
  assert.equal(
    bulk.body.map((p: Row) => [p.name, p.species, p.ownerId]),
    pets.map((p) => [p.name, p.species, owner]),
  );
  assert.equal(list.body, bulk.body);
  assert.is(list.headers['X-Total-Count'], '3');
  assert.is(await total(service, '/pets'), before + 3);
  for (const pet of bulk.body) assert.equal((await service.request('GET', `/pets/${pet.id}`)).body, pet);
});

results('reads see the batch’s earlier writes, including what a delete does to related rows', async ({ service }) => {
  const user = await created(service, '/users', newUser('Before'));
  const reply = await batch(service, [
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'During' } },
    { method: 'GET', path: `/users/${user}` },
    { method: 'POST', path: '/users', body: newUser('Owner'), label: 'owner' },
    { method: 'POST', path: '/pets', body: { name: 'Orphan', species: 'cat', ownerId: { $ref: 'owner' } }, label: 'pet' },
    { method: 'GET', path: '/pets/{pet}' },
    { method: 'DELETE', path: '/users/{owner}' },
    { method: 'GET', path: '/pets/{pet}' },
  ]);
  const [patch, read, owner, pet, petRead, del, orphan] = resultsOf(reply, 7) as [Result, Result, Result, Result, Result, Result, Result];
  assert.equal(read, patch);
  assert.is(read.body.name, 'During');
  assert.equal(petRead, { status: 200, headers: { ETag: pet.headers.ETag as string }, body: pet.body });
  assert.is(pet.body.ownerId, owner.body.id);
  assert.equal(del, { status: 204, headers: {}, body: null });
  assert.is(orphan.status, 200);
  assert.is(orphan.body.ownerId, null); // set null on delete, already inside the batch
  assert.equal(await alone(service, 'GET', `/users/${user}`), read);
  assert.equal(await alone(service, 'GET', `/pets/${pet.body.id}`), orphan);
  assert.is((await service.request('GET', `/users/${owner.body.id}`)).status, 404);
});

results('labels: {label} in paths and {"$ref": label} in bodies stand for the created element’s key', async ({ service }) => {
  const owner = newUser('Owner');
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: owner, label: 'owner' },
    { method: 'POST', path: '/users/{owner}/pets', body: { name: 'Rex', species: 'dog' }, label: 'rex' },
    { method: 'POST', path: '/pets', body: { name: 'Tom', species: 'cat', ownerId: { $ref: 'owner' } } },
    { method: 'POST', path: '/orders', body: { userId: { $ref: 'owner' }, petId: { $ref: 'rex' }, quantity: 2 } },
    { method: 'GET', path: '/users/{owner}' },
    { method: 'GET', path: '/users/{owner}/pets?count=true' },
    { method: 'PATCH', path: '/users/{owner}', body: { name: 'Renamed' } },
    { method: 'GET', path: '/users/{owner}' },
    { method: 'GET', path: '/pets/{rex}' },
  ]);
  const [user, rex, tom, order, read, pets, patch, reread, rexRead] = resultsOf(reply, 9) as [
    Result,
    Result,
    Result,
    Result,
    Result,
    Result,
    Result,
    Result,
    Result,
  ];
  const id = user.body.id;
  assert.is(user.status, 201);
  assert.is(user.body.email, owner.email);
  assert.is(user.headers.Location, `/users/${id}`);
  assert.is(rex.status, 201);
  assert.is(rex.body.ownerId, id);
  assert.is(rex.headers.Location, `/pets/${rex.body.id}`);
  assert.is(tom.status, 201);
  assert.is(tom.body.ownerId, id);
  assert.is(order.status, 201);
  assert.is(order.body.userId, id);
  assert.is(order.body.petId, rex.body.id);
  assert.is(order.body.quantity, 2);
  assert.equal(read, { status: 200, headers: { ETag: user.headers.ETag as string }, body: user.body });
  assert.equal(
    pets.body.map((p: Row) => p.id),
    [rex.body.id, tom.body.id],
  );
  assert.is(pets.headers['X-Total-Count'], '2');
  assert.is(patch.body.name, 'Renamed');
  assert.equal(reread, patch);
  assert.equal(rexRead, { status: 200, headers: { ETag: rex.headers.ETag as string }, body: rex.body });

  // Kept, and read alone the same.
  assert.equal(await alone(service, 'GET', `/users/${id}`), reread);
  assert.equal(await alone(service, 'GET', `/users/${id}/pets?count=true`), pets);
  assert.equal(await alone(service, 'GET', `/pets/${rex.body.id}`), rexRead);
  assert.equal((await service.request('GET', `/orders/${order.body.id}`)).body, order.body);
});

results('labels as long and as varied as allowed: 64 characters, letters, digits, _ and -', async ({ service }) => {
  const long = `L${'a'.repeat(63)}`;
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: newUser(), label: long },
    { method: 'POST', path: '/users', body: newUser(), label: 'A_b-9' },
    { method: 'GET', path: `/users/{${long}}` },
    { method: 'POST', path: '/pets', body: { name: 'Rex', species: 'dog', ownerId: { $ref: 'A_b-9' } } },
  ]);
  const [first, second, read, pet] = resultsOf(reply, 4) as [Result, Result, Result, Result];
  assert.is(read.body.id, first.body.id);
  assert.is(pet.body.ownerId, second.body.id);
});

results('operation headers: If-Match that matches writes, If-None-Match that matches answers 304', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const other = await created(service, '/users', newUser());
  const etag = (await service.request('GET', `/users/${user}`)).headers.get('etag') as string;
  const otherEtag = (await service.request('GET', `/users/${other}`)).headers.get('etag') as string;
  const notModified = await alone(service, 'GET', `/users/${user}`, { headers: { 'If-None-Match': etag } });
  assert.is(notModified.status, 304);
  const reply = await batch(service, [
    { method: 'GET', path: `/users/${user}`, headers: { 'If-None-Match': etag } },
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Matched' }, headers: { 'If-Match': etag } },
    { method: 'DELETE', path: `/users/${other}`, headers: { 'If-Match': otherEtag } },
  ]);
  const [get, patch, del] = resultsOf(reply, 3) as [Result, Result, Result];
  assert.equal(get, notModified);
  assert.equal(get, { status: 304, headers: { ETag: etag }, body: null });
  assert.is(patch.status, 200);
  assert.is(patch.body.name, 'Matched');
  assert.is.not(patch.headers.ETag, etag);
  assert.equal(del, { status: 204, headers: {}, body: null });
  assert.equal(await alone(service, 'GET', `/users/${user}`), patch);
  assert.is((await service.request('GET', `/users/${other}`)).status, 404);
});

results('operation headers: a Content-Type the request takes alone, in any letter case, is taken as alone', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const pet = await created(service, '/pets', { name: 'Rex', species: 'dog', ownerId: user });
  const reply = await batch(service, [
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Merged' }, headers: { 'content-type': 'application/merge-patch+json' } },
    {
      method: 'PATCH',
      path: `/pets/${pet}`,
      body: { name: 'Max' },
      headers: { 'Content-Type': 'application/merge-patch+json; charset=UTF-8' },
    },
    {
      method: 'PUT',
      path: `/pets/${pet}`,
      body: { name: 'Rex', species: 'cat' },
      headers: { 'CONTENT-TYPE': 'application/json; charset=utf-8' },
    },
    { method: 'POST', path: '/users', body: newUser('Typed'), headers: { 'Content-Type': 'Application/JSON' } },
    // A GET reads no body: its Content-Type means nothing, alone as in a batch.
    { method: 'GET', path: `/users/${user}`, headers: { 'content-type': 'text/plain' } },
  ]);
  const [patchUser, patchPet, put, post, get] = resultsOf(reply, 5) as Result[];
  assert.is(patchUser?.status, 200);
  assert.is(patchUser?.body.name, 'Merged');
  assert.is(patchPet?.body.name, 'Max');
  assert.equal([put?.status, put?.body.species], [200, 'cat']);
  assert.is(post?.status, 201);
  assert.equal(get, await alone(service, 'GET', `/users/${user}`));
  assert.equal(await alone(service, 'GET', `/pets/${pet}`), { ...put, headers: { ETag: put?.headers.ETag as string } });
});

results('100 operations are allowed', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const reply = await batch(
    service,
    Array.from({ length: 100 }, () => ({ method: 'GET', path: `/users/${user}` })),
  );
  const got = resultsOf(reply, 100);
  const expected = await alone(service, 'GET', `/users/${user}`);
  for (const result of got) assert.equal(result, expected);
});

results('GET /_batch is a 405 naming POST, OPTIONS; OPTIONS /_batch is a 204 with that Allow', async ({ service }) => {
  const get = await service.request('GET', '/_batch');
  assert.is(get.status, 405, get.text);
  assert.is(get.headers.get('allow'), 'POST, OPTIONS');
  assert.match(get.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(get.body.status, 405);
  const options = await service.request('OPTIONS', '/_batch');
  assert.is(options.status, 204, options.text);
  assert.is(options.headers.get('allow'), 'POST, OPTIONS');
  assert.is(options.text, '');
});

results('{label} alone in a segment, a key part or a query value', async ({ service }) => {
  const answer = await batch(service, [
    { method: 'POST', path: '/users', body: newUser(), label: 'u1' },
    { method: 'GET', path: '/users/{u1}' },
    { method: 'GET', path: '/pets?ownerId={u1}&limit=1' },
    { method: 'GET', path: '/pets?ownerId[in]=0,{u1}' },
    { method: 'DELETE', path: '/users/{u1}' },
  ]);
  assert.is(answer.status, 200, answer.text);
  assert.equal(
    answer.body.results.map((r: { status: number }) => r.status),
    [201, 200, 200, 200, 204],
  );
});

results.run();

// ---------------------------------------------------------------------------------------------------------

const rollback = suite<{ service: Service }>('batch: the first failing operation rolls everything back');

rollback.before(async (ctx) => {
  ctx.service = await startService();
});

rollback.after(async (ctx) => ctx.service?.close());

rollback('a missing element (404) after writes: its problem with `operation`, and none of the writes kept', async ({ service }) => {
  const user = await created(service, '/users', newUser('Unchanged'));
  const original = await alone(service, 'GET', `/users/${user}`);
  const fresh = newUser();
  const before = await totals(service);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: fresh, label: 'u1' },
    { method: 'POST', path: '/users/{u1}/pets', body: { name: 'Rex', species: 'dog' } },
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Changed' } },
    { method: 'GET', path: '/users/999999' },
    { method: 'DELETE', path: `/users/${user}` },
  ]);
  assertFailedAt(reply, 3, await alone(service, 'GET', '/users/999999'));
  assert.equal(await totals(service), before);
  assert.is(await userWithEmail(service, fresh.email), false);
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
  // The rolled-back email is free again.
  assert.is((await service.request('POST', '/users', { body: fresh })).status, 201);
});

rollback('a DELETE then a read of the deleted element: 404 at the read, the element still there', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const original = await alone(service, 'GET', `/users/${user}`);
  const reply = await batch(service, [
    { method: 'DELETE', path: `/users/${user}` },
    { method: 'GET', path: `/users/${user}` },
  ]);
  assert.is(reply.status, 404, reply.text);
  assert.is(reply.body.operation, 1);
  assert.is(reply.body.instance, `/users/${user}`);
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
});

rollback('a unique value (409), also one the batch itself wrote first', async ({ service }) => {
  const existing = newUser();
  await created(service, '/users', existing);
  const conflict = await alone(service, 'POST', '/users', { body: { name: 'Clash', email: existing.email } });
  assert.is(conflict.status, 409);
  const before = await totals(service);

  const fresh = newUser();
  const clash = await batch(service, [
    { method: 'POST', path: '/users', body: fresh },
    { method: 'POST', path: '/users', body: { name: 'Clash', email: existing.email } },
  ]);
  assertFailedAt(clash, 1, conflict);
  assert.is(await userWithEmail(service, fresh.email), false);

  const twice = newUser();
  const within = await batch(service, [
    { method: 'POST', path: '/pets', body: { name: 'Rex', species: 'dog' } },
    { method: 'POST', path: '/users', body: twice },
    { method: 'POST', path: '/users', body: { name: 'Clash', email: twice.email } },
  ]);
  assertFailedAt(within, 2, conflict);
  assert.is(await userWithEmail(service, twice.email), false);
  assert.equal(await totals(service), before);
});

rollback('validation (422) and a reference to a missing element (422)', async ({ service }) => {
  const owner = await created(service, '/users', newUser());
  const before = await totals(service);
  const invalid = await alone(service, 'POST', '/users', { body: { name: 'No email' } });
  assert.is(invalid.status, 422);
  const first = newUser();
  assertFailedAt(
    await batch(service, [
      { method: 'POST', path: '/users', body: first },
      { method: 'POST', path: '/users', body: { name: 'No email' } },
    ]),
    1,
    invalid,
  );
  assert.is(await userWithEmail(service, first.email), false);

  const order = { userId: owner, petId: 999999 };
  const dangling = await alone(service, 'POST', '/orders', { body: order });
  assert.is(dangling.status, 422);
  const second = newUser();
  assertFailedAt(
    await batch(service, [
      { method: 'POST', path: '/users', body: second, label: 'u' },
      { method: 'POST', path: '/users/{u}/pets', body: { name: 'Rex', species: 'dog' }, label: 'p' },
      { method: 'POST', path: '/orders', body: { userId: { $ref: 'u' }, petId: { $ref: 'p' } } },
      { method: 'POST', path: '/orders', body: order },
    ]),
    3,
    dangling,
  );
  assert.is(await userWithEmail(service, second.email), false);
  assert.equal(await totals(service), before);
});

rollback('a write naming two missing parents names both, alone, in a bulk, in a PATCH and in a batch', async ({ service }) => {
  const owner = await created(service, '/users', newUser());
  const pet = await created(service, `/users/${owner}/pets`, { name: 'Rex', species: 'dog' });
  const both = { userId: 999998, petId: 999999 };
  const paths = (reply: { body: any }) => reply.body.errors?.map((e: { path: string }) => e.path);
  const alone422 = await alone(service, 'POST', '/orders', { body: both });
  assert.is(alone422.status, 422);
  assert.equal(paths(alone422), ['userId', 'petId']);
  const bulk = await alone(service, 'POST', '/orders', { body: [{ userId: owner, petId: pet }, both] });
  assert.is(bulk.status, 422);
  assert.equal(paths(bulk), ['1/userId', '1/petId']);
  const order = await created(service, '/orders', { userId: owner, petId: pet });
  const patch = await alone(service, 'PATCH', `/orders/${order}`, { body: both });
  assert.equal(paths(patch), ['userId', 'petId']);
  // Only the parent that is missing inside the batch is named: the user it created first is there.
  const failed = await batch(service, [
    { method: 'POST', path: '/users', body: newUser(), label: 'u' },
    { method: 'POST', path: '/orders', body: { userId: { $ref: 'u' }, petId: 999999 } },
  ]);
  assert.is(failed.status, 422);
  assert.is(failed.body.operation, 1);
  assert.equal(paths(failed), ['petId']);
  const twice = await batch(service, [{ method: 'POST', path: '/orders', body: both }]);
  assert.equal(paths(twice), ['userId', 'petId']);
});

rollback('If-Match that does not match (412): its problem with `operation`', async ({ service }) => {
  const user = await created(service, '/users', newUser('Kept'));
  const original = await alone(service, 'GET', `/users/${user}`);
  const stale = { 'If-Match': '"not-the-etag"' };
  const failed = await alone(service, 'PATCH', `/users/${user}`, { body: { name: 'Lost' }, headers: stale });
  assert.is(failed.status, 412);
  const fresh = newUser();
  const before = await totals(service);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: fresh },
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Lost' }, headers: stale },
  ]);
  assertFailedAt(reply, 1, failed);
  assert.equal(await totals(service), before);
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
  assert.is(await userWithEmail(service, fresh.email), false);

  const del = await batch(service, [{ method: 'DELETE', path: `/users/${user}`, headers: stale }]);
  assert.is(del.status, 412, del.text);
  assert.is(del.body.operation, 0);
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
});

rollback('a Content-Type the operation does not take alone is its 415, with `operation`, and nothing is kept', async ({ service }) => {
  const user = await created(service, '/users', newUser('Kept'));
  const original = await alone(service, 'GET', `/users/${user}`);
  const cases: [string, string, unknown][] = [
    ['PATCH', 'text/plain', { name: 'Lost' }],
    ['PATCH', 'application/json; charset=latin1', { name: 'Lost' }],
    ['PUT', 'application/merge-patch+json', newUser('Lost')],
    ['POST', 'application/merge-patch+json', newUser('Lost')],
    ['PATCH', 'not a type', { name: 'Lost' }],
  ];
  for (const [method, type, body] of cases) {
    const path = method === 'POST' ? '/users' : `/users/${user}`;
    const refused = await alone(service, method, path, { body, headers: { 'content-type': type } });
    assert.is(refused.status, 415, `${method} ${type}`);
    const before = await totals(service);
    const reply = await batch(service, [
      { method: 'POST', path: '/users', body: newUser() },
      { method, path, body, headers: { 'Content-Type': type } },
    ]);
    assertFailedAt(reply, 1, refused);
    assert.equal(await totals(service), before);
  }
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
});

rollback('an ETag read before the batch no longer matches after the batch’s own change: 412 at operation 1', async ({ service }) => {
  const user = await created(service, '/users', newUser('Original'));
  const original = await alone(service, 'GET', `/users/${user}`);
  const etag = original.headers.ETag as string;
  const reply = await batch(service, [
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'First' }, headers: { 'If-Match': etag } },
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Second' }, headers: { 'If-Match': etag } },
  ]);
  assert.is(reply.status, 412, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.body.status, 412);
  assert.is(reply.body.operation, 1);
  assert.is(reply.body.instance, `/users/${user}`);
  assert.equal(await alone(service, 'GET', `/users/${user}`), original);
});

rollback('a method the path does not define (405) is a failure like any other', async ({ service }) => {
  const notAllowed = await alone(service, 'DELETE', '/users');
  assert.is(notAllowed.status, 405);
  const fresh = newUser();
  const before = await totals(service);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: fresh },
    { method: 'DELETE', path: '/users' },
  ]);
  assertFailedAt(reply, 1, notAllowed);
  assert.equal(await totals(service), before);
  assert.is(await userWithEmail(service, fresh.email), false);
});

rollback('an operation answering 400 (a bad query) is a failure with `operation` too', async ({ service }) => {
  const bad = await alone(service, 'GET', '/users?limit=0');
  assert.is(bad.status, 400);
  const fresh = newUser();
  const before = await totals(service);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: fresh },
    { method: 'GET', path: '/users?limit=2' },
    { method: 'GET', path: '/users?limit=0' },
  ]);
  assertFailedAt(reply, 2, bad);
  assert.equal(await totals(service), before);
  assert.is(await userWithEmail(service, fresh.email), false);
});

rollback('the first failure is the answer: later operations do not run', async ({ service }) => {
  const missing = await alone(service, 'GET', '/pets/999998');
  const reply = await batch(service, [
    { method: 'GET', path: '/pets/999998' },
    { method: 'DELETE', path: '/users' },
    { method: 'GET', path: '/users/999999' },
  ]);
  assertFailedAt(reply, 0, missing);
});

rollback.run();

// ---------------------------------------------------------------------------------------------------------

const envelope = suite<{ service: Service; before: { users: number; pets: number; orders: number } }>(
  'batch: a malformed envelope is a 400 before anything runs',
);

envelope.before(async (ctx) => {
  ctx.service = await startService();
  await created(ctx.service, '/users', newUser());
  ctx.before = await totals(ctx.service);
});

/** Every case below puts a valid POST first: it must never run. */
envelope.after.each(async ({ service, before }) => {
  assert.equal(await totals(service), before);
});

envelope.after(async (ctx) => ctx.service?.close());

/** A valid operation that would create a user, put before the bad one. */
const creating = (): Operation => ({ method: 'POST', path: '/users', body: newUser() });

envelope('a body that is not an object, or not JSON', async ({ service }) => {
  for (const body of [[], [creating()], 'operations', 42, null, true]) {
    const reply = await service.request('POST', '/_batch', { body });
    assert.is(reply.status, 400, `${JSON.stringify(body)}: ${reply.text}`);
    assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.ok(Array.isArray(reply.body.errors) && reply.body.errors.length > 0, reply.text);
  }
  const raw = await service.request('POST', '/_batch', { raw: '{"operations": [', headers: { 'content-type': 'application/json' } });
  assert.is(raw.status, 400, raw.text);
  assert.match(raw.headers.get('content-type') ?? '', /^application\/problem\+json/);
});

envelope('no operations, an empty list, not a list, more than 100', async ({ service }) => {
  assertMalformed(await service.request('POST', '/_batch', { body: {} }), ['operations']);
  assertMalformed(await batch(service, []), ['operations']);
  assertMalformed(await service.request('POST', '/_batch', { body: { operations: 'all' } }), ['operations']);
  assertMalformed(await service.request('POST', '/_batch', { body: { operations: { 0: creating() } } }), ['operations']);
  assertMalformed(await service.request('POST', '/_batch', { body: { operations: null } }), ['operations']);
  const many = [creating(), ...Array.from({ length: 100 }, () => ({ method: 'GET', path: '/users' }))];
  assertMalformed(await batch(service, many), ['operations']);
});

envelope('an operation that is not an object', async ({ service }) => {
  for (const op of [null, 'GET /users', 7, [{ method: 'GET', path: '/users' }]]) {
    assertMalformedUnder(await batch(service, [creating(), op]), 'operations/1');
  }
});

envelope('an unknown member of an operation', async ({ service }) => {
  assertMalformed(await batch(service, [creating(), { method: 'GET', path: '/users', query: 'limit=1' }]), ['operations/1/query']);
  assertMalformed(await batch(service, [creating(), { method: 'GET', path: '/users', id: 1 }]), ['operations/1/id']);
});

envelope('a method that is not GET, POST, PUT, PATCH or DELETE (exactly so spelled)', async ({ service }) => {
  for (const method of ['OPTIONS', 'HEAD', 'TRACE', 'CONNECT', 'get', 'Post', '', 5, null]) {
    assertMalformed(await batch(service, [creating(), { method, path: '/users' }]), ['operations/1/method']);
  }
  assertMalformed(await batch(service, [creating(), { path: '/users' }]), ['operations/1/method']);
});

envelope('a path that is not a string', async ({ service }) => {
  for (const path of [5, null, true, ['/users'], { href: '/users' }]) {
    assertMalformed(await batch(service, [creating(), { method: 'GET', path }]), ['operations/1/path']);
  }
  assertMalformed(await batch(service, [creating(), { method: 'GET' }]), ['operations/1/path']);
});

envelope('a path outside the resources, or a nested batch', async ({ service }) => {
  for (const path of ['/', '/healthz', '/openapi.json', '/docs', '/nope', '/nope/1', 'users', '', '/_batch']) {
    assertMalformed(await batch(service, [creating(), { method: 'GET', path }]), ['operations/1/path']);
  }
  assertMalformed(await batch(service, [creating(), { method: 'POST', path: '/_batch', body: { operations: [creating()] } }]), [
    'operations/1/path',
  ]);
});

envelope('a body on GET or DELETE', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const before = await totals(service);
  assertMalformed(await batch(service, [creating(), { method: 'GET', path: `/users/${user}`, body: {} }]), ['operations/1/body']);
  assertMalformed(await batch(service, [creating(), { method: 'DELETE', path: `/users/${user}`, body: { id: user } }]), [
    'operations/1/body',
  ]);
  assert.equal(await totals(service), before);
  assert.is((await service.request('GET', `/users/${user}`)).status, 200);
  await service.request('DELETE', `/users/${user}`); // back to the suite's totals
});

envelope('operation headers: an object of strings, If-Match, If-None-Match or Content-Type only', async ({ service }) => {
  for (const headers of ['If-Match: "x"', ['If-Match', '"x"'], null, 5]) {
    assertMalformedUnder(await batch(service, [creating(), { method: 'GET', path: '/users', headers }]), 'operations/1/headers');
  }
  for (const headers of [{ 'If-Match': 5 }, { 'If-None-Match': ['"x"'] }, { 'If-Match': null }]) {
    assertMalformedUnder(
      await batch(service, [creating(), { method: 'PATCH', path: '/users/1', body: {}, headers }]),
      'operations/1/headers',
    );
  }
  for (const name of ['X-Custom', 'Idempotency-Key', 'Content-Encoding', 'Authorization', 'Prefer', 'Accept']) {
    assertMalformedUnder(
      await batch(service, [creating(), { method: 'GET', path: '/users', headers: { [name]: 'value' } }]),
      'operations/1/headers',
    );
  }
});

envelope('text no request could carry alone: a lone surrogate in a path, a control character in a header value', async ({ service }) => {
  // Sent as JSON escapes: alone, such a target or header could not be sent at all (it is no UTF-8, no header line).
  const raw = (operation: string) =>
    service.request('POST', '/_batch', { raw: `{"operations":[${operation}]}`, headers: { 'content-type': 'application/json' } });
  assertMalformed(await raw('{"method":"GET","path":"/users?name=\\ud800"}'), ['operations/0/path']);
  assertMalformed(await raw('{"method":"GET","path":"/users/\\udfff"}'), ['operations/0/path']);
  // A space or a character beyond ASCII: alone, a request-target carries them percent-encoded only.
  for (const path of ['/users/1 ', '/users/é', '/users?name=a b', '/users?name=\\u00e9', '/users/\\ud83d\\ude00']) {
    assertMalformed(await raw(`{"method":"GET","path":"${path}"}`), ['operations/0/path']);
  }
  for (const control of ['\\u0000', '\\u0001', '\\r', '\\n', '\\u007f']) {
    assertMalformed(await raw(`{"method":"GET","path":"/users?name=a${control}b"}`), ['operations/0/path']);
  }
  for (const value of ['\\"a\\"\\r\\nX-Injected: 1', '\\"a\\"\\u0000', '\\u20ac']) {
    assertMalformed(await raw(`{"method":"GET","path":"/users","headers":{"If-None-Match":"${value}"}}`), [
      'operations/0/headers/If-None-Match',
    ]);
  }
});

envelope(
  'an operation body past its size is the operation’s refusal, as alone; an object too wide refuses the batch unparsed',
  async ({ service }) => {
    const big = { name: 'x'.repeat(1024 * 1024), email: userSample().email };
    const sized = await batch(service, [creating(), { method: 'POST', path: '/users', body: big }]);
    assertFailedAt(sized, 1, await alone(service, 'POST', '/users', { body: big }));
    // Members are counted in the text, before anything is parsed: the whole batch is a 400, nothing runs.
    const before = await totals(service);
    const wide = Object.fromEntries(Array.from({ length: 2001 }, (_, i) => [`f${i}`, i]));
    const members = await batch(service, [creating(), { method: 'PATCH', path: '/users/1', body: wide }]);
    assert.is(members.status, 400, members.text);
    assert.is(members.body.detail, 'An object in the request body has more than 2000 members.');
    assert.is(members.body.operation, undefined);
    assert.equal(await totals(service), before);
  },
);

envelope('labels: used before defined, defined twice, malformed, on a method other than POST, unknown', async ({ service }) => {
  const user = await created(service, '/users', newUser());
  const before = await totals(service);
  // {label} in a path before its POST, or naming itself.
  assertMalformedUnder(
    await batch(service, [creating(), { method: 'GET', path: '/users/{u1}' }, { ...creating(), label: 'u1' }]),
    'operations/1',
  );
  assertMalformedUnder(
    await batch(service, [creating(), { method: 'POST', path: '/users/{u1}/pets', body: { name: 'Rex', species: 'dog' }, label: 'u1' }]),
    'operations/1',
  );
  // {"$ref"} before its POST.
  assertMalformedUnder(
    await batch(service, [
      creating(),
      { method: 'POST', path: '/pets', body: { name: 'Rex', species: 'dog', ownerId: { $ref: 'u1' } } },
      { ...creating(), label: 'u1' },
    ]),
    'operations/1',
  );
  // Defined twice.
  assertMalformedUnder(
    await batch(service, [
      { ...creating(), label: 'u1' },
      { ...creating(), label: 'u1' },
    ]),
    'operations/1',
  );
  // Malformed.
  for (const label of ['1abc', '_abc', '-abc', 'a b', 'a.b', 'a{b}', 'a/b', 'é', '', `L${'a'.repeat(64)}`, 5, true, {}]) {
    assertMalformedUnder(await batch(service, [creating(), { ...creating(), label }]), 'operations/1');
  }
  // On a method other than POST.
  for (const op of [
    { method: 'GET', path: `/users/${user}` },
    { method: 'GET', path: '/users' },
    { method: 'PATCH', path: `/users/${user}`, body: { name: 'Label' } },
    { method: 'PUT', path: `/users/${user}`, body: newUser() },
    { method: 'DELETE', path: `/users/${user}` },
  ]) {
    assertMalformedUnder(await batch(service, [creating(), { ...op, label: 'x1' }]), 'operations/1');
  }
  // Naming no label at all.
  assertMalformedUnder(
    await batch(service, [
      { ...creating(), label: 'u1' },
      { method: 'GET', path: '/users/{u2}' },
    ]),
    'operations/1',
  );
  assertMalformedUnder(
    await batch(service, [
      { ...creating(), label: 'u1' },
      { method: 'POST', path: '/pets', body: { name: 'Rex', species: 'dog', ownerId: { $ref: 'nobody' } } },
    ]),
    'operations/1',
  );
  // Glued to other characters of a segment or value: it would name another element (`/users/1{u}` → /users/1101).
  for (const path of ['/users/1{u1}', '/users/{u1}0', '/users/{u1}{u1}', '/users/{u1}x/pets', '/pets?ownerId=1{u1}', '/users/{u1}.json']) {
    assertMalformed(
      await batch(service, [
        { ...creating(), label: 'u1' },
        { method: 'GET', path },
      ]),
      ['operations/1/path'],
    );
  }
  assert.equal(await totals(service), before);
  assert.equal((await service.request('GET', `/users/${user}`)).body.name, 'Ada');
  await service.request('DELETE', `/users/${user}`); // back to the suite's totals
});

envelope.run();

// ---------------------------------------------------------------------------------------------------------

const limits = suite<{ service: Service }>('batch: Idempotency-Key and the body limit');

limits.before(async (ctx) => {
  ctx.service = await startService({ env: { MAX_BULK_BODY_BYTES: String(3 * 1024 * 1024) } });
});

limits.after(async (ctx) => ctx.service?.close());

limits('an Idempotency-Key covers the batch: replayed as it was, nothing more created; another body refused', async ({ service }) => {
  const headers = { 'Idempotency-Key': `batch-${userSample().email}` };
  const operations = [
    { method: 'POST', path: '/users', body: newUser('Once'), label: 'u' },
    { method: 'POST', path: '/users/{u}/pets', body: { name: 'Rex', species: 'dog' } },
    { method: 'GET', path: '/users/{u}/pets?count=true' },
  ];
  const first = await batch(service, operations, headers);
  resultsOf(first, 3);
  assert.is(first.headers.get('idempotent-replayed'), null);
  const before = await totals(service);
  const again = await batch(service, operations, headers);
  assert.is(again.status, 200, again.text);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.body, first.body);
  assert.equal(await totals(service), before);
  const other = await batch(service, [{ method: 'POST', path: '/users', body: newUser('Other') }], headers);
  assert.is(other.status, 422, other.text);
  assert.match(other.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(await totals(service), before);
});

limits('a batch may be as large as MAX_BULK_BODY_BYTES (past MAX_BODY_BYTES); larger is a 413 and runs nothing', async ({ service }) => {
  const bulk = (prefix: string) =>
    Array.from({ length: 100 }, (_, i) => ({ name: 'x'.repeat(5000), email: `${prefix}-${i}-${userSample().email}` }));
  const before = await total(service, '/users');
  // ~1.5 MB: past MAX_BODY_BYTES (1 MiB), within this service's 3 MiB.
  const reply = await batch(
    service,
    ['a', 'b', 'c'].map((prefix) => ({ method: 'POST', path: '/users', body: bulk(prefix) })),
  );
  for (const result of resultsOf(reply, 3)) {
    assert.is(result.status, 201);
    assert.is(result.body.length, 100);
  }
  assert.is(await total(service, '/users'), before + 300);
  // ~3.5 MB: past 3 MiB.
  const huge = await batch(
    service,
    ['d', 'e', 'f', 'g', 'h', 'i', 'j'].map((prefix) => ({ method: 'POST', path: '/users', body: bulk(prefix) })),
  );
  assert.is(huge.status, 413, huge.text);
  assert.is(await total(service, '/users'), before + 300);
});

limits.run();

// ---------------------------------------------------------------------------------------------------------

const timeout = suite<{ service: Service }>('batch: BATCH_TIMEOUT_MS');

timeout.before(async (ctx) => {
  ctx.service = await startService({ env: { BATCH_TIMEOUT_MS: '1' } });
  const seed = Array.from({ length: 300 }, (_, i) => ({ name: `Seed ${i}`, email: `seed-${i}-${userSample().email}` }));
  const reply = await ctx.service.request('POST', '/users', { body: seed });
  assert.is(reply.status, 201, reply.text);
});

timeout.after(async (ctx) => ctx.service?.close());

timeout('a batch still running past the limit is rolled back and answered 422 naming the limit', async ({ service }) => {
  const before = await totals(service);
  const fresh = newUser('Too slow');
  const operations = [
    { method: 'POST', path: '/users', body: fresh },
    ...Array.from({ length: 99 }, () => ({ method: 'GET', path: '/users?limit=1000&count=true' })),
  ];
  const reply = await batch(service, operations);
  assert.is(reply.status, 422, reply.text.slice(0, 500));
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.body.status, 422);
  assert.match(reply.body.detail, /BATCH_TIMEOUT_MS/);
  assert.ok(Number.isInteger(reply.body.operation), reply.text);
  assert.ok(reply.body.operation >= 0 && reply.body.operation < operations.length, reply.text);
  assert.equal(await totals(service), before);
  assert.is(await userWithEmail(service, fresh.email), false);
});

timeout.run();

// ---------------------------------------------------------------------------------------------------------

const concurrent = suite<{ service: Service }>('batch: concurrent batches');

concurrent.before(async (ctx) => {
  ctx.service = await startService();
});

concurrent.after(async (ctx) => ctx.service?.close());

concurrent('batches patching the same two elements in opposite orders all succeed, and leave one batch’s values', async ({ service }) => {
  const a = await created(service, '/users', newUser('A'));
  const b = await created(service, '/users', newUser('B'));
  const names = Array.from({ length: 10 }, (_, k) => `Batch ${k}`);
  const replies = await Promise.all(
    names.map((name, k) => {
      const order = k % 2 === 0 ? [a, b] : [b, a];
      return batch(
        service,
        order.map((id) => ({ method: 'PATCH', path: `/users/${id}`, body: { name } })),
      );
    }),
  );
  replies.forEach((reply, k) => {
    const got = resultsOf(reply, 2);
    for (const result of got) {
      assert.is(result.status, 200);
      assert.is(result.body.name, names[k]);
    }
  });
  const finalA = (await service.request('GET', `/users/${a}`)).body;
  const finalB = (await service.request('GET', `/users/${b}`)).body;
  assert.ok(names.includes(finalA.name), finalA.name);
  assert.ok(names.includes(finalB.name), finalB.name);
  // Each batch is one transaction: the last one to commit wrote both elements.
  assert.is(finalA.name, finalB.name);
});

concurrent(
  'batches patching a pet and a user while orders of both are created beside them: no deadlock, every write answered',
  async ({ service }) => {
    const user = await created(service, '/users', newUser('Parent'));
    const pet = await created(service, '/pets', { name: 'Parent pet', species: 'dog' });
    // A batch locks the pet, then the user; each order's foreign-key checks take a lock on both parents.
    const batches: Promise<Reply>[] = [];
    const orders: Promise<Reply>[] = [];
    for (let k = 0; k < 100; k++) {
      batches.push(
        batch(service, [
          { method: 'PATCH', path: `/pets/${pet}`, body: { name: `Pet ${k}` } },
          { method: 'PATCH', path: `/users/${user}`, body: { name: `User ${k}` } },
        ]),
      );
      orders.push(service.request('POST', '/orders', { body: { userId: user, petId: pet } }));
    }
    for (const reply of await Promise.all(batches)) resultsOf(reply, 2);
    for (const reply of await Promise.all(orders)) assert.is(reply.status, 201, reply.text);
    assert.is(await total(service, `/orders?userId=${user}`), 100);
  },
);

concurrent(
  'batches patching pets then their owner while the owner is deleted (its pets set to no owner): no deadlock, no refusal',
  async ({ service }) => {
    // The delete locks the user, then (ON DELETE SET NULL) its pets; the batch locks the pets, then the user.
    for (let round = 0; round < 12; round++) {
      const user = await created(service, '/users', newUser(`Owner ${round}`));
      const pets = [
        await created(service, '/pets', { name: 'One', species: 'cat', ownerId: user }),
        await created(service, '/pets', { name: 'Two', species: 'dog', ownerId: user }),
      ];
      const patches = batch(service, [
        { method: 'PATCH', path: `/pets/${pets[1]}`, body: { name: 'Two b' } },
        { method: 'PATCH', path: `/pets/${pets[0]}`, body: { name: 'One b' } },
        { method: 'PATCH', path: `/users/${user}`, body: { name: 'Owner b' } },
      ]);
      const removal = sleep(round % 4).then(() => service.request('DELETE', `/users/${user}`));
      const [done, removed] = await Promise.all([patches, removal]);
      // Either order is fine: the batch first (all three patched), or the delete first (the user is gone: a 404).
      if (done.status === 200) resultsOf(done, 3);
      else assertFailedAt(done, 2, await alone(service, 'PATCH', `/users/${user}`, { body: { name: 'Owner b' } }));
      assert.is(removed.status, 204, removed.text);
    }
  },
);

concurrent.run();

// ---------------------------------------------------------------------------------------------------------

const answerSize = suite<{ service: Service }>("batch: the answer's size");

answerSize.before(async (ctx) => {
  // No time limit here: only the size of the answer may stop this batch.
  ctx.service = await startService({ env: { BATCH_TIMEOUT_MS: '600000' } });
  const long = 'x'.repeat(200);
  const seed = Array.from({ length: 1000 }, (_, i) => ({ name: `${long} ${i}`, email: `size-${i}-${userSample().email}` }));
  const reply = await ctx.service.request('POST', '/users', { body: seed });
  assert.is(reply.status, 201, reply.text.slice(0, 300));
});

answerSize.after(async (ctx) => ctx.service?.close());

answerSize('reads whose answers together pass 16 MiB are refused with 422 and the batch rolled back', async ({ service }) => {
  const before = await totals(service);
  const fresh = newUser('Too big');
  // Each page of 1000 users is ~300 KB: the 56th answer passes 16 MiB.
  const operations = [
    { method: 'POST', path: '/users', body: fresh },
    ...Array.from({ length: 99 }, () => ({ method: 'GET', path: '/users?limit=1000' })),
  ];
  const reply = await batch(service, operations);
  assert.is(reply.status, 422, reply.text.slice(0, 500));
  assert.match(reply.body.detail, /16777216 bytes/);
  assert.ok(reply.body.operation > 40 && reply.body.operation < 99, reply.text);
  assert.equal(await totals(service), before);
  assert.is(await userWithEmail(service, fresh.email), false);
  // Fewer reads of the same pages fit.
  const fits = await batch(service, operations.slice(0, 20));
  assert.is(fits.status, 200, fits.text.slice(0, 300));
});

answerSize.run();

// ---------------------------------------------------------------------------------------------------------

const asAlone = suite<{ service: Service }>('batch: an operation is held to what it meets alone');

asAlone.before(async (ctx) => {
  ctx.service = await startService();
});

asAlone.after(async (ctx) => ctx.service?.close());

asAlone("a refusal quoting the client's words stays that refusal (not a 503)", async ({ service }) => {
  const path = '/users/Connection%20terminated';
  assertFailedAt(await batch(service, [{ method: 'GET', path }]), 0, await alone(service, 'GET', path));
});

asAlone('a related POST under a missing parent is the 404 it is alone, not a refused reference', async ({ service }) => {
  const before = await totals(service);
  const body = { name: 'Orphan', species: 'cat' };
  const expected = await alone(service, 'POST', '/users/999999/pets', { body });
  assert.is(expected.status, 404);
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: newUser('Kept?') },
    { method: 'POST', path: '/users/999999/pets', body },
  ]);
  assertFailedAt(reply, 1, expected);
  assert.equal(await totals(service), before);
});

asAlone('a body member named __proto__ is a member, also after a label was filled in', async ({ service }) => {
  const body = JSON.parse('{"__proto__": {"species": "dog"}, "name": "Proto", "ownerId": null}');
  const expected = await alone(service, 'POST', '/pets', { body });
  assert.is(expected.status, 422, JSON.stringify(expected));
  const withRef = JSON.parse('{"__proto__": {"species": "dog"}, "name": "Proto", "ownerId": {"$ref": "owner"}}');
  const reply = await batch(service, [
    { method: 'POST', path: '/users', body: newUser('Owner'), label: 'owner' },
    { method: 'POST', path: '/pets', body: withRef },
  ]);
  assert.is(reply.status, 422, reply.text);
  assert.is(reply.body.operation, 1);
  assert.equal(reply.body.errors, expected.body.errors);
});

asAlone("an operation's body is held to MAX_BODY_BYTES as alone (413)", async ({ service }) => {
  const body = { ...newUser('Big'), name: 'x'.repeat(1024 * 1024 + 10) };
  const expected = await alone(service, 'POST', '/users', { body });
  assert.is(expected.status, 413);
  const reply = await batch(service, [{ method: 'POST', path: '/users', body }]);
  assert.is(reply.status, 413, reply.text.slice(0, 300));
  assert.is(reply.body.operation, 0);
});

/** The string 'x' inside `levels` arrays. */
const nestedIn = (levels: number): unknown => {
  let nested: unknown = 'x';
  for (let i = 0; i < levels; i++) nested = [nested];
  return nested;
};

asAlone('a body nested as deep as a request alone may be is not refused for the envelope around it', async ({ service }) => {
  const body = { ...newUser('Deep'), name: nestedIn(62) };
  const expected = await alone(service, 'POST', '/users', { body });
  assert.is(expected.status, 422, JSON.stringify(expected).slice(0, 300));
  assertFailedAt(await batch(service, [{ method: 'POST', path: '/users', body }]), 0, expected);
});

asAlone("a body nested deeper than alone allows is that operation's 400, not the batch's", async ({ service }) => {
  const body = { ...newUser('Deeper'), name: nestedIn(70) };
  const expected = await alone(service, 'POST', '/users', { body });
  assert.is(expected.status, 400, JSON.stringify(expected).slice(0, 300));
  assertFailedAt(
    await batch(service, [
      { method: 'GET', path: '/users' },
      { method: 'POST', path: '/users', body },
    ]),
    1,
    expected,
  );
  // Past the bound of the whole request, the batch is refused before it is parsed.
  const whole = await batch(service, [{ method: 'POST', path: '/users', body: { ...newUser('Deepest'), name: nestedIn(270) } }]);
  assert.is(whole.status, 400, whole.text.slice(0, 300));
  assert.is(whole.body.operation, undefined);
});

asAlone("a lone surrogate in a body is that operation's 422, with the paths it has alone", async ({ service }) => {
  const raw = `{"name":"\\ud800","email":"lone@batch.test"}`;
  const json = { 'content-type': 'application/json' };
  const expected = asResult(await service.request('POST', '/users', { raw, headers: json }));
  assert.is(expected.status, 422);
  const reply = await service.request('POST', '/_batch', {
    raw: `{"operations":[{"method":"GET","path":"/users"},{"method":"POST","path":"/users","body":${raw}}]}`,
    headers: json,
  });
  assertFailedAt(reply, 1, expected);
});

asAlone("the client's words in a malformed batch are echoed cut short, and the answer stays small", async ({ service }) => {
  const long = 'k'.repeat(1_000);
  const operations = Array.from({ length: 100 }, () => ({
    method: 'POST',
    path: `/users/{${long}}`,
    [long]: 1,
    headers: { [long]: 'x' },
    body: { ownerId: { $ref: long } },
  }));
  const reply = await batch(service, operations);
  assert.is(reply.status, 400);
  assert.ok(reply.text.length < 20_000, `${reply.text.length} bytes`);
  assert.ok(!reply.text.includes('k'.repeat(MAX_ECHOED_LENGTH + 1)), reply.text.slice(0, 500));
  for (const error of reply.body.errors) assert.ok(error.path.length <= MAX_ECHOED_LENGTH + 1, error.path);
});

asAlone.run();

// Shaping responses (API.md §5): `fields` on collections, related lists and elements (GET, HEAD), with
// ETags of the bytes sent and cursors that do not depend on the fields chosen. Runs on both backends.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { created, petSample, userSample } from './fixtures.js';
import { type Reply, type Service, startService } from './helpers.js';

type Row = Record<string, unknown>;

const next = (reply: Reply) => /^<([^>]+)>; rel="next"$/.exec(reply.headers.get('link') ?? '')?.[1];

async function walk(service: Service, path: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (let at: string | undefined = path; at; ) {
    const reply = await service.request('GET', at);
    assert.is(reply.status, 200, reply.text);
    rows.push(...reply.body);
    at = next(reply);
  }
  return rows;
}

function assertBadFields(reply: Reply): void {
  assert.is(reply.status, 400, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    ['fields'],
  );
}

const fields = suite<{ service: Service; owner: number }>('fields: exactly the fields asked for');

fields.before(async (ctx) => {
  ctx.service = await startService();
  ctx.owner = await created(ctx.service, '/users', userSample());
  for (let i = 0; i < 7; i++) await created(ctx.service, '/pets', { ...petSample(), name: `pet-${i}`, ownerId: ctx.owner });
});

fields.after(async (ctx) => ctx.service?.close());

fields('a collection carries exactly the fields named, in schema order', async ({ service }) => {
  const reply = await service.request('GET', '/pets?fields=name,id&limit=3');
  assert.is(reply.status, 200, reply.text);
  assert.is(reply.body.length, 3);
  for (const pet of reply.body) assert.equal(Object.keys(pet), ['id', 'name']);
  const head = await service.request('HEAD', '/pets?fields=name,id&limit=3');
  assert.is(head.headers.get('content-length'), reply.headers.get('content-length'));
});

fields('a related list and an element take fields too', async ({ service, owner }) => {
  const related = await service.request('GET', `/users/${owner}/pets?fields=ownerId`);
  assert.is(related.status, 200, related.text);
  assert.equal(related.body[0], { ownerId: owner });
  const element = await service.request('GET', `/users/${owner}?fields=email,name`);
  assert.is(element.status, 200, element.text);
  assert.equal(Object.keys(element.body), ['name', 'email']);
});

fields('an element ETag is that of the bytes sent', async ({ service, owner }) => {
  const whole = await service.request('GET', `/users/${owner}`);
  const named = await service.request('GET', `/users/${owner}?fields=name`);
  const etag = named.headers.get('etag') as string;
  assert.ok(etag);
  assert.is.not(etag, whole.headers.get('etag'));
  assert.is((await service.request('GET', `/users/${owner}?fields=name`, { headers: { 'If-None-Match': etag } })).status, 304);
  assert.is((await service.request('GET', `/users/${owner}`, { headers: { 'If-None-Match': etag } })).status, 200);
  const head = await service.request('HEAD', `/users/${owner}?fields=name`);
  assert.is(head.headers.get('etag'), etag);
});

fields('paging is the same whatever the fields; a cursor made with fields continues without them', async ({ service }) => {
  const all = (await walk(service, '/pets?limit=2&sort=-name')).map((p) => p.name);
  const named = (await walk(service, '/pets?limit=2&sort=-name&fields=name')).map((p) => p.name);
  assert.equal(named, all);
  const first = await service.request('GET', '/pets?limit=2&sort=-name&fields=species');
  for (const pet of first.body) assert.equal(Object.keys(pet), ['species']);
  const cursor = new URL(next(first) as string, 'http://x').searchParams.get('cursor') as string;
  const rest = await walk(service, `/pets?limit=2&sort=-name&cursor=${encodeURIComponent(cursor)}`);
  assert.equal(
    rest.map((p) => p.name),
    all.slice(2),
  );
});

fields('an unknown, empty or repeated field, or fields given twice, is a 400 naming fields', async ({ service, owner }) => {
  for (const query of ['fields=nope', 'fields=', 'fields=id,,name', 'fields=id,id', 'fields=id&fields=name']) {
    assertBadFields(await service.request('GET', `/pets?${query}`));
    assertBadFields(await service.request('GET', `/users/${owner}?${query}`));
  }
});

fields('an element takes no other parameter; writes take none', async ({ service, owner }) => {
  const other = await service.request('GET', `/users/${owner}?limit=1`);
  assert.is(other.status, 400);
  assert.equal(
    other.body.errors.map((e: { path: string }) => e.path),
    ['limit'],
  );
  const write = await service.request('PATCH', `/users/${owner}?fields=name`, { body: { name: 'x' } });
  assert.is(write.status, 400);
  assert.is((await service.request('GET', '/users/987654321?fields=nope')).status, 404);
});

fields('the OpenAPI document lists the fields a kind may be shaped to', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  for (const path of ['/users', '/users/{id}', '/users/{id}/pets']) {
    const parameter = doc.paths[path].get.parameters.find((p: { name?: string }) => p.name === 'fields');
    assert.ok(parameter, path);
  }
  const element = doc.paths['/users/{id}'].get.parameters.find((p: { name?: string }) => p.name === 'fields');
  assert.equal(element.schema.items.enum, ['id', 'name', 'email', 'createdAt', 'updatedAt']);
});

fields.run();

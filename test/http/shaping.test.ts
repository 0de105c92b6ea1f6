// Shaping responses (API.md §5): `fields` and `expand` on collections, related lists and elements (GET,
// HEAD), with ETags of the bytes sent and cursors that do not depend on the shape. Runs on both backends.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { created, petSample, userSample } from '../support/fixtures.js';
import { nextLink, type Reply, type Service, startService, walkList } from '../support/helpers.js';

type Row = Record<string, unknown>;

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
  const all = (await walkList(service, '/pets?limit=2&sort=-name')).map((p) => p.name);
  const named = (await walkList(service, '/pets?limit=2&sort=-name&fields=name')).map((p) => p.name);
  assert.equal(named, all);
  const first = await service.request('GET', '/pets?limit=2&sort=-name&fields=species');
  for (const pet of first.body) assert.equal(Object.keys(pet), ['species']);
  const cursor = new URL(nextLink(first) as string, 'http://x').searchParams.get('cursor') as string;
  const rest = await walkList(service, `/pets?limit=2&sort=-name&cursor=${encodeURIComponent(cursor)}`);
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

const expand = suite<{ service: Service; owner: number; lonely: number; busy: number }>('expand: related elements in the same response');

expand.before(async (ctx) => {
  ctx.service = await startService();
  ctx.owner = await created(ctx.service, '/users', userSample());
  ctx.lonely = await created(ctx.service, '/users', userSample());
  ctx.busy = await created(ctx.service, '/users', userSample());
  const owned = await created(ctx.service, '/pets', { ...petSample(), name: 'owned', ownerId: ctx.owner });
  const stray = await created(ctx.service, '/pets', { ...petSample(), name: 'stray' });
  await created(ctx.service, '/orders', { userId: ctx.owner, petId: owned });
  await created(ctx.service, '/orders', { userId: ctx.lonely, petId: stray });
  for (let i = 0; i < 101; i++) await created(ctx.service, '/pets', { ...petSample(), name: `busy-${i}`, ownerId: ctx.busy });
});

expand.after(async (ctx) => ctx.service?.close());

expand('a to-one relation adds its element, or null when the reference is empty', async ({ service, owner }) => {
  const reply = await service.request('GET', '/pets?expand=owner&name[in]=owned,stray&sort=name');
  assert.is(reply.status, 200, reply.text);
  const [owned, stray] = reply.body;
  assert.is(owned.owner.id, owner);
  assert.equal(Object.keys(owned.owner), ['id', 'name', 'email', 'createdAt', 'updatedAt']);
  assert.is(stray.owner, null);
  assert.is(stray.ownerId, null);
});

expand(
  'a to-many relation adds an array (empty when there are none), at most 100 in key order',
  async ({ service, owner, lonely, busy }) => {
    const reply = await service.request('GET', `/users?expand=pets&id[in]=${owner},${lonely},${busy}`);
    assert.is(reply.status, 200, reply.text);
    const byId = new Map(reply.body.map((u: Row) => [u.id, u]));
    assert.equal(
      ((byId.get(owner) as Row).pets as Row[]).map((p) => p.name),
      ['owned'],
    );
    assert.equal((byId.get(lonely) as Row).pets, []);
    const pets = (byId.get(busy) as Row).pets as Row[];
    assert.is(pets.length, 100);
    const all = await walkList(service, `/users/${busy}/pets?limit=1000`);
    assert.is(all.length, 101);
    assert.equal(
      pets.map((p) => p.id),
      all.slice(0, 100).map((p) => p.id),
    );
  },
);

expand('relations nest with dots, on lists and elements; fields shape only the top level', async ({ service, owner }) => {
  const orders = await service.request('GET', `/users/${owner}/orders?expand=pet.owner,user`);
  assert.is(orders.status, 200, orders.text);
  assert.is(orders.body[0].pet.owner.id, owner);
  assert.is(orders.body[0].user.id, owner);
  const element = await service.request('GET', `/users/${owner}?expand=orders.pet&fields=name`);
  assert.is(element.status, 200, element.text);
  assert.equal(Object.keys(element.body), ['name', 'orders']);
  assert.is(element.body.orders[0].pet.name, 'owned');
  assert.ok('createdAt' in element.body.orders[0], 'expanded elements are whole');
  const whole = await service.request('GET', `/users/${owner}`);
  assert.is.not(element.headers.get('etag'), whole.headers.get('etag'));
  const head = await service.request('HEAD', `/users/${owner}?expand=orders.pet&fields=name`);
  assert.is(head.headers.get('content-length'), element.headers.get('content-length'));
  assert.is(head.headers.get('etag'), element.headers.get('etag'));
});

expand('an expanded representation is not a PUT body: the relation names are not fields (422)', async ({ service, owner }) => {
  const { id: _, createdAt: __, updatedAt: ___, ...body } = (await service.request('GET', `/users/${owner}?expand=pets`)).body;
  const put = await service.request('PUT', `/users/${owner}`, { body });
  assert.is(put.status, 422, put.text);
  assert.equal(
    put.body.errors.map((e: { path: string }) => e.path),
    ['pets'],
  );
});

expand(
  'an unknown relation, a path deeper than 3, a path named twice, or expand given twice is a 400 naming expand',
  async ({ service, owner }) => {
    for (const query of [
      'expand=nope',
      'expand=pets.nope',
      'expand=orders.user.pets.owner',
      'expand=',
      'expand=pets&expand=orders',
      'expand=pets,,orders',
      'expand=pets,pets',
      'expand=orders.pet,pets,orders.pet',
    ]) {
      assertBadExpand(await service.request('GET', `/users?${query}`));
      assertBadExpand(await service.request('GET', `/users/${owner}?${query}`));
    }
  },
);

expand(
  'a bad fields and a bad expand are both named in one 400, on collections, related lists and elements',
  async ({ service, owner }) => {
    for (const path of ['/pets', `/users/${owner}/pets`, `/users/${owner}`]) {
      for (const query of ['fields=nope&expand=nope', 'expand=nope&fields=id,id', 'fields=&expand=pets,pets']) {
        const reply = await service.request('GET', `${path}?${query}`);
        assert.is(reply.status, 400, reply.text);
        assert.equal(reply.body.errors.map((e: { path: string }) => e.path).sort(), ['expand', 'fields'], `${path}?${query}`);
      }
    }
    const more = await service.request('GET', '/pets?limit=0&fields=nope&expand=nope');
    assert.equal(more.body.errors.map((e: { path: string }) => e.path).sort(), ['expand', 'fields', 'limit'], more.text);
  },
);

function assertBadExpand(reply: Reply): void {
  assert.is(reply.status, 400, reply.text);
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    ['expand'],
  );
}

expand('an element many rows share counts once for each time the response holds it', async ({ service, busy }) => {
  const pet = await created(service, '/pets', { ...petSample(), ownerId: busy });
  const bulk = await service.request('POST', '/orders', { body: Array.from({ length: 200 }, () => ({ userId: busy, petId: pet })) });
  assert.is(bulk.status, 201, bulk.text);
  // Each order holds its user and the user's first 100 pets: 101 expanded elements per order.
  const under = await service.request('GET', `/orders?petId=${pet}&limit=198&expand=user.pets`);
  assert.is(under.status, 200, under.text.slice(0, 300));
  assert.ok(under.body.every((o: Row) => (o.user as Row).id === busy && ((o.user as Row).pets as Row[]).length === 100));
  const over = await service.request('GET', `/orders?petId=${pet}&limit=199&expand=user.pets`);
  assert.is(over.status, 400, over.text.slice(0, 300));
  assert.equal(
    over.body.errors.map((e: { path: string }) => e.path),
    ['expand'],
  );
});

expand('paging is unaffected: the next link keeps expand, and the pages are the same', async ({ service }) => {
  const plain = (await walkList(service, '/pets?limit=7')).map((p) => p.id);
  const expanded = await walkList(service, '/pets?limit=7&expand=owner');
  assert.equal(
    expanded.map((p) => p.id),
    plain,
  );
  assert.ok(expanded.every((p) => 'owner' in p));
});

expand('the OpenAPI document lists the relation paths and the optional expanded properties', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const parameter = doc.paths['/orders'].get.parameters.find((p: { name?: string }) => p.name === 'expand');
  assert.ok(parameter.schema.items.enum.includes('pet.owner.pets'));
  assert.ok(parameter.schema.items.enum.includes('user'));
  const orders = doc.components.schemas.orders;
  assert.ok(orders.properties.pet && !orders.required.includes('pet'));
  assert.is(doc.components.schemas.users.properties.pets.maxItems, 100);
});

expand.run();

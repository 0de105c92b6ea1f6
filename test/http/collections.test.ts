// Collections over HTTP (API.md §5): each filter operator against real rows, sorting with ties
// and NULLs, keyset paging through Link headers while rows come and go, counts, related lists.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { created, userSample } from '../support/fixtures.js';
import { BACKEND, type Reply, type Service, startService } from '../support/helpers.js';

type Row = Record<string, any>;

/** The URL of the next page from a Link header, or undefined on the last page. */
function nextOf(reply: Reply): string | undefined {
  const link = reply.headers.get('link');
  if (!link) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(link);
  assert.ok(match, `malformed Link: ${link}`);
  return match?.[1];
}

/** Follows Link headers from `path` to the end, running `between` after each page. */
async function walk(service: Service, path: string, between?: (page: number) => Promise<void>): Promise<Row[]> {
  const rows: Row[] = [];
  let next: string | undefined = path;
  for (let page = 0; next; page++) {
    const reply = await service.request('GET', next);
    assert.is(reply.status, 200, reply.text);
    rows.push(...reply.body);
    next = nextOf(reply);
    if (next) await between?.(page);
  }
  return rows;
}

const ids = (rows: Row[]) => rows.map((r) => r.id);
const byKeys = (keys: [string, boolean][]) => (a: Row, b: Row) => {
  for (const [key, descending] of keys) {
    const [x, y] = [a[key], b[key]];
    if (x === y) continue;
    if (x === null) return descending ? 1 : -1;
    if (y === null) return descending ? -1 : 1;
    return (x < y ? -1 : 1) * (descending ? -1 : 1);
  }
  return 0;
};

const test = suite<{ service: Service; pets: Row[]; owners: number[] }>('collections');

test.before(async (ctx) => {
  ctx.service = await startService();
  ctx.owners = [await created(ctx.service, '/users', userSample()), await created(ctx.service, '/users', userSample())];
  const names = ['50% off', '50_off', 'plain', 'Abc', 'abc', 'Rex', 'Rex', 'Rex', 'Zed', 'Max'];
  ctx.pets = [];
  for (const [i, name] of names.entries()) {
    const ownerId = i % 3 === 2 ? null : (ctx.owners[i % 2] as number);
    const species = ['cat', 'dog', 'bird'][i % 3];
    const reply = await ctx.service.request('POST', '/pets', { body: { name, species, ownerId } });
    ctx.pets.push(reply.body);
  }
});
test.after(async ({ service }) => service.close());

test('each operator selects exactly the matching rows', async ({ service, pets, owners }) => {
  const expect = async (query: string, predicate: (p: Row) => boolean) => {
    const reply = await service.request('GET', `/pets?${query}`);
    assert.is(reply.status, 200, `${query}: ${reply.text}`);
    assert.equal(ids(reply.body), ids(pets.filter(predicate)), query);
  };
  const third = pets[3]?.id as number;
  await expect('species=dog', (p) => p.species === 'dog');
  await expect('species[eq]=dog', (p) => p.species === 'dog');
  await expect(`ownerId[ne]=${owners[0]}`, (p) => p.ownerId !== owners[0]);
  await expect(`id[gt]=${third}`, (p) => p.id > third);
  await expect(`id[gte]=${third}`, (p) => p.id >= third);
  await expect(`id[lt]=${third}`, (p) => p.id < third);
  await expect(`id[lte]=${third}`, (p) => p.id <= third);
  await expect('species[in]=cat,bird', (p) => ['cat', 'bird'].includes(p.species));
  await expect('name[contains]=e', (p) => p.name.includes('e'));
  await expect('name[startsWith]=R', (p) => p.name.startsWith('R'));
  await expect('name[startsWith]=a', (p) => p.name.startsWith('a'));
  await expect('ownerId[null]=true', (p) => p.ownerId === null);
  await expect('ownerId[null]=false', (p) => p.ownerId !== null);
  await expect(`name=Rex&id[gt]=${third}&species[ne]=cat`, (p) => p.name === 'Rex' && p.id > third && p.species !== 'cat');
});

test('contains and startsWith treat % and _ as literal characters', async ({ service, pets }) => {
  const percent = await service.request('GET', `/pets?name[contains]=${encodeURIComponent('%')}`);
  assert.equal(ids(percent.body), ids(pets.filter((p) => p.name.includes('%'))));
  const underscore = await service.request('GET', '/pets?name[contains]=_');
  assert.equal(ids(underscore.body), ids(pets.filter((p) => p.name.includes('_'))));
  const prefix = await service.request('GET', `/pets?name[startsWith]=${encodeURIComponent('50%')}`);
  assert.equal(ids(prefix.body), ids(pets.filter((p) => p.name.startsWith('50%'))));
  const quote = await service.request('GET', `/pets?name=${encodeURIComponent("x' OR 1=1 --")}`);
  assert.equal(quote.body, []);
});

test('sort orders by the fields, ties broken by id', async ({ service, pets }) => {
  for (const [query, keys] of [
    ['name', [['name', false]]],
    ['-name', [['name', true]]],
    [
      'species,-name',
      [
        ['species', false],
        ['name', true],
      ],
    ],
    ['-id', [['id', true]]],
  ] as [string, [string, boolean][]][]) {
    const reply = await service.request('GET', `/pets?sort=${query}`);
    const expected = [...pets].sort(byKeys([...keys, ['id', false]]));
    assert.equal(ids(reply.body), ids(expected), query);
  }
});

test('paging walks every row once in every order, NULLs included', async ({ service, pets }) => {
  for (const sort of ['ownerId', '-ownerId', '-ownerId,-id', 'name', '-name,ownerId', 'species,-id']) {
    const keys = sort.split(',').map((k): [string, boolean] => [k.replace('-', ''), k.startsWith('-')]);
    const rows = await walk(service, `/pets?sort=${sort}&limit=3`);
    assert.equal(ids(rows), ids([...pets].sort(byKeys([...keys, ['id', false]]))), sort);
  }
});

test('Link carries the other parameters; the last page has none; HEAD carries it too', async ({ service }) => {
  const first = await service.request('GET', '/pets?species=dog&limit=2&sort=-name');
  const next = nextOf(first) as string;
  const params = new URL(next, 'http://x').searchParams;
  assert.is(new URL(next, 'http://x').pathname, '/pets');
  assert.is(params.get('species'), 'dog');
  assert.is(params.get('limit'), '2');
  assert.is(params.get('sort'), '-name');
  assert.ok(params.get('cursor'));
  const head = await service.request('HEAD', '/pets?species=dog&limit=2&sort=-name');
  assert.is(head.headers.get('link'), first.headers.get('link'));
  const all = await service.request('GET', '/pets?limit=1000');
  assert.is(all.headers.get('link'), null);
});

test('count=true gives X-Total-Count for all pages of the filtered set', async ({ service, pets }) => {
  const reply = await service.request('GET', '/pets?species=dog&limit=1&count=true');
  assert.is(reply.body.length, 1);
  assert.is(reply.headers.get('x-total-count'), String(pets.filter((p) => p.species === 'dog').length));
  assert.is((await service.request('GET', '/pets')).headers.get('x-total-count'), null);
});

test('related lists take the same language; their cursors stay on their parent', async ({ service, pets, owners }) => {
  const [first, second] = owners as [number, number];
  const mine = pets
    .filter((p) => p.ownerId === first)
    .sort(
      byKeys([
        ['name', true],
        ['id', false],
      ]),
    );
  const reply = await service.request('GET', `/users/${first}/pets?sort=-name&limit=2&count=true`);
  assert.is(reply.headers.get('x-total-count'), String(mine.length));
  assert.ok(nextOf(reply)?.startsWith(`/users/${first}/pets?`));
  assert.equal(ids(await walk(service, `/users/${first}/pets?sort=-name&limit=2`)), ids(mine));
  const filtered = await service.request('GET', `/users/${first}/pets?name=Rex`);
  assert.equal(ids(filtered.body), ids(pets.filter((p) => p.ownerId === first && p.name === 'Rex')));
  const cursor = new URL(nextOf(reply) as string, 'http://x').searchParams.get('cursor') as string;
  const foreign = await service.request('GET', `/users/${second}/pets?sort=-name&limit=2&count=true&cursor=${cursor}`);
  assert.is(foreign.status, 400);
  assert.is(foreign.body.errors[0].path, 'cursor');
});

test('bad query parameters are 400 problems naming them', async ({ service }) => {
  for (const [query, path] of [
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['sort=colour', 'sort'],
    ['colour=red', 'colour'],
    ['name[like]=x', 'name[like]'],
    ['id=abc', 'id'],
    ['ownerId[null]=yes', 'ownerId[null]'],
    ['count=1', 'count'],
    ['cursor=abc', 'cursor'],
  ]) {
    for (const path0 of ['/pets', '/users/1/pets']) {
      const reply = await service.request('GET', `${path0}?${query}`);
      assert.is(reply.status, 400, `${path0}?${query}`);
      assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(
        reply.body.errors.map((e: { path: string }) => e.path),
        [path],
        query,
      );
    }
  }
  assert.is((await service.request('POST', '/pets?limit=5', { body: { name: 'A', species: 'cat' } })).status, 400);
});

test("a NUL in a filter value: compared on SQLite, a 400 in the contract's words on PostgreSQL", async ({ service }) => {
  for (const query of ['name=%00', 'name[contains]=a%00b', 'email[in]=a,%00']) {
    const reply = await service.request('GET', `/users?${query}`);
    if (BACKEND === 'sqlite') assert.is(reply.status, 200, query);
    else {
      assert.is(reply.status, 400, `${query}: ${reply.text}`);
      assert.not.match(reply.text, /UTF8|encoding|0x00/);
    }
  }
});

test('timestamps another program wrote in other forms page in stored order: every row once, both ways', async ({ service }) => {
  // `….000000Z` and `….000Z` name one instant but sort as different text: the cursor carries the last row's
  // value as stored, or the next page starts inside an earlier run of rows (and a descending walk loops).
  const forms = [
    '2026-01-01T00:00:00.000000Z',
    '2026-01-01T00:00:00.000Z',
    '2025-01-01T00:00:00.000Z',
    '2026-01-01T01:00:00+01:00',
    '2026-01-01 00:00:00',
    'garbage',
    `2026-01-01T00:00:00Z ${'x'.repeat(80)}`, // longer than a cursor carries: read back from its row
  ];
  const made: number[] = [];
  for (const [i, at] of forms.entries()) {
    const id = await created(service, '/users', { name: 'Stamped', email: `stamped-${i}@example.com` });
    await service.sql('UPDATE users SET created_at = $1 WHERE id = $2', [at, id]);
    made.push(id);
  }
  for (const sort of ['createdAt', '-createdAt', '-createdAt,-id']) {
    const seen: number[] = [];
    let next: string | undefined = `/users?email[startsWith]=stamped-&sort=${sort}&limit=1&fields=id`;
    for (let page = 0; next && page <= forms.length; page++) {
      const reply = await service.request('GET', next);
      assert.is(reply.status, 200, reply.text);
      seen.push(...ids(reply.body));
      next = nextOf(reply);
    }
    assert.is(next, undefined, `${sort}: the walk did not end`);
    assert.equal(
      [...seen].sort((a, b) => a - b),
      made,
      `${sort}: ${seen}`,
    );
  }
});

test.run();

const churn = suite<{ service: Service }>('cursor walk under inserts and deletes');

churn.before(async (ctx) => {
  ctx.service = await startService();
});
churn.after(async ({ service }) => service.close());

churn('no row appears twice and no row that existed throughout is skipped', async ({ service }) => {
  const names = ['ann', 'bob', 'cy', 'dee'];
  const seed: Row[] = [];
  for (let i = 0; i < 60; i++) {
    seed.push((await service.request('POST', '/users', { body: { name: names[i % 4], email: `seed${i}@x.io` } })).body);
  }
  for (const sort of ['id', 'name', '-name', '-email']) {
    const deleted = new Set<number>();
    let extra = 0;
    const rows = await walk(service, `/users?sort=${sort}&limit=7`, async (page) => {
      // Between pages: two inserts (sorting anywhere) and one delete of a not-yet-deleted seed row.
      for (let k = 0; k < 2; k++) {
        await service.request('POST', '/users', { body: { name: names[(page + k) % 4], email: `${sort}-extra${extra++}@x.io` } });
      }
      const victim = seed[(page * 13 + sort.length) % seed.length] as Row;
      if (!deleted.has(victim.id) && (await service.request('DELETE', `/users/${victim.id}`)).status === 204) deleted.add(victim.id);
    });
    const seen = ids(rows);
    assert.is(new Set(seen).size, seen.length, `${sort}: a row appeared twice`);
    const throughout = seed.filter((r) => !deleted.has(r.id)).map((r) => r.id);
    const missing = throughout.filter((id) => !seen.includes(id));
    assert.equal(missing, [], `${sort}: rows skipped`);
    for (const id of deleted) await service.request('POST', '/users', { body: { name: 'restored', email: `r${id}-${sort}@x.io` } });
    seed.splice(0, seed.length, ...seed.filter((r) => !deleted.has(r.id)));
  }
});

churn.run();

const drift = suite('a schema change without its migration');

drift('a table the schema declares and the database lacks: its paths are a 503 saying so, and so is /readyz', async () => {
  const service = await startService();
  try {
    assert.is((await service.request('GET', '/readyz')).status, 200);
    await service.sql('DROP TABLE orders');
    for (const [method, path, body] of [
      ['GET', '/orders', undefined],
      ['POST', '/orders', { userId: 1, petId: 1 }],
      ['GET', '/orders/1', undefined],
    ] as const) {
      const reply = await service.request(method, path, { body });
      assert.is(reply.status, 503, `${method} ${path}: ${reply.text}`);
      assert.match(reply.body.detail, /no migration applied/);
      assert.ok(reply.headers.get('retry-after'));
    }
    assert.is((await service.request('GET', '/users')).status, 200);
    // /readyz, which found everything before, reads the schema again within seconds and says so too.
    let ready = await service.request('GET', '/readyz');
    for (let tries = 0; ready.status === 200 && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      ready = await service.request('GET', '/readyz');
    }
    assert.is(ready.status, 503, ready.text);
    assert.match(ready.text, /\(orders\)/);
  } finally {
    await service.close();
  }
  // /readyz names what is missing (a new service is asked, before it has found everything once).
  const fresh = await startService();
  try {
    await fresh.sql('ALTER TABLE orders DROP COLUMN quantity');
    const ready = await fresh.request('GET', '/readyz');
    assert.is(ready.status, 503, ready.text);
    assert.match(ready.text, /orders\.quantity/);
    // Every request that reaches the missing column says so too, whatever SQLite's wording (an INSERT names it otherwise).
    for (const [method, path, body] of [
      ['GET', '/orders', undefined],
      ['POST', '/orders', { userId: 1, petId: 1 }],
      ['POST', '/orders', [{ userId: 1, petId: 1 }]],
      ['POST', '/_batch', { operations: [{ method: 'POST', path: '/orders', body: { userId: 1, petId: 1 } }] }],
    ] as const) {
      const reply = await fresh.request(method, path, { body });
      assert.is(reply.status, 503, `${method} ${path}: ${reply.text}`);
      assert.match(reply.body.detail, /no migration applied/);
    }
  } finally {
    await fresh.close();
  }
});

drift.run();

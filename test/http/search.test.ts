// Search (API.md §5 "Search"): `q=` on the searchable kinds (users.name and pets.name in the pet shop):
// every word literal, accents and case folded, the last word a prefix; with filters, sort=relevance,
// keyset paging and counts; the index kept in step with writes. Runs on both backends.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { created, userSample } from '../support/fixtures.js';
import { BACKEND, nextLink, type Reply, type Service, startService, walkList } from '../support/helpers.js';

type Row = Record<string, unknown>;

/** The names a search finds (in the order given). */
async function found(service: Service, query: string): Promise<string[]> {
  const reply = await service.request('GET', `/users?${query}`);
  assert.is(reply.status, 200, `${query}: ${reply.text}`);
  return reply.body.map((u: Row) => u.name);
}

const sorted = (names: string[]) => [...names].sort();

function assertBad(reply: Reply, parameter: string, message?: RegExp): void {
  assert.is(reply.status, 400, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(
    reply.body.errors.map((e: { path: string }) => e.path),
    [parameter],
  );
  if (message) assert.match(reply.body.detail, message);
}

const NAMES = [
  'Ada Lovelace',
  'Grace Hopper',
  'Adeline Café',
  'Zoë Müller',
  'Ünal Straße',
  'Chloé 🐶 Dog-walker',
  'NEAR OR AND NOT',
  'name:rex "quoted" star*',
  '東京 タワー',
  'ada ada ada',
  'Søren 한국어 データ مُحَمَّد हिन्दी',
];

const words = suite<{ service: Service; ids: Map<string, number> }>('q: every word, folded, the last one a prefix');

words.before(async (ctx) => {
  ctx.service = await startService();
  ctx.ids = new Map();
  for (const name of NAMES) ctx.ids.set(name, await created(ctx.service, '/users', { ...userSample(), name }));
});

words.after(async (ctx) => ctx.service?.close());

words('every word must be found; case and accents are folded', async ({ service }) => {
  assert.equal(sorted(await found(service, 'q=ada')), ['Ada Lovelace', 'ada ada ada']);
  assert.equal(await found(service, 'q=LOVELACE%20ada'), ['Ada Lovelace']);
  assert.equal(await found(service, 'q=cafe'), ['Adeline Café']);
  assert.equal(await found(service, 'q=CAFÉ'), ['Adeline Café']);
  assert.equal(await found(service, 'q=zoe%20muller'), ['Zoë Müller']);
  assert.equal(await found(service, 'q=unal'), ['Ünal Straße']);
  assert.equal(await found(service, 'q=ada%20hopper'), []);
});

words('a word typed as it is stored is found, whatever its script and its marks', async ({ service }) => {
  for (const word of ['Straße', 'Søren', '한국어', 'データ', 'مُحَمَّد', 'हिन्दी']) {
    const stored = NAMES.find((name) => name.includes(word)) as string;
    assert.equal(await found(service, `q=${encodeURIComponent(word)}`), [stored], word);
    assert.equal(await found(service, `q=${encodeURIComponent(word.toLowerCase())}`), [stored], word.toLowerCase());
  }
});

words('the last word matches as a prefix, the others whole', async ({ service }) => {
  assert.equal(sorted(await found(service, 'q=ad')), ['Ada Lovelace', 'Adeline Café', 'ada ada ada']);
  assert.equal(await found(service, 'q=grace%20hop'), ['Grace Hopper']);
  assert.equal(await found(service, 'q=gra%20hopper'), []);
  assert.equal(await found(service, 'q=dog%20walk'), ['Chloé 🐶 Dog-walker']);
  // Only the last word is a prefix, even when the same word comes first whole.
  assert.equal(await found(service, 'q=walk%20walk'), []);
  assert.equal(await found(service, 'q=walker%20walk'), ['Chloé 🐶 Dog-walker']);
});

words('a word cut by punctuation is the phrase of its parts: in order, adjacent', async ({ service }) => {
  assert.equal(await found(service, 'q=dog-walker'), ['Chloé 🐶 Dog-walker']);
  assert.equal(await found(service, 'q=walker-dog'), []);
  // The emoji is not indexed: "chloe" and "dog" are adjacent, "chloe" and "walker" are not.
  assert.equal(await found(service, 'q=chloe-dog'), ['Chloé 🐶 Dog-walker']);
  assert.equal(await found(service, 'q=chloe-walker'), []);
  assert.equal(await found(service, 'q=lovelace:ada'), []);
  assert.equal(await found(service, 'q=ada:love'), ['Ada Lovelace']);
});

words('query syntax is literal: quotes, stars, NEAR, OR, column filters never act as syntax', async ({ service }) => {
  // Words that are operators elsewhere are words here, and must all be found.
  assert.equal(await found(service, 'q=near%20or'), ['NEAR OR AND NOT']);
  assert.equal(await found(service, 'q=OR%20NOT'), ['NEAR OR AND NOT']);
  assert.equal(await found(service, 'q=ada%20OR%20grace'), []);
  assert.equal(await found(service, 'q=NOT%20ada'), []);
  // A star is no wildcard, a quote no phrase, `name:` no column filter.
  assert.equal(await found(service, 'q=%22quoted%22'), ['name:rex "quoted" star*']);
  assert.equal(await found(service, 'q=star*'), ['name:rex "quoted" star*']);
  assert.equal(await found(service, 'q=name:rex'), ['name:rex "quoted" star*']);
  assert.equal(await found(service, 'q=email:ada'), []);
  // Characters of FTS5 and tsquery syntax, alone or around words: never a 500.
  const hostile = [
    '"',
    '*',
    '(',
    ')',
    '^',
    ':',
    '-',
    '+',
    '&',
    '|',
    '!',
    "'",
    '\\',
    '<->',
    '"ada',
    'ada"',
    "ada'",
    'ada\\',
    'a:*',
    "'ada':*",
    'ada & !grace',
    '(ada | grace)',
    'NEAR(ada grace, 2)',
    'ada AND',
    '- ada',
    '{ada}',
    'ada^',
    '.ada',
    'ada*:',
    '"" ada',
    // A NUL ends a C string: it must not end the engine's query text.
    'ada\u0000lovelace',
    '\u0000ada',
    'ada\u0000',
    '\u0000',
  ];
  for (const q of hostile) {
    const reply = await service.request('GET', `/users?q=${encodeURIComponent(q)}`);
    assert.ok(reply.status === 200 || reply.status === 400, `q=${q}: ${reply.status} ${reply.text}`);
    if (reply.status === 400) assertBad(reply, 'q', /no word/);
  }
  assert.equal(sorted(await found(service, `q=${encodeURIComponent("'ada':*")}`)), ['Ada Lovelace', 'ada ada ada']);
  // Control characters separate words as white space does.
  assert.equal(await found(service, 'q=ada%00lovelace'), await found(service, 'q=ada%20lovelace'));
});

words('unicode letters are words; emoji are not, and a q of emoji alone is refused', async ({ service }) => {
  assert.equal(await found(service, 'q=%E6%9D%B1%E4%BA%AC'), ['東京 タワー']); // 東京
  assert.equal(await found(service, 'q=chloe%20%F0%9F%90%B6'), ['Chloé 🐶 Dog-walker']); // the emoji is no word
  assertBad(await service.request('GET', '/users?q=%F0%9F%90%B6'), 'q', /no word/);
  assertBad(await service.request('GET', '/users?q='), 'q', /no word/);
  assertBad(await service.request('GET', '/users?q=%20%20'), 'q', /no word/);
});

words('HEAD answers a search as GET does, without a body', async ({ service }) => {
  const get = await service.request('GET', '/users?q=ada');
  const head = await service.request('HEAD', '/users?q=ada');
  assert.is(head.status, 200);
  assert.is(head.text, '');
  assert.is(head.headers.get('content-length'), get.headers.get('content-length'));
  assert.is(head.headers.get('etag'), get.headers.get('etag'));
});

words('malformed and misplaced q are a 400 naming q or sort', async ({ service, ids }) => {
  assertBad(await service.request('GET', '/orders?q=ada'), 'q', /no searchable fields/);
  assertBad(await service.request('GET', '/users?q=ada&q=grace'), 'q', /more than once/);
  assertBad(await service.request('GET', `/users?q=${'a'.repeat(101)}`), 'q', /longer than 100/);
  assertBad(await service.request('GET', `/users?q=${Array(33).fill('w').join('%20')}`), 'q', /33 words/);
  assertBad(await service.request('GET', '/users?sort=relevance'), 'sort', /only a search has/);
  assertBad(await service.request('GET', '/users?q=ada&sort=-relevance'), 'sort', /best match first/);
  assertBad(await service.request('GET', '/users?q=ada&sort=name,relevance'), 'sort', /comes first/);
  const element = await service.request('GET', `/users/${ids.get('Ada Lovelace')}?q=ada`);
  assertBad(element, 'q');
});

const lists = suite<{ service: Service; owners: number[] }>('q with filters, sorting, counts, related lists and paging');

lists.before(async (ctx) => {
  ctx.service = await startService();
  ctx.owners = [];
  for (const name of ['Olivia Owner', 'Oscar Owner']) ctx.owners.push(await created(ctx.service, '/users', { ...userSample(), name }));
  // 30 pets: "Rex" in most names, some twice (a better match by relevance), spread over two owners and species.
  for (let i = 0; i < 30; i++) {
    const name = i % 5 === 0 ? `Rex Rex ${i}` : i % 3 === 0 ? `Spot ${i}` : `Rex the ${i % 2 ? 'brave' : 'calm'} ${i}`;
    await created(ctx.service, '/pets', { name, species: i % 2 ? 'dog' : 'cat', ownerId: ctx.owners[i % 2] });
  }
});

lists.after(async (ctx) => ctx.service?.close());

lists('q combines with filters and count=true', async ({ service }) => {
  const all = await walkList(service, '/pets?q=rex&limit=1000');
  assert.is(all.length, 22);
  const dogs = await service.request('GET', '/pets?q=rex&species=dog&count=true');
  assert.is(dogs.status, 200, dogs.text);
  assert.ok(dogs.body.every((p: Row) => p.species === 'dog' && /rex/i.test(p.name as string)));
  assert.is(dogs.headers.get('x-total-count'), String(dogs.body.length));
  assert.is(dogs.body.length, all.filter((p) => p.species === 'dog').length);
  const brave = await service.request('GET', '/pets?q=rex%20brave&count=true&limit=2');
  assert.is(brave.headers.get('x-total-count'), String(all.filter((p) => /brave/.test(p.name as string)).length));
});

lists('q shapes with fields and expand like any list', async ({ service, owners }) => {
  const reply = await service.request('GET', '/pets?q=brave&fields=id,name&expand=owner&limit=2');
  assert.is(reply.status, 200, reply.text);
  assert.is(reply.body.length, 2);
  for (const pet of reply.body) {
    assert.equal(Object.keys(pet), ['id', 'name', 'owner']);
    assert.match(pet.name, /brave/);
    assert.ok(owners.includes(pet.owner.id));
  }
  const paged = await walkList(service, '/pets?q=brave&fields=name&limit=2');
  assert.ok(paged.length > 2 && paged.every((p) => /brave/.test(p.name as string)));
});

lists('q on a related list searches that parent children only', async ({ service, owners }) => {
  const [first] = owners as [number];
  const mine = await walkList(service, `/users/${first}/pets?q=rex&limit=5`);
  assert.ok(mine.length > 0);
  assert.ok(mine.every((p) => p.ownerId === first && /rex/i.test(p.name as string)));
  const all = await walkList(service, '/pets?q=rex&limit=1000');
  assert.is(mine.length, all.filter((p) => p.ownerId === first).length);
});

lists('a cursor walk over a search, by key and by a field, has no duplicates or gaps', async ({ service }) => {
  const whole = await walkList(service, '/pets?q=rex&limit=1000');
  for (const order of ['', '&sort=-name', '&sort=species,-id']) {
    const paged = await walkList(service, `/pets?q=rex&limit=4${order}`);
    assert.is(paged.length, whole.length, order);
    assert.equal(sorted(paged.map((p) => String(p.id))), sorted(whole.map((p) => String(p.id))), order);
    assert.equal(paged, await walkList(service, `/pets?q=rex&limit=1000${order}`), order);
  }
});

lists('sort=relevance: best match first, ties by key, paged stably', async ({ service }) => {
  const ranked = await walkList(service, '/pets?q=rex&sort=relevance&limit=1000');
  assert.is(ranked.length, 22);
  // Names with "Rex" twice come before those with it once; within each, the key orders.
  const twice = ranked.filter((p) => /^Rex Rex/.test(p.name as string));
  assert.equal(ranked.slice(0, twice.length), twice);
  const ids = (rows: Row[]) => rows.map((p) => p.id as number);
  assert.equal(
    ids(twice),
    [...ids(twice)].sort((a, b) => a - b),
  );
  const paged = await walkList(service, '/pets?q=rex&sort=relevance&limit=3');
  assert.equal(ids(paged), ids(ranked));
  // Relevance then a field: the field orders within each rank.
  const byName = await walkList(service, '/pets?q=rex&sort=relevance,-name&limit=5');
  assert.is(byName.length, 22);
  assert.equal(sorted(ids(byName).map(String)), sorted(ids(ranked).map(String)));
});

lists('a cursor belongs to its search: another q or order refuses it', async ({ service }) => {
  const first = await service.request('GET', '/pets?q=rex&sort=relevance&limit=2');
  const link = nextLink(first) as string;
  const cursor = new URL(link, 'http://x').searchParams.get('cursor') as string;
  assertBad(await service.request('GET', `/pets?q=spot&sort=relevance&limit=2&cursor=${cursor}`), 'cursor');
  assertBad(await service.request('GET', `/pets?q=rex&limit=2&cursor=${cursor}`), 'cursor');
});

const writes = suite<{ service: Service }>('the search index follows every write');

writes.before(async (ctx) => {
  ctx.service = await startService();
});

writes.after(async (ctx) => ctx.service?.close());

writes('create, PUT, PATCH and DELETE are searchable at once; a failed write leaves nothing', async ({ service }) => {
  const email = userSample().email;
  const id = await created(service, '/users', { name: 'Marvin Paranoid', email });
  assert.equal(await found(service, 'q=marvin'), ['Marvin Paranoid']);
  assert.is((await service.request('PATCH', `/users/${id}`, { body: { name: 'Arthur Dent' } })).status, 200);
  assert.equal(await found(service, 'q=marvin'), []);
  assert.equal(await found(service, 'q=arthur'), ['Arthur Dent']);
  assert.is((await service.request('PUT', `/users/${id}`, { body: { name: 'Ford Prefect', email } })).status, 200);
  assert.equal(await found(service, 'q=arthur'), []);
  assert.equal(await found(service, 'q=prefect'), ['Ford Prefect']);
  // A create refused by the database (the email is taken) adds nothing to the index.
  assert.is((await service.request('POST', '/users', { body: { name: 'Zaphod', email } })).status, 409);
  assert.equal(await found(service, 'q=zaphod'), []);
  assert.is((await service.request('DELETE', `/users/${id}`)).status, 204);
  assert.equal(await found(service, 'q=prefect'), []);
});

writes('a search is answered from the index (the query plan uses it)', async ({ service }) => {
  if (BACKEND === 'sqlite') {
    // As the store writes a search in key order: the FTS5 index drives, in its rowid (the key) order, so a
    // page stops after its rows instead of every match being fetched and sorted.
    const plan = await service.sql(
      `EXPLAIN QUERY PLAN SELECT users.id FROM users JOIN restable_search_users ON restable_search_users.rowid = users.id
        WHERE restable_search_users MATCH '"ada"*' AND restable_search_users.rowid > 0 ORDER BY restable_search_users.rowid ASC LIMIT 101`,
    );
    const steps = plan.map((step) => String(step.detail));
    assert.ok(/^SCAN restable_search_users VIRTUAL TABLE INDEX/.test(steps[0] ?? ''), steps.join(' | '));
    assert.not.ok(
      steps.some((step) => /TEMP B-TREE/.test(step)),
      steps.join(' | '),
    );
  } else {
    // Enough rows, of a vocabulary of 1000 words, that a scan would cost more than the index (on a handful,
    // PostgreSQL rightly scans).
    await service.sql(
      `INSERT INTO users (name, email, created_at, updated_at)
       SELECT 'user ' || g || ' w' || (g % 1000), 'user' || g || '@plan.example', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
         FROM generate_series(1, 200000) g`,
    );
    await service.sql('ANALYZE users');
    // By relevance every match is ranked: the GIN index finds them. (In key order, PostgreSQL may rather walk the key
    // and filter when it expects many matches: its choice, by its statistics.)
    const plan = await service.sql(
      `EXPLAIN SELECT id FROM users WHERE restable_search @@ $1::tsquery
        ORDER BY ts_rank(restable_search, $1::tsquery) DESC, id LIMIT 101`,
      ["'marvin':*"],
    );
    assert.ok(
      plan.some((step) => /restable_search_users/.test(String(step['QUERY PLAN']))),
      JSON.stringify(plan),
    );
  }
});

const unbuilt = suite<{ service: Service }>('a search index its migration has not built');

unbuilt.before(async (ctx) => {
  ctx.service = await startService();
  // As if the service had started before the index's migration ran.
  const drops =
    BACKEND === 'sqlite'
      ? ['insert', 'delete', 'update'].map((t) => `DROP TRIGGER restable_search_pets_${t}`).concat('DROP TABLE restable_search_pets')
      : ['ALTER TABLE pets DROP COLUMN restable_search'];
  for (const statement of drops) await ctx.service.sql(statement);
});

unbuilt.after(async (ctx) => ctx.service?.close());

unbuilt('a search is a 503 that says to apply the migrations; the rest of the kind is served', async ({ service }) => {
  const reply = await service.request('GET', '/pets?q=rex');
  assert.is(reply.status, 503, reply.text);
  assert.match(reply.body.detail, /search index is not built; apply the migrations/);
  assert.is((await service.request('GET', '/pets?q=rex&count=true')).status, 503);
  assert.is((await service.request('GET', '/pets')).status, 200);
  assert.is((await service.request('GET', '/users?q=ada')).status, 200);
});

words.run();
lists.run();
writes.run();
unbuilt.run();

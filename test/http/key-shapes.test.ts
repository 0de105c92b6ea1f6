// Keys and values real databases have beyond the pet shop (SQLite): a BLOB key addressed by its
// base64 text, a REAL key the client gives (it is no rowid), a long text key paged by the default
// order, NUMERIC values past a double's range refused rather than stored as Inf or 0, and JSON values kept
// whole (a `__proto__` member included; an SQL default is a JSON value, not its text).
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { integer, numeric, real, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { bytes, untyped } from '../../src/db/columns.js';
import * as petShop from '../pet-shop/schema.js';
import { type Service, startService, walkList } from '../support/helpers.js';

const blobs = sqliteTable('Blobs', { key: bytes('Key').primaryKey(), note: text('Note') });
const reals = sqliteTable('Reals', { key: real('Key').primaryKey(), note: text('Note') });
const words = sqliteTable('Words', { word: text('Word').primaryKey(), amount: numeric('Amount') });
const documents = sqliteTable('Documents', {
  id: integer('Id').primaryKey(),
  meta: text('Meta', { mode: 'json' }),
  tags: text('Tags', { mode: 'json' }).notNull().default(sql`'[]'`),
});
const amounts = sqliteTable('Amounts', {
  id: integer('Id').primaryKey(),
  quantity: integer('Quantity'),
  code: integer('Code'),
});
const labels = sqliteTable('Labels', { id: integer('Id').primaryKey() });
// Timestamps kept as numbers (seconds, milliseconds), written as the text a GET shows.
const moments = sqliteTable('Moments', {
  id: integer('Id').primaryKey(),
  at: integer('At', { mode: 'timestamp' }),
  atMs: integer('AtMs', { mode: 'timestamp_ms' }).notNull(),
});
// Keys of other types, each addressed by one path only.
const loose = sqliteTable('Loose', { key: untyped('Key').primaryKey(), note: text('Note') });
const prices = sqliteTable('Prices', { key: numeric('Key').primaryKey(), note: text('Note') });
// A text key the server makes by a JS function: a new one for every element.
const passes = sqliteTable('Passes', {
  id: text('Id')
    .primaryKey()
    .$defaultFn(() => randomUUID()),
  note: text('Note'),
});
const studios = sqliteTable('Studios', { id: integer('Id').primaryKey() });
// One column with a foreign key to each of two tables: two related paths over the same field.
const records = sqliteTable('Records', {
  id: integer('Id').primaryKey(),
  ref: integer('Ref')
    .references(() => labels.id)
    .references(() => studios.id),
});

const shapes = suite<{ service: Service }>('key shapes of existing databases');

shapes.before(async (ctx) => {
  ctx.service = await startService({
    schema: { ...petShop, blobs, reals, words, documents, amounts, labels, studios, records, passes, moments, loose, prices },
    prepare: ({ sqlite }) =>
      sqlite.exec(`CREATE TABLE "Blobs" ("Key" BLOB PRIMARY KEY, "Note" TEXT);
                   CREATE TABLE "Reals" ("Key" REAL PRIMARY KEY, "Note" TEXT);
                   CREATE TABLE "Words" ("Word" TEXT PRIMARY KEY, "Amount" NUMERIC) WITHOUT ROWID;
                   CREATE TABLE "Documents" ("Id" INTEGER PRIMARY KEY, "Meta" TEXT, "Tags" TEXT NOT NULL DEFAULT '[]');
                   CREATE TABLE "Amounts" ("Id" INTEGER PRIMARY KEY, "Quantity" INTEGER, "Code" INTEGER);
                   INSERT INTO "Amounts" VALUES (1, 1.5, 'soon'), (2, 9007199254740993, 1), (3, 2, 'later'), (4, NULL, 2), (5, -7, 3);
                   CREATE TABLE "Labels" ("Id" INTEGER PRIMARY KEY);
                   CREATE TABLE "Passes" ("Id" TEXT PRIMARY KEY NOT NULL, "Note" TEXT);
                   CREATE TABLE "Loose" ("Key" PRIMARY KEY, "Note" TEXT);
                   INSERT INTO "Loose" VALUES (1, 'one'), ('s', 'text'), (2.5, 'real');
                   CREATE TABLE "Prices" ("Key" NUMERIC PRIMARY KEY, "Note" TEXT);
                   INSERT INTO "Prices" VALUES (2.5, 'a'), (100, 'b'), ('abc', 'c');
                   CREATE TABLE "Moments" ("Id" INTEGER PRIMARY KEY, "At" INTEGER, "AtMs" INTEGER NOT NULL);
                   CREATE TABLE "Studios" ("Id" INTEGER PRIMARY KEY);
                   CREATE TABLE "Records" ("Id" INTEGER PRIMARY KEY,
                     "Ref" INTEGER REFERENCES "Labels" ("Id") REFERENCES "Studios" ("Id"));
                   PRAGMA foreign_keys = OFF;
                   INSERT INTO "Labels" VALUES (1);
                   INSERT INTO "Studios" VALUES (1), (7);
                   INSERT INTO "Records" VALUES (10, 1), (11, 7);`),
  });
});

shapes.after(async (ctx) => ctx.service?.close());

shapes(
  'values other software stored that the API would refuse (1.5 or text in an INTEGER) page on; past 2^53 a cursor is a 400',
  async ({ service }) => {
    for (const sort of ['code', '-code', 'quantity', '-quantity', 'quantity,-code']) {
      const filter = sort.includes('quantity') ? '&id[ne]=2' : ''; // 2^53 + 1 has its own test below
      const rows = await walkList(service, `/Amounts?sort=${sort}&limit=1&fields=id${filter}`);
      const expected = filter ? [1, 3, 4, 5] : [1, 2, 3, 4, 5];
      assert.equal(rows.map((r) => r.id).sort(), expected, sort);
    }
    // An integer beyond 2^53 is read rounded: no page can say exactly where the next starts, so the cursor
    // after it is a 400 naming the problem (never a page that repeats the last, for ever).
    const page = await service.request('GET', '/Amounts?sort=-quantity&limit=1&fields=id');
    assert.equal(page.body, [{ id: 2 }]);
    const next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1] as string;
    const refused = await service.request('GET', next);
    assert.is(refused.status, 400, refused.text);
    assert.match(refused.body.detail, /beyond ±\(2\^53 − 1\)/);
  },
);

shapes(
  'a JSON value is kept whole, a __proto__ member too, and an SQL default stays a JSON value on PUT and PATCH',
  async ({ service }) => {
    const meta = '{"__proto__":{"p":1},"constructor":2,"nested":{"__proto__":3}}';
    const created = await service.request('POST', '/Documents', {
      raw: `{"meta":${meta}}`,
      headers: { 'Content-Type': 'application/json' },
    });
    assert.is(created.status, 201, created.text);
    assert.is(JSON.stringify(JSON.parse(created.text).meta), JSON.stringify(JSON.parse(meta)));
    assert.equal(created.body.tags, []);
    const location = created.headers.get('location') as string;
    const read = await service.request('GET', location);
    assert.ok(read.text.includes('"meta":{"__proto__":{"p":1},"constructor":2,"nested":{"__proto__":3}}'), read.text);

    const replaced = await service.request('PUT', location, { body: { meta: { a: 1 } } });
    assert.is(replaced.status, 200, replaced.text);
    assert.equal(replaced.body.tags, [], 'the default, as a JSON array, not the text "[]"');
    const tagged = await service.request('PATCH', location, { body: { tags: ['x'] } });
    assert.equal(tagged.body.tags, ['x']);
    const reset = await service.request('PATCH', location, { body: { tags: null } });
    assert.equal(reset.body.tags, []);
    const merged = await service.request('PATCH', location, {
      raw: `{"meta":{"__proto__":1}}`,
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    assert.is(merged.status, 200, merged.text);
    assert.ok(merged.text.includes('"meta":{"a":1,"__proto__":1}'), merged.text);
    assert.is((await service.request('PUT', location, { body: { meta: null, tags: null } })).status, 422, 'Tags is NOT NULL');
  },
);

shapes('/readyz finds every table and column of these schemas in the database', async ({ service }) => {
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 200, ready.text);
});

shapes('an empty BLOB key is refused: no path would address it', async ({ service }) => {
  const empty = await service.request('POST', '/Blobs', { body: { key: '', note: 'x' } });
  assert.is(empty.status, 422, empty.text);
  assert.equal(
    empty.body.errors.map((e: { path: string }) => e.path),
    ['key'],
  );
});

shapes('a BLOB key is addressed by its base64 text: read, changed and deleted', async ({ service }) => {
  const key = Buffer.from([0, 1, 2, 250]).toString('base64');
  const made = await service.request('POST', '/Blobs', { body: { key, note: 'x' } });
  assert.is(made.status, 201, made.text);
  const location = made.headers.get('location') as string;
  assert.is(location, `/Blobs/${encodeURIComponent(key)}`);
  assert.equal((await service.request('GET', location)).body, { key, note: 'x' });
  assert.is((await service.request('PATCH', location, { body: { note: 'y' } })).body.note, 'y');
  // The change feed names it by the same base64 text, and finds its element.
  const changes = (await service.request('GET', '/_changes?since=0&kinds=Blobs')).body;
  assert.equal(
    changes.map((c: { id: unknown; op: string }) => [c.op, c.id]),
    [
      ['create', key],
      ['update', key],
    ],
  );
  assert.equal(changes[1].element, { key, note: 'y' });
  assert.is((await service.request('DELETE', location)).status, 204);
  assert.is((await service.request('GET', location)).status, 404);
});

shapes('a REAL key is the client to give (it is no rowid): required on create, then addressable', async ({ service }) => {
  const missing = await service.request('POST', '/Reals', { body: { note: 'no key' } });
  assert.is(missing.status, 422, missing.text);
  assert.equal(
    missing.body.errors.map((e: { path: string }) => e.path),
    ['key'],
  );
  const made = await service.request('POST', '/Reals', { body: { key: 2.5, note: 'half' } });
  assert.is(made.status, 201, made.text);
  assert.is((await service.request('GET', made.headers.get('location') as string)).body.note, 'half');
  // Any double SQLite stores, not drizzle-zod's ±(2^47 − 1) (MySQL's bound for REAL).
  for (const key of [1e20, -6.02e23, 1e308, 2 ** 47]) {
    const big = await service.request('POST', '/Reals', { body: { key, note: 'big' } });
    assert.is(big.status, 201, `${key}: ${big.text}`);
    assert.is(big.body.key, key);
    const read = await service.request('GET', big.headers.get('location') as string);
    assert.is((await service.request('PUT', big.headers.get('location') as string, { body: read.body })).status, 200, `${key}: PUT back`);
  }
});

shapes('a long text key is paged by the default order on a table without rowid', async ({ service }) => {
  const long = (i: number) => `${String(i).padStart(3, '0')}-${'w'.repeat(200)}`;
  for (let i = 0; i < 5; i++) assert.is((await service.request('POST', '/Words', { body: { word: long(i) } })).status, 201);
  const all = await walkList(service, '/Words?limit=2');
  assert.equal(
    all.map((w) => w.word),
    [0, 1, 2, 3, 4].map(long),
  );
});

shapes('a text key is a path segment: never empty, ".", or ".." (which clients resolve away)', async ({ service }) => {
  for (const word of ['', '.', '..']) {
    const refused = await service.request('POST', '/Words', { body: { word } });
    assert.is(refused.status, 422, refused.text);
    assert.equal(
      refused.body.errors.map((e: { path: string }) => e.path),
      ['word'],
    );
  }
  for (const word of ['a.b', '...', '.x']) {
    const created = await service.request('POST', '/Words', { body: { word } });
    assert.is(created.status, 201, created.text);
    const location = created.headers.get('location') as string;
    assert.is((await service.request('GET', location)).body.word, word);
  }
});

shapes('a NUMERIC value past a double range is refused, not stored as Inf or 0', async ({ service }) => {
  for (const amount of ['1e999', '-1e400', '1e-400']) {
    const reply = await service.request('POST', '/Words', { body: { word: `n${amount}`, amount } });
    assert.is(reply.status, 422, `${amount}: ${reply.text}`);
  }
  for (const amount of ['0e5', '1.5e10', '-0.000']) {
    assert.is((await service.request('POST', '/Words', { body: { word: `n${amount}`, amount } })).status, 201, amount);
  }
});

shapes('a field referencing two kinds: each related path lists the rows of its own parent, or is a 404', async ({ service }) => {
  const ids = async (path: string) => {
    const reply = await service.request('GET', path);
    assert.is(reply.status, 200, `${path}: ${reply.text}`);
    return reply.body.map((row: { id: number }) => row.id);
  };
  // The first list prepares its statement; the second, over the same field, must not check the first one's parent.
  assert.equal(await ids('/Labels/1/Records'), [10]);
  assert.equal(await ids('/Studios/7/Records'), [11]);
  assert.equal(await ids('/Studios/1/Records?count=true'), [10]);
  const missing = await service.request('GET', '/Labels/7/Records');
  assert.is(missing.status, 404, `record 11 names label 7, which does not exist: ${missing.text}`);
});

shapes('a key made by $defaultFn is made anew for every element created, one by one and in bulk', async ({ service }) => {
  const ids = new Set<string>();
  for (const body of [{}, { note: 'a' }, {}, [{}, { note: 'b' }, {}]]) {
    const reply = await service.request('POST', '/Passes', { body });
    assert.is(reply.status, 201, reply.text);
    for (const element of [reply.body].flat()) {
      assert.match(element.id, /^[0-9a-f-]{36}$/);
      ids.add(element.id);
      assert.is((await service.request('GET', `/Passes/${element.id}`)).status, 200);
    }
    if (!Array.isArray(body)) assert.is(reply.headers.get('location'), `/Passes/${reply.body.id}`);
  }
  assert.is(ids.size, 6, 'every element has its own id');
  const given = await service.request('POST', '/Passes', { body: { id: 'mine' } });
  assert.is(given.status, 422, 'the server makes the key');
});

shapes('timestamps kept as numbers are written as the text a GET shows, and a GET can be sent back with PUT', async ({ service }) => {
  const created = await service.request('POST', '/Moments', {
    body: { at: '2023-11-14T22:13:20.900Z', atMs: '2023-11-14T23:13:20.123+01:00' },
  });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body, { id: created.body.id, at: '2023-11-14T22:13:20.000Z', atMs: '2023-11-14T22:13:20.123Z' });
  const path = `/Moments/${created.body.id}`;
  const put = await service.request('PUT', path, { body: (await service.request('GET', path)).body });
  assert.is(put.status, 200, put.text);
  assert.equal(put.body, created.body);
  assert.is(put.headers.get('etag'), created.headers.get('etag'));
  // A patch that leaves them alone keeps them (the stored instants merge as the text a GET shows).
  const untouched = await service.request('PATCH', path, { body: {} });
  assert.is(untouched.status, 200, untouched.text);
  assert.equal(untouched.body, created.body);
  // Seconds mode: filters compare the instant given, not one cut to its second.
  const count = async (query: string) => (await service.request('GET', `/Moments?${query}`)).body.length;
  assert.is(await count('at=2023-11-14T22:13:20Z'), 1);
  assert.is(await count('at=2023-11-14T22:13:20.400Z'), 0);
  assert.is(await count('at[lt]=2023-11-14T22:13:20.500Z'), 1);
  assert.is(await count('at[gte]=2023-11-14T22:13:20.500Z'), 0);
  assert.is(await count('atMs[gt]=2023-11-14T22:13:20.122Z&atMs[lt]=2023-11-14T22:13:20.124Z'), 1);
  const patched = await service.request('PATCH', path, { body: { at: null, atMs: '2024-02-29' } });
  assert.equal(patched.body, { id: created.body.id, at: null, atMs: '2024-02-29T00:00:00.000Z' });
  const schema = (await service.request('GET', '/openapi.json')).body.components.schemas.Moments.properties;
  assert.equal(schema.atMs, { type: 'string', format: 'date-time' }, 'served as ISO 8601 text');
  const bad = await service.request('POST', '/Moments', { body: { atMs: 'soon' } });
  assert.is(bad.status, 422, bad.text);
  assert.equal(bad.body.errors, [{ path: 'atMs', message: 'must be an ISO 8601 date-time, e.g. "2026-01-31T12:00:00Z"' }]);
});

shapes('each element has one path: REAL, BLOB and untyped keys only as their element path writes them', async ({ service }) => {
  const real = await service.request('POST', '/Reals', { body: { key: 3.25, note: 'r' } });
  assert.is(real.headers.get('location'), '/Reals/3.25', real.text);
  const blob = await service.request('POST', '/Blobs', { body: { key: 'AQID', note: 'b' } });
  assert.is(blob.headers.get('location'), '/Blobs/AQID', blob.text);
  const padded = await service.request('POST', '/Blobs', { body: { key: 'AQI=', note: 'b' } });
  assert.is(padded.headers.get('location'), `/Blobs/${encodeURIComponent('AQI=')}`, padded.text);
  const status = async (path: string) => (await service.request('GET', path)).status;
  for (const path of [
    '/Reals/3.25',
    '/Blobs/AQID',
    '/Blobs/AQI%3D',
    '/Loose/1',
    '/Loose/s',
    '/Loose/2.5',
    '/Prices/2.5',
    '/Prices/100',
    '/Prices/abc',
  ])
    assert.is(await status(path), 200, path);
  for (const path of ['/Reals/3.250', '/Reals/03.25', '/Reals/+3.25', '/Reals/325e-2', '/Blobs/AQI', '/Blobs/AQID%3D', '/Loose/01'])
    assert.is(await status(path), 404, path);
  // A NUMERIC key compares as a number (as on PostgreSQL, which writes `2.50` as given).
  assert.is((await service.request('GET', '/Prices/2.50')).body.key, '2.5');
  const listed = (await service.request('GET', '/Loose')).body.map((row: { key: unknown }) => row.key);
  assert.equal(listed.sort(), [1, 2.5, 's']);
  for (const key of ['', '.', '..']) {
    const refused = await service.request('POST', '/Loose', { body: { key, note: 'n' } });
    assert.is(refused.status, 422, `${JSON.stringify(key)}: ${refused.text}`);
  }
  const made = await service.request('POST', '/Loose', { body: { key: 7, note: 'n' } });
  assert.is(made.headers.get('location'), '/Loose/7');
  assert.is((await service.request('GET', '/Loose/7')).body.note, 'n');
});

shapes.run();

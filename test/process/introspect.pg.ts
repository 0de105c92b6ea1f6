// `npm run introspect -- --url` on an existing PostgreSQL database (test/fixtures/music-store.pg.sql): the
// schema it writes, its baseline recorded as applied, and the database served as it is, untouched until a write.
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { introspect } from '../../src/cli/introspect.js';
import { checkContract } from '../../src/contract/checker.js';
import { createPgDatabase, ROOT, runSql, type Service, startService, tempDir } from '../support/helpers.js';
import { COMPOSITE_REFERENCES, checkCompositeReferences, checkExpressionUnique, EXPRESSION_UNIQUE } from '../support/references.js';

const FIXTURE = join(ROOT, 'test', 'fixtures', 'music-store.pg.sql');

/** Every row of every table of the public schema, as JSON, in a fixed order: equal digests mean nothing changed. */
async function rowsOf(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = (
      await client.query<{ name: string }>(
        "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'restable_%' ORDER BY tablename",
      )
    ).rows;
    const parts: string[] = [];
    for (const { name } of tables) {
      const rows = (await client.query(`SELECT row_to_json(t)::text AS j FROM "${name}" t ORDER BY 1`)).rows.map((r) => r.j as string);
      parts.push(`${name}:${rows.join('\n')}`);
    }
    return parts.join('\n\n');
  } finally {
    await client.end();
  }
}

/** A temporary folder for a generated schema module, which imports drizzle: node_modules must be reachable from it. */
function schemaDir(): { dir: string; remove: () => void } {
  const temp = tempDir();
  symlinkSync(join(ROOT, 'node_modules'), join(temp.dir, 'node_modules'), 'dir');
  writeFileSync(join(temp.dir, 'package.json'), '{ "type": "module" }\n');
  return temp;
}

/** Introspects a database into `dir` and serves the schema written: on the introspected database itself when it is PostgreSQL's. */
async function serveIntrospected(dir: string, from: { url: string } | { file: string }): Promise<{ source: string; service: Service }> {
  const schemaPath = join(dir, 'schema.ts');
  const out = join(dir, 'migrations');
  await introspect({ ...from, schema: schemaPath, out, log: () => {} });
  const schema = { ...(await import(pathToFileURL(schemaPath).href)) } as Record<string, unknown>;
  const postgresUrl = 'url' in from ? from.url : undefined;
  const service = await startService({ schema, migrationsFolder: out, pgMigrationsFolder: join(out, 'pg'), postgresUrl });
  return { source: readFileSync(schemaPath, 'utf8'), service };
}

/** A suite's context over a new PostgreSQL database: introspected and served by servePgFixture. */
interface PgFixture {
  service: Service;
  url: string;
  source: string;
  drop: () => Promise<void>;
  remove: () => void;
}

/** Builds a new database with `sql`, then introspects and serves it; `loaded` runs in between (a digest of the rows, say). */
async function servePgFixture(ctx: Partial<PgFixture>, sql: string, loaded?: (url: string) => Promise<void>): Promise<void> {
  const database = await createPgDatabase();
  ctx.url = database.url;
  ctx.drop = database.drop;
  await runSql(database.url, sql);
  await loaded?.(database.url);
  const { dir, remove } = schemaDir();
  ctx.remove = remove;
  Object.assign(ctx, await serveIntrospected(dir, { url: database.url }));
}

/** Takes down what servePgFixture made, as far as it got. */
async function closePgFixture(ctx: Partial<PgFixture>): Promise<void> {
  await ctx.service?.close();
  await ctx.drop?.();
  ctx.remove?.();
}

const fromPostgres = suite<PgFixture & { before: string }>('npm run introspect -- --url: an existing PostgreSQL database');

fromPostgres.before((ctx) =>
  servePgFixture(ctx, readFileSync(FIXTURE, 'utf8'), async (url) => {
    ctx.before = await rowsOf(url);
  }),
);

fromPostgres.after(closePgFixture);

fromPostgres('the schema declares what SQLite can mean too, and notes the rest', ({ source }) => {
  assert.match(source, "meta: text('Meta', { mode: 'json' }).notNull().default({ tags: [] })");
  // now() is CURRENT_TIMESTAMP on both engines; a partition is its table's; another schema's table is not served.
  assert.match(source, "playedAt: untyped('PlayedAt').notNull().default(sql`CURRENT_TIMESTAMP`)");
  assert.not.match(source, /Sale_eu|Sale_rest/);
  assert.match(source, '// foreign key (LabelId) → Label names a table not served here');
  assert.match(source, "labelId: integer('LabelId'),");
});

fromPostgres(
  'the baseline is recorded, not run; restable adds its own tables; no row changed by reading',
  async ({ service, url, before }) => {
    const recorded = await runSql(url, 'SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations');
    assert.is(recorded[0]?.n, 2); // the baseline (recorded by introspect) and restable's tables (applied at start)
    const index = await service.request('GET', '/');
    const hrefs = (index.body.resources as { href: string }[]).map((r) => r.href);
    assert.equal(hrefs.sort(), ['/Album', '/AlbumCount', '/Artist', '/Employee', '/Play%20Log', '/Sale', '/Tag', '/Ticket']);
    for (const href of hrefs) {
      const list = await service.request('GET', `${href}?limit=5`);
      assert.is(list.status, 200, `${href}: ${list.text}`);
      assert.ok(list.body.length > 0, `${href} is empty`);
    }
    assert.is((await service.request('GET', '/Tag/genre,rock%2C%20hard')).body.note, 'a comma');
    assert.is((await service.request('GET', '/Employee/2/Employee')).body[0].lastName, 'Peacock');
    assert.is((await service.request('GET', '/Employee/1/TicketByOpenedBy')).status, 200);
    assert.equal((await service.request('GET', '/Sale/7,us')).body, { saleNo: 7, region: 'us', on: '2009-01-08', amount: '7.50' });
    assert.equal(await rowsOf(url), before);
  },
);

fromPostgres('values keep their types: numeric as exact text, bytea as base64, booleans, timestamps', async ({ service }) => {
  const album = (await service.request('GET', '/Album/10')).body;
  assert.is(album.price, '10.99');
  assert.is(album.cover, Buffer.from('89504e47', 'hex').toString('base64'));
  assert.is(album.live, false);
  assert.match(album.releasedAt, /^2009-01-11/);
  assert.is((await service.request('GET', '/Album/7')).body.live, true);
  assert.equal(album.meta, { tags: [] });
});

fromPostgres('writes work and are checked; read-only kinds refuse them', async ({ service, url, before }) => {
  const created = await service.request('POST', '/Album', {
    body: { title: 'New', artistId: 1, price: '1.50', live: true, releasedAt: '2024-05-06T07:08:09Z', meta: { tags: ['ü', 1, null] } },
  });
  assert.is(created.status, 201, created.text);
  assert.match(created.body.releasedAt, /^2024-05-06 07:08:09/);
  assert.is(created.body.price, '1.50');
  assert.is(created.body.live, true);
  assert.equal(created.body.meta, { tags: ['ü', 1, null] });
  const stored = await runSql(
    url,
    `SELECT "Meta" AS meta, pg_typeof("Meta")::text AS type FROM "Album" WHERE "AlbumId" = ${created.body.albumId}`,
  );
  assert.equal(stored[0], { meta: { tags: ['ü', 1, null] }, type: 'jsonb' });
  assert.is((await service.request('POST', '/Album', { body: { title: 'Orphan', artistId: 987654 } })).status, 422);
  assert.is((await service.request('POST', '/Play%20Log', { body: {} })).status, 405);
  assert.is((await service.request('DELETE', '/AlbumCount')).status, 405);
  assert.is.not(await rowsOf(url), before);
});

fromPostgres(
  'a numeric takes a JSON number it keeps exactly, as its text; one it would round is refused, saying to send text',
  async ({ service }) => {
    const created = await service.request('POST', '/Album', { body: { title: 'Priced', artistId: 1, price: 7.5, live: false } });
    assert.is(created.status, 201, created.text);
    assert.is(created.body.price, '7.50', 'as PostgreSQL writes a numeric(10,2)');
    assert.is(created.body.live, false);
    const rounded = await service.request('PATCH', `/Album/${created.body.albumId}`, { body: { price: 0.30000000000000004 } });
    assert.is(rounded.status, 422, rounded.text);
    assert.equal(
      rounded.body.errors.map((e: { path: string }) => e.path),
      ['price'],
    );
    assert.match(rounded.body.errors[0].message, /send the decimal as text/);
    assert.is((await service.request('GET', `/Album/${created.body.albumId}`)).body.price, '7.50');
  },
);

fromPostgres('every path passes the contract checker', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const report = await checkContract(service.url, doc);
  assert.equal(
    report.probes.filter((p) => !p.ok),
    [],
  );
});

fromPostgres.run();

const givenKey = suite<{ service: Service; remove: () => void }>('an introspected integer key SQLite does not assign, on PostgreSQL');

givenKey.before(async (ctx) => {
  const { dir, remove } = schemaDir();
  ctx.remove = remove;
  const file = join(dir, 'keys.db');
  const sqlite = new Database(file);
  sqlite.exec(
    'CREATE TABLE "IntKey" ("id" INT PRIMARY KEY, "v" TEXT);' +
      'CREATE TABLE "Defs" ("id" INTEGER PRIMARY KEY, "n" INTEGER NOT NULL, "twice" INTEGER GENERATED ALWAYS AS ("n" * 2) VIRTUAL);' +
      'CREATE TABLE "Employee" ("id" INTEGER PRIMARY KEY, "email" TEXT NOT NULL UNIQUE);' +
      'CREATE TABLE "Desk" ("id" INTEGER PRIMARY KEY, "code" TEXT NOT NULL UNIQUE);' +
      'CREATE TABLE "Mail" ("id" INTEGER PRIMARY KEY, "to" TEXT REFERENCES "Employee" ("email"), "desk" TEXT REFERENCES "Desk" ("code"));' +
      'CREATE TABLE "Node" ("id" INTEGER PRIMARY KEY, "code" TEXT NOT NULL UNIQUE, "parentCode" TEXT REFERENCES "Node" ("code"));' +
      COMPOSITE_REFERENCES,
  );
  sqlite.close();
  ctx.service = (await serveIntrospected(dir, { file })).service;
});

givenKey.after(async (ctx) => {
  await ctx.service?.close();
  ctx.remove?.();
});

givenKey('is a bigint the database does not assign: a create needs it, and it filters as an integer', async ({ service }) => {
  const [column] = await service.sql(
    "SELECT data_type AS type, is_identity AS identity FROM information_schema.columns WHERE table_name = 'IntKey' AND column_name = 'id'",
  );
  assert.equal(column, { type: 'bigint', identity: 'NO' });
  const refused = await service.request('POST', '/IntKey', { body: { v: 'a' } });
  assert.is(refused.status, 422, refused.text);
  assert.equal(
    refused.body.errors.map((e: { path: string }) => e.path),
    ['id'],
  );
  const created = await service.request('POST', '/IntKey', { body: { id: 7, v: 'a' } });
  assert.is(created.status, 201, created.text);
  assert.is(created.headers.get('location'), '/IntKey/7');
  assert.equal((await service.request('GET', '/IntKey?id[gt]=5')).body, [{ id: 7, v: 'a' }]);
  assert.equal((await service.request('GET', '/IntKey/7')).body, { id: 7, v: 'a' });
});

givenKey('a generated column is generated on PostgreSQL too: computed on every write, never set by a client', async ({ service }) => {
  const created = await service.request('POST', '/Defs', { body: { n: 5 } });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body, { id: 1, n: 5, twice: 10 });
  const replaced = await service.request('PUT', '/Defs/1', { body: { ...created.body, n: 7 } });
  assert.equal(replaced.body, { id: 1, n: 7, twice: 14 });
  assert.equal((await service.request('PATCH', '/Defs/1', { body: { n: 1 } })).body, { id: 1, n: 1, twice: 2 });
  assert.is((await service.request('PATCH', '/Defs/1', { body: { twice: 4 } })).status, 422);
});

givenKey('foreign keys to a unique field other than the key: a 422 naming each field, a 409 naming who names it', async ({ service }) => {
  assert.is((await service.request('POST', '/Employee', { body: { email: 'ada@example.com' } })).status, 201);
  assert.is((await service.request('POST', '/Desk', { body: { code: 'D1' } })).status, 201);
  const dangling = await service.request('POST', '/Mail', { body: { to: 'nobody@example.com', desk: 'D9' } });
  assert.is(dangling.status, 422, dangling.text);
  assert.equal(dangling.body.errors, [
    { path: 'to', message: 'names no Employee element' },
    { path: 'desk', message: 'names no Desk element' },
  ]);
  assert.is((await service.request('POST', '/Mail', { body: { to: 'ada@example.com', desk: 'D1' } })).status, 201);
  const renamed = await service.request('PATCH', '/Employee/1', { body: { email: 'ada@elsewhere.example' } });
  assert.is(renamed.status, 409, renamed.text);
  assert.match(renamed.body.detail, /still referenced by Mail \(to\)/);
  const deleted = await service.request('DELETE', '/Employee/1');
  assert.is(deleted.status, 409, deleted.text);
  assert.match(deleted.body.detail, /still referenced by Mail \(to\)/);
  // A kind that refers to itself: changing the field its own rows name is a 409 too, a reference to nothing a 422.
  assert.is((await service.request('POST', '/Node', { body: { code: 'a' } })).status, 201);
  assert.is((await service.request('POST', '/Node', { body: { code: 'b', parentCode: 'a' } })).status, 201);
  const renamed2 = await service.request('PATCH', '/Node/1', { body: { code: 'a2' } });
  assert.is(renamed2.status, 409, renamed2.text);
  const dangling2 = await service.request('PATCH', '/Node/2', { body: { parentCode: 'zz' } });
  assert.is(dangling2.status, 422, dangling2.text);
  assert.equal(dangling2.body.errors, [{ path: 'parentCode', message: 'names no Node element' }]);
});

givenKey('a pair naming nothing is a 422 naming both fields, as SQLite names them', async ({ service }) => {
  await checkCompositeReferences(service);
});

givenKey('a value taken under a unique index on an expression is a 409 that names no field, and not the key', async ({ service }) => {
  // Introspection leaves the index in the SQLite file, undeclared: PostgreSQL gets it by hand.
  await service.sql(EXPRESSION_UNIQUE);
  await checkExpressionUnique(service);
});

givenKey.run();

const pgGivenKey = suite<PgFixture>('an introspected integer key PostgreSQL does not assign (no identity, no serial, not a foreign key)');

pgGivenKey.before((ctx) =>
  servePgFixture(
    ctx,
    `CREATE TABLE "Code" ("CodeId" integer PRIMARY KEY, "Name" text NOT NULL);
     CREATE TABLE "Item" ("ItemId" integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "CodeId" integer REFERENCES "Code");
     CREATE TABLE "Detail" ("CodeId" integer PRIMARY KEY REFERENCES "Code", "Text" text);
     INSERT INTO "Code" VALUES (1, 'one');`,
  ),
);

pgGivenKey.after(closePgFixture);

pgGivenKey('is declared intKey(); identity keys and keys that are foreign keys stay integer()', ({ source }) => {
  assert.match(source, "codeId: intKey('CodeId').primaryKey(),");
  assert.match(source, "itemId: integer('ItemId').primaryKey(),");
  assert.match(source, /codeId: integer\('CodeId'\)\s*\.primaryKey\(\)\s*\.references\(/);
  assert.not.match(source, /ADD GENERATED|not assigned by PostgreSQL/);
});

pgGivenKey('a create needs it: a 422 naming it without it, a 201 at it with it; the column is untouched', async ({ service }) => {
  const refused = await service.request('POST', '/Code', { body: { name: 'seven' } });
  assert.is(refused.status, 422, refused.text);
  assert.equal(
    refused.body.errors.map((e: { path: string }) => e.path),
    ['codeId'],
  );
  const created = await service.request('POST', '/Code', { body: { codeId: 7, name: 'seven' } });
  assert.is(created.status, 201, created.text);
  assert.is(created.headers.get('location'), '/Code/7');
  assert.equal(created.body, { codeId: 7, name: 'seven' });
  // The baseline is recorded, never run: the database keeps its own column.
  const [column] = await service.sql(
    "SELECT data_type AS type, is_identity AS identity, column_default AS default FROM information_schema.columns WHERE table_name = 'Code' AND column_name = 'CodeId'",
  );
  assert.equal(column, { type: 'integer', identity: 'NO', default: null });
});

pgGivenKey('read, replaced, patched, filtered and deleted at the key given', async ({ service }) => {
  assert.is((await service.request('POST', '/Code', { body: { codeId: 20, name: 'twenty' } })).status, 201);
  assert.equal((await service.request('GET', '/Code/20')).body, { codeId: 20, name: 'twenty' });
  const replaced = await service.request('PUT', '/Code/20', { body: { codeId: 20, name: 'XX' } });
  assert.is(replaced.status, 200, replaced.text);
  assert.equal(replaced.body, { codeId: 20, name: 'XX' });
  const patched = await service.request('PATCH', '/Code/20', { body: { name: 'xx' } });
  assert.is(patched.status, 200, patched.text);
  assert.equal(patched.body, { codeId: 20, name: 'xx' });
  assert.equal((await service.request('GET', '/Code?codeId[gte]=20')).body, [{ codeId: 20, name: 'xx' }]);
  assert.equal((await service.request('GET', '/Code?codeId=1')).body, [{ codeId: 1, name: 'one' }]);
  assert.is((await service.request('DELETE', '/Code/20')).status, 204);
  assert.is((await service.request('GET', '/Code/20')).status, 404);
});

pgGivenKey('an identity key beside it is still assigned by the database', async ({ service }) => {
  const first = await service.request('POST', '/Item', { body: { codeId: 1 } });
  assert.is(first.status, 201, first.text);
  assert.type(first.body.itemId, 'number');
  assert.is(first.headers.get('location'), `/Item/${first.body.itemId}`);
  const second = await service.request('POST', '/Item', { body: { codeId: 1 } });
  assert.is(second.body.itemId, first.body.itemId + 1);
});

pgGivenKey.run();

const pgNative = suite<PgFixture>(
  'introspected PostgreSQL columns of types without a SQLite twin (uuid, enum, inet, arrays, times): read and written',
);

pgNative.before((ctx) =>
  servePgFixture(
    ctx,
    // The database's own output formats are not ISO (a date as 02/01/2025, IST read back as Israel's time): the
    // service's sessions set theirs, so what it serves means what it says and goes back unchanged.
    `DO $$ BEGIN
       EXECUTE format('ALTER DATABASE %I SET datestyle = %L', current_database(), 'SQL, DMY');
       EXECUTE format('ALTER DATABASE %I SET timezone = %L', current_database(), 'Asia/Kolkata');
     END $$;
     CREATE TYPE "Mood" AS ENUM ('ok', 'sad');
     CREATE TABLE "Visit" (
       "VisitId" integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
       "Token" uuid NOT NULL, "Mood" "Mood" NOT NULL DEFAULT 'ok', "From" inet, "Tags" text[] DEFAULT '{}', "Sizes" integer[],
       "At" time, "Took" interval, "On" date, "SeenAt" timestamptz NOT NULL DEFAULT now());
     INSERT INTO "Visit" ("Token", "Mood", "From", "Tags", "Sizes", "At", "Took", "On")
       VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'sad', '10.0.0.1', '{x,"y z"}', '{1,2}', '10:11:12', '1 day', '2024-05-06');
     CREATE TABLE line ("Code" uuid PRIMARY KEY, "Mood" "Mood", "Note" text);
     INSERT INTO line VALUES ('00000000-0000-0000-0000-00000000000a', 'ok', 'a'), ('00000000-0000-0000-0000-00000000000b', 'sad', 'b'),
       ('00000000-0000-0000-0000-00000000000c', NULL, 'c');
     CREATE TABLE "Stop" ("StopId" integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
       "LineCode" uuid REFERENCES line ("Code"), "VisitId" integer REFERENCES "Visit" ("VisitId"));
     CREATE TABLE "Shelf" ("Tags" text[] PRIMARY KEY, "N" integer);
     CREATE TABLE "Book" ("BookId" integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "ShelfTags" text[] REFERENCES "Shelf" ("Tags"));
     INSERT INTO "Shelf" VALUES ('{a,b}', 1);
     INSERT INTO "Book" ("ShelfTags") VALUES ('{a,b}');
     CREATE TABLE "Slot" ("At" timestamp PRIMARY KEY, "N" integer);
     CREATE TABLE "Pass" ("PassId" uuid PRIMARY KEY DEFAULT gen_random_uuid(), "Holder" text NOT NULL, "Ref" uuid NOT NULL DEFAULT gen_random_uuid());`,
  ),
);

pgNative.after(closePgFixture);

/** The row as PostgreSQL holds it, each value as its own text. */
async function visitInDatabase(url: string, id: number): Promise<Record<string, unknown> | undefined> {
  const [row] = await runSql(
    url,
    `SELECT "Token"::text AS token, "Mood"::text AS mood, "From"::text AS "from", "Tags"::text AS tags, "Sizes"::text AS sizes,
            "At"::text AS at, "Took"::text AS took, to_char("On", 'YYYY-MM-DD') AS "on", extract(epoch FROM "SeenAt")::text AS seen
       FROM "Visit" WHERE "VisitId" = ${id}`,
  );
  return row;
}

pgNative(
  'a create writes each value in the column’s own type; the literal defaults declared (an enum label, an array) are applied',
  async ({ service, url }) => {
    const created = await service.request('POST', '/Visit', {
      body: { token: 'b1eebc99-9c0b-4ef8-bb6d-6bb9bd380a22', from: '192.168.1.0/24', at: '23:59:00', took: '2 hours', on: '2025-01-02' },
    });
    assert.is(created.status, 201, created.text);
    assert.is(created.body.token, 'b1eebc99-9c0b-4ef8-bb6d-6bb9bd380a22');
    assert.is(created.body.mood, 'ok');
    assert.match(created.body.seenAt, /\+00$/);
    assert.is(created.body.on, '2025-01-02');
    const { seen, ...stored } = (await visitInDatabase(url, created.body.visitId)) as Record<string, unknown>;
    assert.ok(seen);
    assert.equal(stored, {
      token: 'b1eebc99-9c0b-4ef8-bb6d-6bb9bd380a22',
      mood: 'ok',
      from: '192.168.1.0/24',
      tags: '{}',
      sizes: null,
      at: '23:59:00',
      took: '02:00:00',
      on: '2025-01-02',
    });
  },
);

pgNative('a PATCH of one field writes back the others as they were, arrays (served as text) included', async ({ service, url }) => {
  const before = await visitInDatabase(url, 1);
  const patched = await service.request('PATCH', '/Visit/1', { body: { mood: 'ok' } });
  assert.is(patched.status, 200, patched.text);
  // Served as the text PostgreSQL gives, which it parses again on the way back.
  assert.is(patched.body.tags, '{x,"y z"}');
  assert.is(patched.body.sizes, '{1,2}');
  assert.is(patched.body.took, '1 day');
  assert.equal(await visitInDatabase(url, 1), { ...before, mood: 'ok' });
});

pgNative('a PUT that leaves out a field with a SQL default (now()) gets the default in the column’s type', async ({ service, url }) => {
  const { token, mood, visitId } = (await service.request('GET', '/Visit/1')).body;
  const replaced = await service.request('PUT', '/Visit/1', { body: { visitId, token, mood } });
  assert.is(replaced.status, 200, replaced.text);
  assert.match(replaced.body.seenAt, /\+00$/);
  const { seen, ...stored } = (await visitInDatabase(url, 1)) as Record<string, unknown>;
  assert.ok(seen);
  assert.equal(stored, {
    token: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    mood: 'ok',
    from: null,
    tags: '{}',
    sizes: null,
    at: null,
    took: null,
    on: null,
  });
});

pgNative('a value the column’s type refuses is a 422, and nothing is written', async ({ service, url }) => {
  const before = await visitInDatabase(url, 1);
  for (const body of [{ mood: 'glad' }, { token: 'not-a-uuid' }, { from: 'nowhere' }]) {
    const refused = await service.request('PATCH', '/Visit/1', { body });
    assert.is(refused.status, 422, `${JSON.stringify(body)}: ${refused.text}`);
  }
  assert.equal(await visitInDatabase(url, 1), before);
});

pgNative(
  'a uuid key: elements read, written and deleted at it, pages walked, children listed; a table named like a type',
  async ({ service }) => {
    const code = '00000000-0000-0000-0000-00000000000a';
    assert.equal((await service.request('GET', `/line/${code}`)).body, { code, mood: 'ok', note: 'a' });
    const patched = await service.request('PATCH', `/line/${code}`, { body: { mood: 'sad' } });
    assert.is(patched.status, 200, patched.text);
    assert.is(patched.body.mood, 'sad');
    const created = await service.request('POST', '/line', { body: { code: '00000000-0000-0000-0000-0000000000ff', note: 'new' } });
    assert.is(created.status, 201, created.text);
    assert.is(created.headers.get('location'), '/line/00000000-0000-0000-0000-0000000000ff');
    assert.is((await service.request('GET', created.headers.get('location') as string)).status, 200);
    const first = await service.request('GET', '/line?limit=2');
    assert.equal(
      first.body.map((l: { code: string }) => l.code),
      [code, '00000000-0000-0000-0000-00000000000b'],
    );
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1] as string;
    const rest = await service.request('GET', next);
    assert.is(rest.status, 200, rest.text);
    assert.equal(
      rest.body.map((l: { code: string }) => l.code),
      ['00000000-0000-0000-0000-00000000000c', '00000000-0000-0000-0000-0000000000ff'],
    );
    assert.is((await service.request('POST', '/Stop', { body: { lineCode: code, visitId: 1 } })).status, 201);
    const children = await service.request('GET', `/line/${code}/Stop`);
    assert.is(children.status, 200, children.text);
    assert.is(children.body.length, 1);
    assert.is((await service.request('GET', '/line/00000000-0000-0000-0000-000000000999')).status, 404);
    assert.is((await service.request('GET', '/line/not-a-uuid')).status, 404);
    assert.is((await service.request('DELETE', created.headers.get('location') as string)).status, 204);
  },
);

pgNative('a refused create names every foreign key that names nothing, a uuid one among them', async ({ service }) => {
  const refused = await service.request('POST', '/Stop', { body: { lineCode: '00000000-0000-0000-0000-000000000999', visitId: 999 } });
  assert.is(refused.status, 422, refused.text);
  assert.equal(refused.body.errors.map((e: { path: string }) => e.path).sort(), ['lineCode', 'visitId']);
});

pgNative('an array key or foreign key is not declared: the table is listed, the feed records its child', async ({ service, source }) => {
  assert.match(source, '// the primary key (Tags) holds an array');
  assert.match(source, '// foreign key (ShelfTags) → Shelf is on an array');
  assert.equal((await service.request('GET', '/Shelf')).body, [{ tags: '{a,b}', n: 1 }]);
  assert.is((await service.request('POST', '/Book', { body: { shelfTags: '{a,b}' } })).status, 201);
  assert.is((await service.request('GET', '/Book?limit=5')).status, 200);
  const changes = await service.request('GET', '/_changes?kinds=Book');
  assert.is(changes.status, 200, changes.text);
  assert.equal(
    changes.body.map((c: { op: string; element: { shelfTags: string } }) => [c.op, c.element.shelfTags]),
    [['create', '{a,b}']],
  );
  assert.is((await service.request('GET', '/_changes')).status, 200);
});

pgNative('a timestamp key: the feed names the element as its path does, and carries it', async ({ service, url }) => {
  const created = await service.request('POST', '/Slot', { body: { at: '2024-01-01 10:00', n: 1 } });
  assert.is(created.status, 201, created.text);
  assert.is(created.headers.get('location'), '/Slot/2024-01-01%2010%3A00%3A00');
  const changes = await service.request('GET', '/_changes?kinds=Slot');
  assert.is(changes.status, 200, changes.text);
  assert.equal(
    changes.body.map((c: { id: unknown; element: unknown }) => [c.id, c.element]),
    [['2024-01-01 10:00:00', { at: '2024-01-01 10:00:00', n: 1 }]],
  );
  // Written by another client, whose session writes dates as the database says (SQL, DMY): the feed spells it the same.
  await runSql(url, `INSERT INTO "Slot" VALUES ('2024-02-03 04:05:06', 2)`);
  const more = await service.request('GET', `/_changes?kinds=Slot&since=${changes.body[0].seq}`);
  assert.equal(
    more.body.map((c: { id: unknown; element: unknown }) => [c.id, c.element]),
    [['2024-02-03 04:05:06', { at: '2024-02-03 04:05:06', n: 2 }]],
  );
});

pgNative('a uuid made by gen_random_uuid() is made by the service: a create leaves it out', async ({ service, source }) => {
  assert.match(source, /passId: untyped\('PassId'\)\s*\.primaryKey\(\)\s*\.\$defaultFn\(\(\) => randomUUID\(\)\)/);
  assert.match(source, "import { randomUUID } from 'node:crypto';");
  const created = await service.request('POST', '/Pass', { body: { holder: 'ada' } });
  assert.is(created.status, 201, created.text);
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  assert.match(created.body.passId, uuid);
  assert.match(created.body.ref, uuid);
  assert.is.not(created.body.passId, created.body.ref);
  assert.is(created.headers.get('location'), `/Pass/${created.body.passId}`);
  assert.equal((await service.request('GET', `/Pass/${created.body.passId}`)).body, created.body);
  const bulk = await service.request('POST', '/Pass', { body: [{ holder: 'b' }, { holder: 'c' }] });
  assert.is(bulk.status, 201, bulk.text);
  assert.is.not(bulk.body[0].passId, bulk.body[1].passId);
});

pgNative.run();

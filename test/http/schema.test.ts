// The schema is the single source of routes: migrations match it, apply idempotently, and a table
// added to a schema (with its migration) is served with no router code; bad schemas fail at start.
// The drift checks cover both the user's schema (src/db/) and the tests' pet shop (test/pet-shop/).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateDrizzleJson, generateMigration, generateSQLiteDrizzleJson, generateSQLiteMigration } from 'drizzle-kit/api';
import { getTableName, is, relations, sql } from 'drizzle-orm';
import { blob, integer, numeric, primaryKey, SQLiteTable, sqliteTable, sqliteView, text } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkDrift } from '../../src/cli/generate.js';
import * as internal from '../../src/db/internal-schema.js';
import * as userSchema from '../../src/db/schema.js';
import { searchable } from '../../src/db/search.js';
import { toPgTables } from '../../src/engine/postgres/tables.js';
import { closeDatabase, openDatabase } from '../../src/engine/sqlite/connection.js';
import { applyMigrations, MIGRATIONS_FOLDER, migrationStatus } from '../../src/engine/sqlite/migrate.js';
import { createRegistry, RegistryError, type Resource } from '../../src/model/registry.js';
import * as petShop from '../pet-shop/schema.js';
import { PET_SHOP_MIGRATIONS, startService, tempDir } from '../support/helpers.js';

const migrations = suite('migrations');

/** Each schema with the migrations generated from it (plus the internal tables). */
const SCHEMAS = [
  { name: 'src/db/schema.ts', schema: userSchema, folder: MIGRATIONS_FOLDER, generate: 'npm run db:generate -- --name <what_changed>' },
  {
    name: 'test/pet-shop/schema.ts',
    schema: petShop,
    folder: PET_SHOP_MIGRATIONS,
    generate: 'npm run db:generate:test -- --name <what_changed>',
  },
];

/** The snapshot drizzle-kit wrote with the newest migration in `folder`. */
function latestSnapshot(folder: string) {
  const meta = join(folder, 'meta');
  const newest = readdirSync(meta)
    .filter((f) => f.endsWith('_snapshot.json'))
    .sort()
    .at(-1) as string;
  return JSON.parse(readFileSync(join(meta, newest), 'utf8'));
}

for (const { name, schema, folder, generate } of SCHEMAS) {
  migrations(`${name} (with the internal tables) and its migrations have not drifted apart`, async () => {
    const current = await generateSQLiteDrizzleJson({ ...schema, ...internal } as Record<string, unknown>);
    const statements = await generateSQLiteMigration(latestSnapshot(folder), current);
    assert.equal(statements, [], `run \`${generate}\` and commit the migrations`);
  });

  migrations(`${name}: apply to an empty file, then again: the second run applies nothing`, async () => {
    const temp = tempDir();
    const database = openDatabase(join(temp.dir, 'fresh.db'));
    try {
      const { applied: first, backup } = await applyMigrations(database, folder);
      assert.ok(first.length > 0);
      assert.is(backup, undefined, 'an empty database needs no backup');
      assert.equal(await applyMigrations(database, folder), { applied: [] });
      assert.equal(migrationStatus(database, folder), { applied: first, pending: [], unknown: 0 });
      const tables = database.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
      for (const table of Object.values({ ...schema, ...internal }).filter((value) => is(value, SQLiteTable))) {
        assert.ok(tables.includes(getTableName(table)), `${getTableName(table)} was created`);
      }
    } finally {
      closeDatabase(database);
      temp.remove();
    }
  });
}

migrations('the database is opened with WAL, foreign keys and a busy timeout', () => {
  const temp = tempDir();
  const database = openDatabase(join(temp.dir, 'sub/dir/new.db'));
  try {
    assert.is(database.sqlite.pragma('journal_mode', { simple: true }), 'wal');
    assert.is(database.sqlite.pragma('foreign_keys', { simple: true }), 1);
    assert.ok((database.sqlite.pragma('busy_timeout', { simple: true }) as number) > 0);
  } finally {
    closeDatabase(database);
    temp.remove();
  }
});

migrations('every foreign-key column is indexed, and related lists use the index', async () => {
  const temp = tempDir();
  const database = openDatabase(join(temp.dir, 'idx.db'));
  try {
    await applyMigrations(database, PET_SHOP_MIGRATIONS);
    for (const resource of createRegistry(petShop).resources) {
      for (const fk of resource.foreignKeys) {
        const column = resource.fields.find((f) => f.key === fk.field)?.column.name as string;
        const indexes = database.sqlite.pragma(`index_list(${resource.name})`) as { name: string }[];
        const leading = indexes.map((i) => (database.sqlite.pragma(`index_info(${i.name})`) as { name: string }[])[0]?.name);
        assert.ok(leading.includes(column), `${resource.name}.${column} has no index`);
        const plan = database.sqlite
          .prepare(`EXPLAIN QUERY PLAN SELECT * FROM ${resource.name} WHERE ${column} = ? ORDER BY id LIMIT 101`)
          .all(1);
        assert.match(JSON.stringify(plan), /USING (COVERING )?INDEX/, `${resource.name}.${column}`);
      }
    }
  } finally {
    closeDatabase(database);
    temp.remove();
  }
});

migrations.run();

const registry = suite('registry from the schema');

const tags = sqliteTable('tags', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  label: text('label').notNull(),
  petId: integer('pet_id').references(() => petShop.pets.id, { onDelete: 'cascade' }),
  createdAt: text('created_at')
    .notNull()
    .$defaultFn(() => new Date().toISOString()),
  updatedAt: text('updated_at')
    .notNull()
    .$defaultFn(() => new Date().toISOString())
    .$onUpdateFn(() => new Date().toISOString()),
});

registry('a table that exists only in this test is served once it has a migration', async () => {
  const extended = { ...petShop, tags };
  const statements = await generateSQLiteMigration(
    await generateSQLiteDrizzleJson(petShop as Record<string, unknown>),
    await generateSQLiteDrizzleJson(extended as Record<string, unknown>),
  );
  const service = await startService({ schema: extended, prepare: ({ sqlite }) => sqlite.exec(statements.join(';\n')) });
  try {
    const pet = await service.request('POST', '/pets', { body: { name: 'Rex', species: 'dog' } });
    const tag = await service.request('POST', `/pets/${pet.body.id}/tags`, { body: { label: 'good boy' } });
    assert.is(tag.status, 201);
    assert.is(tag.headers.get('location'), `/tags/${tag.body.id}`);
    assert.is(tag.body.petId, pet.body.id);
    assert.equal((await service.request('GET', '/tags')).body, [tag.body]);
    assert.is((await service.request('PATCH', `/tags/${tag.body.id}`, { body: { label: 'best' } })).body.label, 'best');
    assert.is((await service.request('PUT', '/tags', { body: {} })).headers.get('allow'), 'GET, HEAD, POST, OPTIONS');
    assert.ok((await service.request('GET', '/')).body.resources.some((r: { name: string }) => r.name === 'tags'));
    assert.is((await service.request('DELETE', `/pets/${pet.body.id}`)).status, 204);
    assert.is((await service.request('GET', `/tags/${tag.body.id}`)).status, 404);
  } finally {
    await service.close();
  }
});

const transfers = sqliteTable('transfers', {
  id: integer('id').primaryKey(),
  fromId: integer('from_id')
    .notNull()
    .references(() => petShop.users.id),
  toId: integer('to_id')
    .notNull()
    .references(() => petShop.users.id),
});

registry('two unnamed foreign keys to one parent are a start-up error', () => {
  assert.throws(
    () => createRegistry({ users: petShop.users, transfers }),
    (e: Error) => e instanceof RegistryError && /2 foreign keys to "users"/.test(e.message),
  );
});

registry('related paths named with drizzle relations() are served under those names', () => {
  const usersRelations = relations(petShop.users, ({ many }) => ({
    sent: many(transfers, { relationName: 'sender' }),
    received: many(transfers, { relationName: 'receiver' }),
  }));
  const transfersRelations = relations(transfers, ({ one }) => ({
    sender: one(petShop.users, { fields: [transfers.fromId], references: [petShop.users.id], relationName: 'sender' }),
    receiver: one(petShop.users, { fields: [transfers.toId], references: [petShop.users.id], relationName: 'receiver' }),
  }));
  const { routes } = createRegistry({ users: petShop.users, transfers, usersRelations, transfersRelations });
  const related = routes.filter((r) => r.shape === 'related').map((r) => [r.path, r.relation?.field]);
  assert.equal(related, [
    ['/users/{id}/sent', 'fromId'],
    ['/users/{id}/received', 'toId'],
  ]);
});

registry('a column mode JSON cannot carry (a BigInt, a Buffer) is a start-up error naming the field and what to declare', () => {
  for (const [column, declare] of [
    [blob('b', { mode: 'bigint' }), /"big" is not served: blob\(\{ mode: 'bigint' \}\).*declare integer\(\)/],
    [numeric('b', { mode: 'bigint' }), /"big" is not served: numeric\(\{ mode: 'bigint' \}\).*declare numeric\(\)/],
    [blob('b'), /"big" is not served: blob\(\) holds a Buffer.*declare bytes\(\)/],
  ] as const) {
    const things = sqliteTable('things', { id: integer('id').primaryKey(), big: column });
    assert.throws(
      () => createRegistry({ things }),
      (e: Error) => e instanceof RegistryError && declare.test(e.message),
    );
  }
});

registry('a table named like a service path, or two routes on one path, are start-up errors', () => {
  const healthz = sqliteTable('healthz', { id: integer('id').primaryKey() });
  assert.throws(() => createRegistry({ healthz }), /collides with the service path \/healthz/);
  // The service's own tables (the change feed, its secrets), drizzle's and SQLite's, in any case.
  for (const name of ['restable_changes', 'Restable_Secrets', '__drizzle_migrations', 'sqlite_stuff']) {
    const own = sqliteTable(name, { id: integer('id').primaryKey() });
    assert.throws(() => createRegistry({ own }), new RegExp(`table "${name}" has a name kept for the service's own tables`), name);
  }
  const a = sqliteTable('a', { id: integer('id').primaryKey() });
  const b = sqliteTable('b', { id: integer('id').primaryKey(), aId: integer('a_id').references(() => a.id) });
  const c = sqliteTable('c', { id: integer('id').primaryKey(), aId: integer('a_id').references(() => a.id) });
  const aRelations = relations(a, ({ many }) => ({ items: many(b, { relationName: 'ab' }), things: many(c, { relationName: 'ac' }) }));
  const bRelations = relations(b, ({ one }) => ({ a: one(a, { fields: [b.aId], references: [a.id], relationName: 'ab' }) }));
  const cRelations = relations(c, ({ one }) => ({ a: one(a, { fields: [c.aId], references: [a.id], relationName: 'ac' }) }));
  assert.ok(createRegistry({ a, b, c, aRelations, bRelations, cRelations }));
  const clash = relations(a, ({ many }) => ({ b: many(c, { relationName: 'ac' }) }));
  assert.throws(() => createRegistry({ a, b, c, clash, cRelations }), /two routes would both be \/a\/\{id\}\/b;/);
  // The error names what made each of the two.
  assert.throws(() => createRegistry({ a, b, c, clash, cRelations }), /\(the foreign key b\.aId → a, and the foreign key c\.aId → a\)$/);
});

registry('expand names: a foreign key without Id, relations() names, and a clash with a field is a start-up error', () => {
  const users = sqliteTable('users', { id: integer('id').primaryKey() });
  const pets = sqliteTable('pets', { id: integer('id').primaryKey(), ownerId: integer('owner_id').references(() => users.id) });
  const { resources } = createRegistry({ users, pets });
  const [u, p] = resources as [Resource, Resource];
  assert.equal([...u.expansions.keys()], ['pets']);
  assert.equal([...p.expansions.keys()], ['owner']);
  const clashing = sqliteTable('pets', {
    id: integer('id').primaryKey(),
    owner: text('owner'),
    ownerId: integer('owner_id').references(() => users.id),
  });
  assert.throws(
    () => createRegistry({ users, pets: clashing }),
    /"pets" has a field and a relation both named "owner"; name the relation otherwise/,
  );
  const renamed = relations(clashing, ({ one }) => ({ keeper: one(users, { fields: [clashing.ownerId], references: [users.id] }) }));
  const named = createRegistry({ users, pets: clashing, renamed }).resources[1] as Resource;
  assert.equal([...named.expansions.keys()], ['keeper']);
});

registry('a table without a primary key, and a view, are read-only collections (API.md §1)', () => {
  const keyless = sqliteTable('keyless', { name: text('name') });
  const names = sqliteView('Names', { name: text('name') }).as(sql`SELECT name FROM keyless`);
  const { routes } = createRegistry({ keyless, names });
  assert.equal(
    routes.map((r) => [r.path, r.methods.join(',')]),
    [
      ['/keyless', 'GET,HEAD,OPTIONS'],
      ['/Names', 'GET,HEAD,OPTIONS'],
    ],
  );
});

registry('names in any case are served as spelled, percent-encoded in paths; composite keys travel as k1,k2', () => {
  const album = sqliteTable('Album', { albumId: integer('AlbumId').primaryKey(), title: text('Title') });
  const notes = sqliteTable('Liner Notes', {
    noteId: integer('NoteId').primaryKey(),
    albumId: integer('AlbumId').references(() => album.albumId),
  });
  const tag = sqliteTable('Tag', { kind: text('Kind'), label: text('Label') }, (t) => [primaryKey({ columns: [t.label, t.kind] })]);
  const { resources, routes } = createRegistry({ album, notes, tag });
  assert.equal(
    routes.map((r) => r.path),
    ['/Album', '/Album/{id}', '/Liner%20Notes', '/Liner%20Notes/{id}', '/Tag', '/Tag/{id}', '/Album/{id}/Liner%20Notes'],
  );
  const tags = resources.find((r) => r.name === 'Tag') as (typeof resources)[number];
  // Key order is the primary key's, not the columns'.
  assert.equal(
    tags.key.map((f) => f.key),
    ['label', 'kind'],
  );
  assert.equal(tags.parseId('a%2Cb,x%25y'), ['a,b', 'x%y']);
  assert.is(tags.parseId('only-one'), undefined);
  assert.is(tags.parseId('a,'), undefined);
  assert.is(tags.elementPath({ kind: 'x%y', label: 'a,b c' }), '/Tag/a%2Cb%20c,x%25y');
});

registry('searchable(): text fields of a table keyed by its rowid, each declaration checked at start', () => {
  const search = createRegistry(petShop).resources;
  assert.equal(
    search.map((r) => [r.name, r.searchable.map((f) => f.key)]),
    [
      ['orders', []],
      ['pets', ['name']],
      ['users', ['name']],
    ],
  );
  const refused = (extra: Record<string, unknown>, message: RegExp) =>
    assert.throws(
      () => createRegistry({ ...petShop, ...extra }),
      (e: Error) => e instanceof RegistryError && message.test(e.message),
    );
  refused({ again: searchable(petShop.users, ['email']) }, /users is declared searchable twice/);
  refused({ petsSearch: searchable(petShop.pets, ['ownerId' as 'name']) }, /"ownerId" is not a text field/);
  refused({ petsSearch: searchable(petShop.pets, ['nickname' as 'name']) }, /"nickname", which is not a field of pets/);
  refused({ petsSearch: searchable(petShop.pets, []) }, /names no field/);
  const labels = sqliteTable('labels', { code: text('code').primaryKey(), text: text('text') });
  refused({ labels, labelsSearch: searchable(labels, ['text']) }, /needs a sole integer primary key/);
  refused({ unserved: searchable(labels, ['text']) }, /names a table the schema does not export/);
});

registry('a searchable() declaration its migrations do not build is drift on both engines (npm run db:check)', async () => {
  const schema = { ...petShop, usersSearch: searchable(petShop.users, ['name', 'email']) };
  const drifts = await checkDrift({ schema, sqliteFolder: PET_SHOP_MIGRATIONS, pgFolder: join(PET_SHOP_MIGRATIONS, 'pg') });
  assert.equal(
    drifts.map((d) => d.backend),
    ['PostgreSQL', 'SQLite'],
  );
  const [pg, sqlite] = drifts.map((d) => d.statements.join('\n'));
  assert.match(sqlite ?? '', 'DROP TABLE IF EXISTS "restable_search_users"');
  assert.match(sqlite ?? '', 'USING fts5("name", "email"');
  assert.match(pg ?? '', `restable_search_words(coalesce("name", '') || ' ' || coalesce("email", ''))`);
  assert.equal(await checkDrift({ schema: petShop, sqliteFolder: PET_SHOP_MIGRATIONS, pgFolder: join(PET_SHOP_MIGRATIONS, 'pg') }), []);
});

registry.run();

const toPostgres = suite('schema: PostgreSQL tables derived from the SQLite declarations');

toPostgres(
  "SQLite's current-time defaults become PostgreSQL's, written as SQLite writes them; other SQL defaults as declared",
  async () => {
    const stamped = sqliteTable('stamped', {
      id: integer('id').primaryKey(),
      at: text('at').default(sql`(datetime('now'))`),
      day: text('day').default(sql`( date( 'now' ) )`),
      clock: text('clock').default(sql`TIME('now')`),
      keyword: text('keyword').default(sql`CURRENT_TIMESTAMP`),
      other: text('other').default(sql`(lower('X'))`),
    });
    const statements = (await generateMigration(generateDrizzleJson({}), generateDrizzleJson(toPgTables({ stamped })))).join('\n');
    const stamp = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')";
    assert.ok(statements.includes(`"at" text DEFAULT ${stamp}`), statements);
    assert.ok(statements.includes(`"day" text DEFAULT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`), statements);
    assert.ok(statements.includes(`"clock" text DEFAULT to_char(now() AT TIME ZONE 'UTC', 'HH24:MI:SS')`), statements);
    assert.ok(statements.includes(`"keyword" text DEFAULT ${stamp}`), statements);
    assert.ok(statements.includes(`"other" text DEFAULT (lower('X'))`), statements);
  },
);

toPostgres.run();

// PostgreSQL migrations: status, apply, five instances migrating at once under the advisory
// lock, downgrade refusal, the add-a-table story with the generator, and drift checks of both sets.
// Each test gets its own database on the server at TEST_DATABASE_URL (an admin URL), dropped after.
import { cpSync, existsSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkDrift, loadSchema } from '../../src/cli/generate.js';
import * as userSchema from '../../src/db/schema.js';
import { applyPgMigrations, PG_MIGRATIONS_FOLDER, pgMigrationStatus } from '../../src/engine/postgres/migrate.js';
import { closePostgres, openPostgres, type PostgresHandle } from '../../src/engine/postgres/pool.js';
import { MIGRATIONS_FOLDER, MigrationError } from '../../src/engine/sqlite/migrate.js';
import * as petShop from '../pet-shop/schema.js';
import { PET_SHOP_MIGRATIONS, petShopSchemaSource, ROOT, runGenerate, runScript, withTempDir } from '../support/helpers.js';

const ADMIN_URL = process.env.TEST_DATABASE_URL;
if (!ADMIN_URL) throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL)');

const PG_FOLDER = join(PET_SHOP_MIGRATIONS, 'pg');
const TAGS: string[] = JSON.parse(readFileSync(join(PG_FOLDER, 'meta', '_journal.json'), 'utf8')).entries.map(
  (e: { tag: string }) => e.tag,
);

let databases = 0;

/** Runs `work` with the URL of a new, empty database, dropped afterwards whatever happens. */
async function withDatabase<T>(work: (url: string) => Promise<T>): Promise<T> {
  const name = `restable_pgmigrate_${process.pid}_${++databases}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
    const url = new URL(ADMIN_URL as string);
    url.pathname = `/${name}`;
    try {
      return await work(url.toString());
    } finally {
      await admin.query(`DROP DATABASE "${name}" WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
}

/** Runs `work` with a pool on a new, empty database. */
function withHandle<T>(work: (handle: PostgresHandle, url: string) => Promise<T>): Promise<T> {
  return withDatabase(async (url) => {
    const handle = openPostgres(url);
    try {
      return await work(handle, url);
    } finally {
      await closePostgres(handle);
    }
  });
}

async function tableExists(handle: PostgresHandle, name: string): Promise<boolean> {
  const { rows } = await handle.pool.query('SELECT to_regclass($1) IS NOT NULL AS exists', [`public.${name}`]);
  return rows[0].exists;
}

async function bookkeepingRows(handle: PostgresHandle): Promise<number> {
  return (await handle.pool.query('SELECT count(*) AS n FROM drizzle.__drizzle_migrations')).rows[0].n;
}

/**
 * A copy of the pet shop (schema.ts and its migrations, both sets) in `dir`, its schema edited by
 * `edit`; a package.json and node_modules make the copy load as an ES module with the project's drizzle.
 */
function petShopCopy(dir: string, edit: (source: string) => string) {
  const schema = join(dir, 'schema.ts');
  writeFileSync(schema, edit(petShopSchemaSource()));
  cpSync(PET_SHOP_MIGRATIONS, join(dir, 'migrations'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return { schema, sqliteFolder: join(dir, 'migrations'), pgFolder: join(dir, 'migrations', 'pg') };
}

const TAGS_TABLE = `
export const tags = sqliteTable('tags', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  label: text('label').notNull(),
  petId: integer('pet_id').references(() => pets.id, { onDelete: 'cascade' }),
});
`;

const migrations = suite('PostgreSQL migrations');

migrations('the status of an empty database lists every migration as pending and changes nothing', async () => {
  await withHandle(async (handle) => {
    assert.ok(TAGS.length > 0);
    assert.equal(await pgMigrationStatus(handle, PG_FOLDER), { applied: [], pending: TAGS, unknown: 0 });
    assert.not.ok(await tableExists(handle, 'users'));
    const { rows } = await handle.pool.query("SELECT 1 FROM pg_namespace WHERE nspname = 'drizzle'");
    assert.is(rows.length, 0, 'the status created no bookkeeping');
  });
});

migrations('applying lists what it applied; then the status lists all applied, and a second run applies nothing', async () => {
  await withHandle(async (handle) => {
    assert.equal(await applyPgMigrations(handle, PG_FOLDER), { applied: TAGS });
    assert.equal(await pgMigrationStatus(handle, PG_FOLDER), { applied: TAGS, pending: [], unknown: 0 });
    assert.equal(await applyPgMigrations(handle, PG_FOLDER), { applied: [] });
    assert.is(await bookkeepingRows(handle), TAGS.length);
    for (const table of ['users', 'pets', 'orders', 'restable_idempotency_keys', 'restable_secrets']) {
      assert.ok(await tableExists(handle, table), `${table} was created`);
    }
  });
});

migrations('the bookkeeping is drizzle’s: created_at is each journal entry’s `when`, hash the file’s sha256', async () => {
  await withHandle(async (handle) => {
    await applyPgMigrations(handle, PG_FOLDER);
    const journal = JSON.parse(readFileSync(join(PG_FOLDER, 'meta', '_journal.json'), 'utf8')).entries;
    const { rows } = await handle.pool.query('SELECT hash, created_at FROM drizzle.__drizzle_migrations ORDER BY id');
    assert.equal(
      rows.map((r) => r.created_at),
      journal.map((e: { when: number }) => e.when),
    );
    for (const row of rows) assert.match(row.hash, /^[0-9a-f]{64}$/);
  });
});

migrations('five instances migrating one fresh database at once apply each migration exactly once', async () => {
  await withDatabase(async (url) => {
    const handles = Array.from({ length: 5 }, () => openPostgres(url));
    try {
      const results = await Promise.all(handles.map((handle) => applyPgMigrations(handle, PG_FOLDER)));
      const migrated = results.filter((r) => r.applied.length > 0);
      assert.is(migrated.length, 1, 'one instance migrated, the others waited and found nothing pending');
      assert.equal(migrated[0]?.applied, TAGS);
      const { rows } = await (handles[0] as PostgresHandle).pool.query(
        'SELECT created_at, count(*) AS n FROM drizzle.__drizzle_migrations GROUP BY created_at',
      );
      assert.is(rows.length, TAGS.length);
      for (const row of rows) assert.is(row.n, 1, `migration ${row.created_at} applied once`);
    } finally {
      await Promise.all(handles.map(closePostgres));
    }
  });
});

migrations('a database migrated by a newer version is refused, in one line, and left as it was', async () => {
  await withHandle(async (handle) => {
    await applyPgMigrations(handle, PG_FOLDER);
    await handle.pool.query('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', ['future', Date.now() + 1e9]);
    try {
      await applyPgMigrations(handle, PG_FOLDER);
      assert.unreachable('a downgrade must be refused');
    } catch (error) {
      assert.instance(error, MigrationError);
      assert.match((error as Error).message, /^the database has 1 migration\(s\) this code does not know .*refusing to start[^\n]*$/);
    }
    assert.equal(await pgMigrationStatus(handle, PG_FOLDER), { applied: TAGS, pending: [], unknown: 1 });
    assert.is(await bookkeepingRows(handle), TAGS.length + 1);
  });
});

/** A copy of the pet shop's PostgreSQL migrations in `dir`, with its journal read: to append migrations to. */
function folderCopy(dir: string) {
  const folder = join(dir, 'pg');
  cpSync(PG_FOLDER, folder, { recursive: true });
  const journalPath = join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  return { folder, journalPath, journal, last: journal.entries.at(-1) };
}

migrations('a failing migration applies nothing and leaves the database as it was', async () => {
  await withTempDir(async (dir) => {
    await withHandle(async (handle) => {
      const { folder, journalPath, journal, last } = folderCopy(dir);
      journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1, tag: '9999_broken' });
      writeFileSync(journalPath, JSON.stringify(journal));
      writeFileSync(
        join(folder, '9999_broken.sql'),
        'CREATE TABLE half_done (id integer);\n--> statement-breakpoint\nCREATE TABLE users (id integer);',
      );
      try {
        await applyPgMigrations(handle, folder);
        assert.unreachable('the broken migration must fail');
      } catch (error) {
        assert.instance(error, MigrationError);
        assert.is(
          (error as Error).message,
          `migration failed, nothing was applied: ${join(folder, '9999_broken.sql')}:3 (CREATE TABLE users (id integer);): relation "users" already exists`,
        );
      }
      assert.not.ok(await tableExists(handle, 'half_done'));
      assert.not.ok(await tableExists(handle, 'pets'), 'the good migrations before it were rolled back too');
      assert.equal(await pgMigrationStatus(handle, folder), { applied: [], pending: [...TAGS, '9999_broken'], unknown: 0 });
    });
  });
});

migrations('a migration merged after a newer one was applied is pending, and applied next', async () => {
  await withTempDir(async (dir) => {
    await withHandle(async (handle) => {
      const { folder, journalPath, journal, last } = folderCopy(dir);
      const entry = (tag: string, offset: number, sql: string) => {
        writeFileSync(join(folder, `${tag}.sql`), sql);
        return { ...last, idx: last.idx + offset, when: last.when + offset, tag };
      };
      // main's newer migration runs first; a branch's, older, is merged into the journal before it afterwards.
      const late = entry('0003_late', 10, 'CREATE TABLE late (id integer);');
      const branch = entry('0002_branch', 5, 'CREATE TABLE branch (id integer);');
      writeFileSync(journalPath, JSON.stringify({ ...journal, entries: [...journal.entries, late] }));
      await applyPgMigrations(handle, folder);
      writeFileSync(journalPath, JSON.stringify({ ...journal, entries: [...journal.entries, branch, late] }));
      assert.equal(await pgMigrationStatus(handle, folder), { applied: [...TAGS, '0003_late'], pending: ['0002_branch'], unknown: 0 });
      assert.equal(await applyPgMigrations(handle, folder), { applied: ['0002_branch'] });
      assert.ok(await tableExists(handle, 'branch'));
    });
  });
});

migrations('`migrate` and `migrate -- --status` with DATABASE_URL work on PostgreSQL', async () => {
  await withDatabase(async (url) => {
    const env = { DATABASE_URL: url };
    const list = TAGS.map((tag) => `\n  ${tag}`).join('');
    const before = await runScript('cli/migrate.js', env, ['--status']);
    assert.is(before.code, 0, before.output);
    assert.ok(before.output.endsWith(`: 0 applied, ${TAGS.length} pending\npending:${list}\n`), before.output);
    const migrate = await runScript('cli/migrate.js', env);
    assert.is(migrate.code, 0, migrate.output);
    assert.ok(migrate.output.endsWith(`: applied ${TAGS.length} migration(s):${list}\n`), migrate.output);
    const again = await runScript('cli/migrate.js', env);
    assert.ok(again.output.endsWith(': up to date, nothing to apply\n'), again.output);
    const after = await runScript('cli/migrate.js', env, ['--status']);
    assert.ok(after.output.endsWith(`: ${TAGS.length} applied, 0 pending\napplied:${list}\n`), after.output);
  });
});

migrations('`migrate` refuses a database from a newer version, and an unreachable server, in one line with exit code 1', async () => {
  await withHandle(async (handle, url) => {
    await applyPgMigrations(handle, PG_FOLDER);
    await handle.pool.query('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', ['future', Date.now() + 1e9]);
    const newer = await runScript('cli/migrate.js', { DATABASE_URL: url });
    assert.is(newer.code, 1);
    assert.match(newer.output, /^migrate: the database has 1 migration\(s\) this code does not know .*\n$/);
  });
  const down = await runScript('cli/migrate.js', { DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none' });
  assert.is(down.code, 1);
  assert.match(down.output, /^migrate: cannot use the PostgreSQL database postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none: .*\n$/);
});

migrations.run();

const story = suite('add a table, on PostgreSQL');

story('a table added to the schema gets a generated migration that applies over the old set', async () => {
  await withTempDir(async (dir) => {
    const copy = petShopCopy(dir, (source) => source + TAGS_TABLE);
    await withHandle(async (handle) => {
      assert.equal(await applyPgMigrations(handle, copy.pgFolder), { applied: TAGS });
      const { code, output } = await runGenerate(['--schema', copy.schema, '--out', copy.pgFolder, '--name', 'add_tags']);
      assert.is(code, 0, output);
      const tag = `${String(TAGS.length).padStart(4, '0')}_add_tags`;
      assert.ok(existsSync(join(copy.pgFolder, `${tag}.sql`)), output);
      const sql = readFileSync(join(copy.pgFolder, `${tag}.sql`), 'utf8');
      assert.match(sql, /^CREATE TABLE "tags" \(/);
      assert.match(sql, /FOREIGN KEY \("pet_id"\) REFERENCES "public"\."pets"\("id"\) ON DELETE cascade/);
      const snapshots = readdirSync(join(copy.pgFolder, 'meta')).filter((f) => f.endsWith('_snapshot.json'));
      assert.is(snapshots.length, TAGS.length + 1);
      const [previous, latest] = snapshots
        .sort()
        .slice(-2)
        .map((f) => JSON.parse(readFileSync(join(copy.pgFolder, 'meta', f), 'utf8')));
      assert.is(latest.prevId, previous.id, 'the new snapshot chains to the previous one');

      assert.equal(await pgMigrationStatus(handle, copy.pgFolder), { applied: TAGS, pending: [tag], unknown: 0 });
      assert.equal(await applyPgMigrations(handle, copy.pgFolder), { applied: [tag] });
      assert.ok(await tableExists(handle, 'tags'));
      assert.equal((await pgMigrationStatus(handle, copy.pgFolder)).pending, []);
      const pet = await handle.pool.query(
        "INSERT INTO pets (name, species, created_at, updated_at) VALUES ('Rex', 'dog', 'x', 'x') RETURNING id",
      );
      await handle.pool.query("INSERT INTO tags (label, pet_id) VALUES ('good', $1)", [pet.rows[0].id]);
      assert.is((await handle.pool.query('SELECT count(*) AS n FROM tags')).rows[0].n, 1);
    });

    const again = await runGenerate(['--schema', copy.schema, '--out', copy.pgFolder, '--name', 'nothing']);
    assert.is(again.code, 0, again.output);
    assert.match(again.output, /no schema changes, nothing written/);
    assert.not.ok(existsSync(join(copy.pgFolder, `${String(TAGS.length + 1).padStart(4, '0')}_nothing.sql`)));
  });
});

story.run();

const drift = suite('drift between the schema and its migrations (npm run db:check)');

drift('the committed migrations of both backends match their schemas', async () => {
  assert.equal(await checkDrift({ schema: userSchema, pgFolder: PG_MIGRATIONS_FOLDER, sqliteFolder: MIGRATIONS_FOLDER }), []);
  assert.equal(await checkDrift({ schema: petShop, pgFolder: PG_FOLDER, sqliteFolder: PET_SHOP_MIGRATIONS }), []);
});

drift('a schema with an extra column drifts from both sets, and the check command exits 1 saying so', async () => {
  await withTempDir(async (dir) => {
    const copy = petShopCopy(dir, (source) => source.replace("name: text('name').notNull(),", "$&\n  nickname: text('nickname'),"));
    const drifts = await checkDrift({ schema: await loadSchema(copy.schema), pgFolder: copy.pgFolder, sqliteFolder: copy.sqliteFolder });
    assert.equal(
      drifts.map((d) => d.backend),
      ['PostgreSQL', 'SQLite'],
    );
    for (const { statements } of drifts)
      assert.match(statements.join('\n'), /ALTER TABLE [`"]users[`"] ADD (COLUMN )?[`"]nickname[`"] text/);

    const check = await runGenerate(['--check', '--schema', copy.schema, '--out', copy.pgFolder]);
    assert.is(check.code, 1, check.output);
    assert.match(check.output, /PostgreSQL migrations in .* drift from .*schema\.ts/);
    assert.match(check.output, /SQLite migrations in .* drift from .*schema\.ts/);
    const fine = await runGenerate(['--check', '--schema', join(ROOT, 'test', 'pet-shop', 'schema.ts'), '--out', PG_FOLDER]);
    assert.is(fine.code, 0, fine.output);
  });
});

drift('a table renamed (one added, one removed) is drift, reported without a rename prompt', async () => {
  await withTempDir(async (dir) => {
    const copy = petShopCopy(dir, (source) => source.replace("'orders',", "'purchases',"));
    const drifts = await checkDrift({ schema: await loadSchema(copy.schema), pgFolder: copy.pgFolder, sqliteFolder: copy.sqliteFolder });
    assert.equal(
      drifts.map((d) => d.statements.join()),
      ['-- tables added (public.purchases) and removed (public.orders)', '-- tables added (purchases) and removed (orders)'],
    );
  });
});

drift.run();

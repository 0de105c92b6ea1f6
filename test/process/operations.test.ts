// Operations: migrate --status, backups before migrating and while serving, failed
// migrations that change nothing, downgrade refusal, concurrent first starts, graceful shutdown.
// All over the tests' pet shop and its migrations, so a user's schema change does not move them.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { installSqlite } from '../../src/engine/changes.js';
import { closeDatabase, openDatabase } from '../../src/engine/sqlite/connection.js';
import { applyMigrations, changedMigrations, MigrationError, migrationStatus } from '../../src/engine/sqlite/migrate.js';
import { createRegistry } from '../../src/model/registry.js';
import * as petShop from '../pet-shop/schema.js';
import { userSample } from '../support/fixtures.js';
import {
  inspect,
  PET_SHOP_MIGRATIONS,
  type Process,
  request,
  runScript,
  spawnService,
  startService,
  PET_SHOP_MIGRATION_TAGS as TAGS,
  tempDir,
  withTempDir,
} from '../support/helpers.js';

/** A copy of the pet shop's migrations folder, cut to the first `keep` entries of its journal. */
function migrationsCopy(dir: string, keep?: number): string {
  const folder = join(dir, 'migrations');
  cpSync(PET_SHOP_MIGRATIONS, folder, { recursive: true });
  const journalPath = join(folder, 'meta/_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  if (keep !== undefined) journal.entries = journal.entries.slice(0, keep);
  writeFileSync(journalPath, JSON.stringify(journal));
  return folder;
}

function tables(path: string): string[] {
  return inspect(path, (db) => db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[]);
}

const migrations = suite('migrations as a command');

migrations('`migrate -- --status` lists applied and pending migrations and changes nothing', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'status.db') };
    const before = await runScript('cli/migrate.js', env, ['--status']);
    assert.is(before.code, 0, before.output);
    const list = TAGS.map((tag) => `\n  ${tag}`).join('');
    assert.ok(before.output.includes(`0 applied, ${TAGS.length} pending\npending:${list}`), before.output);
    assert.not.ok(existsSync(env.DATABASE_PATH), 'the status made a database file');
    assert.is((await runScript('cli/migrate.js', env)).code, 0);
    const after = await runScript('cli/migrate.js', env, ['--status']);
    assert.ok(after.output.endsWith(`${TAGS.length} applied, 0 pending\napplied:${list}\n`), after.output);
  });
});

migrations('a database that holds data is backed up before migrating', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'old.db');
    const database = openDatabase(path);
    await applyMigrations(database, migrationsCopy(dir, 1));
    database.sqlite.prepare("INSERT INTO users (name, email, created_at, updated_at) VALUES ('Old', 'old@x.io', 'x', 'x')").run();
    const { applied, backup } = await applyMigrations(database, PET_SHOP_MIGRATIONS);
    closeDatabase(database);
    assert.equal(applied, TAGS.slice(1));
    assert.ok(backup && existsSync(backup), 'a backup was taken');
    assert.match(backup as string, new RegExp(`backups/old-before-${TAGS[1]}-.*\\.db$`));
    assert.not.ok(tables(backup as string).includes('restable_idempotency_keys'), 'the backup is from before');
    const copy = new Database(backup as string, { readonly: true });
    assert.is(copy.prepare('SELECT email FROM users').pluck().get(), 'old@x.io');
    copy.close();
  });
});

migrations('a failing migration applies nothing and leaves the database as it was', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'fail.db');
    const database = openDatabase(path);
    await applyMigrations(database, migrationsCopy(dir, 1));
    // The file holds data now (drizzle's bookkeeping row at least): a backup is taken before the next migrations.
    const folder = join(dir, 'migrations');
    const journal = JSON.parse(readFileSync(join(folder, 'meta/_journal.json'), 'utf8'));
    const real = JSON.parse(readFileSync(join(PET_SHOP_MIGRATIONS, 'meta/_journal.json'), 'utf8')).entries[1];
    journal.entries.push(real, { ...real, idx: 2, when: real.when + 1, tag: '0002_broken' });
    writeFileSync(join(folder, 'meta/_journal.json'), JSON.stringify(journal));
    writeFileSync(
      join(folder, '0002_broken.sql'),
      'CREATE TABLE half_done (id integer);\n--> statement-breakpoint\nCREATE TABLE users (oops);',
    );
    const before = tables(path);
    try {
      await applyMigrations(database, folder);
      assert.unreachable('the broken migration must fail');
    } catch (error) {
      assert.instance(error, MigrationError);
      assert.is(
        (error as Error).message,
        `migration failed, nothing was applied: ${join(folder, '0002_broken.sql')}:3 (CREATE TABLE users (oops);): table users already exists`,
      );
    }
    assert.equal(tables(path), before);
    assert.not.ok(existsSync(join(dir, 'backups')), 'the backup taken before, and the folder made for it, are gone');
    // A backups/ folder that was there before stays, with what it held, and holds no backup of this attempt.
    mkdirSync(join(dir, 'backups'));
    writeFileSync(join(dir, 'backups', 'keep.db'), 'an older backup');
    await applyMigrations(database, folder).catch((error) => assert.instance(error, MigrationError));
    assert.equal(readdirSync(join(dir, 'backups')), ['keep.db']);
    assert.equal(migrationStatus(database, folder).pending, [TAGS[1], '0002_broken']);
    closeDatabase(database);
  });
});

migrations('a table a migration makes while the service runs is in the change feed from its first write', async () => {
  // The README's flow: the schema gains a kind, the service (already on the new code) answers 503 for it,
  // then `npm run migrate` makes its table; the feed's triggers come in the migration's own transaction.
  const labels = sqliteTable('labels', { id: integer('id').primaryKey(), name: text('name').notNull() });
  const schema = { ...petShop, labels };
  const service = await startService({ schema });
  try {
    assert.is((await service.request('POST', '/labels', { body: { name: 'Early' } })).status, 503);
    await withTempDir(async (dir) => {
      const folder = migrationsCopy(dir);
      const journal = JSON.parse(readFileSync(join(folder, 'meta/_journal.json'), 'utf8'));
      const last = journal.entries.at(-1);
      journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1, tag: '0004_labels' });
      writeFileSync(join(folder, 'meta/_journal.json'), JSON.stringify(journal));
      writeFileSync(join(folder, '0004_labels.sql'), 'CREATE TABLE `labels` (`id` integer PRIMARY KEY NOT NULL, `name` text NOT NULL);');
      const other = openDatabase(service.config.databasePath);
      try {
        const { applied } = await applyMigrations(other, folder, join(dir, 'backup.db'), (sqlite) =>
          installSqlite(sqlite, createRegistry(schema).resources),
        );
        assert.equal(applied, ['0004_labels']);
      } finally {
        closeDatabase(other);
      }
    });
    const made = await service.request('POST', '/labels', { body: { name: 'First' } });
    assert.is(made.status, 201, made.text);
    const changes = await service.request('GET', '/_changes?kinds=labels');
    assert.equal(
      changes.body.map((c: { op: string; id: unknown }) => [c.op, c.id]),
      [['create', made.body.id]],
    );
  } finally {
    await service.close();
  }
});

/** Appends a hand-written migration (statements as drizzle-kit writes them) to `folder`'s journal. */
function appendMigration(folder: string, tag: string, sql: string): void {
  const journalPath = join(folder, 'meta/_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  const last = journal.entries.at(-1);
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1, tag });
  writeFileSync(journalPath, JSON.stringify(journal));
  writeFileSync(join(folder, `${tag}.sql`), sql);
}

/** drizzle-kit's migration for `name: text('name')` (no longer NOT NULL) on pets: copy, drop, rename. */
const PETS_REBUILT = [
  'PRAGMA foreign_keys=OFF;',
  'CREATE TABLE `__new_pets` (\n\t`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,\n\t`name` text,\n\t`species` text NOT NULL,\n\t`owner_id` integer,\n\t`created_at` text NOT NULL,\n\t`updated_at` text NOT NULL,\n\tFOREIGN KEY (`owner_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE set null\n);\n',
  'INSERT INTO `__new_pets`("id", "name", "species", "owner_id", "created_at", "updated_at") SELECT "id", "name", "species", "owner_id", "created_at", "updated_at" FROM `pets`;',
  'DROP TABLE `pets`;',
  'ALTER TABLE `__new_pets` RENAME TO `pets`;',
  'PRAGMA foreign_keys=ON;',
  'CREATE INDEX `pets_owner_id_idx` ON `pets` (`owner_id`);',
].join('--> statement-breakpoint\n');

/** drizzle-kit's rebuild of `notes` (text-keyed: the copy gives its rows new rowids). */
const NOTES_REBUILT = [
  'CREATE TABLE `__new_notes` (`key` text PRIMARY KEY NOT NULL, `pet_id` integer, `body` text, FOREIGN KEY (`pet_id`) REFERENCES `pets`(`id`));',
  'INSERT INTO `__new_notes`("key", "pet_id") SELECT "key", "pet_id" FROM `notes`;',
  'DROP TABLE `notes`;',
  'ALTER TABLE `__new_notes` RENAME TO `notes`;',
].join('--> statement-breakpoint\n');

migrations(
  'a migration that rebuilds referenced tables keeps their children and search index; one that leaves a reference dangling is refused',
  async () => {
    await withTempDir(async (dir) => {
      const folder = migrationsCopy(dir);
      appendMigration(
        folder,
        '0004_tags',
        [
          'CREATE TABLE `tags` (`id` integer PRIMARY KEY NOT NULL, `pet_id` integer, FOREIGN KEY (`pet_id`) REFERENCES `pets`(`id`) ON DELETE cascade);',
          'CREATE TABLE `notes` (`key` text PRIMARY KEY NOT NULL, `pet_id` integer, FOREIGN KEY (`pet_id`) REFERENCES `pets`(`id`));',
          // A foreign key SQLite cannot check (pets.name is no key): the database's own defect, which no migration made.
          'CREATE TABLE `labels` (`id` integer PRIMARY KEY NOT NULL, `pet_name` text REFERENCES `pets`(`name`));',
        ].join('--> statement-breakpoint\n'),
      );
      const database = openDatabase(join(dir, 'rebuilt.db'));
      try {
        await applyMigrations(database, folder);
        const { sqlite } = database;
        sqlite.pragma('foreign_keys = OFF');
        // A note about a pet that is gone, written with foreign keys off: it references nothing before any migration.
        sqlite.exec(`INSERT INTO users (id, name, email, created_at, updated_at) VALUES (1, 'Ada', 'ada@x.io', 'x', 'x');
                     INSERT INTO pets (id, name, species, owner_id, created_at, updated_at) VALUES (1, 'Rex', 'dog', 1, 'x', 'x');
                     INSERT INTO tags (id, pet_id) VALUES (1, 1), (2, 1);
                     INSERT INTO orders (user_id, pet_id, created_at, updated_at) VALUES (1, 1, 'x', 'x');
                     INSERT INTO pets (id, name, species, created_at, updated_at) VALUES (3, 'Gone', 'cat', 'x', 'x');
                     DELETE FROM pets WHERE id = 3;
                     INSERT INTO notes (key, pet_id) VALUES ('a', 1), ('b', 1), ('c', 99), ('d', 1);
                     DELETE FROM notes WHERE key = 'a';
                     INSERT INTO labels (id, pet_name) VALUES (1, 'Rex');`);
        sqlite.pragma('foreign_keys = ON');
        // SQLite ignores drizzle-kit's PRAGMA foreign_keys=OFF inside the migrations' transaction: without more, the
        // DROP TABLE would delete the tags (ON DELETE CASCADE) or fail on the order (RESTRICT); and it drops the
        // search index's triggers with the table.
        appendMigration(folder, '0005_pets_name_nullable', `${PETS_REBUILT}--> statement-breakpoint\n${NOTES_REBUILT}`);
        const { applied } = await applyMigrations(database, folder, join(dir, 'backup.db'));
        assert.equal(applied, ['0005_pets_name_nullable']);
        assert.is(sqlite.prepare('SELECT count(*) FROM tags WHERE pet_id = 1').pluck().get(), 2, 'the children are still there');
        assert.is(sqlite.prepare('SELECT count(*) FROM orders').pluck().get(), 1);
        assert.equal(
          sqlite.prepare('SELECT key FROM notes ORDER BY key').pluck().all(),
          ['b', 'c', 'd'],
          'the note about no pet, as it was',
        );
        assert.is(sqlite.pragma('foreign_keys', { simple: true }), 1, 'foreign keys are enforced again');
        // (Writes to pets stay off foreign keys: with them on, labels' unusable one refuses every write to its parent.)
        sqlite.pragma('foreign_keys = OFF');
        // The copy started AUTOINCREMENT's mark at the largest id left (1): put back to 3, so pet 3's id is not handed out again.
        const zebra = sqlite
          .prepare("INSERT INTO pets (name, species, created_at, updated_at) VALUES ('Zebra', 'other', 'x', 'x') RETURNING id")
          .pluck()
          .get();
        assert.is(zebra, 4);
        sqlite.exec("UPDATE pets SET name = 'Fido' WHERE id = 1");
        sqlite.pragma('foreign_keys = ON');
        const found = (word: string) =>
          sqlite.prepare('SELECT rowid FROM restable_search_pets WHERE restable_search_pets MATCH ?').pluck().all(word);
        assert.equal([found('zebra'), found('fido'), found('rex')], [[4], [1], []], 'the index follows writes after the rebuild');

        /** Applies `tag` (`sql`), which must be refused with `refusal`, leaving nothing behind (its backup neither). */
        const refused = async (tag: string, sql: string, refusal: RegExp) => {
          appendMigration(folder, tag, sql);
          const backup = join(dir, `${tag}.db`);
          try {
            await applyMigrations(database, folder, backup);
            assert.unreachable(`${tag} must be refused`);
          } catch (error) {
            assert.instance(error, MigrationError);
            assert.match((error as Error).message, refusal);
          }
          assert.not.ok(existsSync(backup), 'nothing was applied: the backup taken before is gone');
          const journalPath = join(folder, 'meta/_journal.json');
          const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
          writeFileSync(journalPath, JSON.stringify({ ...journal, entries: journal.entries.slice(0, -1) }));
        };
        // One note's dangling reference fixed, another's made: as many rows as before reference nothing, not the same.
        await refused(
          '0006_swap',
          "UPDATE notes SET pet_id = NULL WHERE key = 'c';--> statement-breakpoint\nUPDATE notes SET pet_id = 55 WHERE key = 'd';",
          /^migration failed, nothing was applied: 1 row\(s\) would reference nothing \(the first: a row of notes with pet_id 55, which names no pets\)$/,
        );
        // The pet (SET NULL) and the order (RESTRICT) would both point at the deleted user.
        await refused(
          '0006_orphans',
          'DELETE FROM users WHERE id = 1;',
          /^migration failed, nothing was applied: 2 row\(s\) would reference nothing \(the first: a row of orders with user_id 1, which names no users\)$/,
        );
        assert.equal(sqlite.prepare("SELECT pet_id FROM notes WHERE key IN ('c', 'd') ORDER BY key").pluck().all(), [99, 1]);
        assert.is(sqlite.prepare('SELECT count(*) FROM users').pluck().get(), 1);
        assert.is(sqlite.pragma('foreign_keys', { simple: true }), 1);
      } finally {
        closeDatabase(database);
      }
    });
  },
);

migrations('a migration merged after a newer one was applied is pending, and applied next', async () => {
  await withTempDir(async (dir) => {
    // A branch's migration lands in the journal before one the database already ran: older, yet never applied.
    const folder = migrationsCopy(dir);
    const journalPath = join(folder, 'meta/_journal.json');
    const full = readFileSync(journalPath, 'utf8');
    const journal = JSON.parse(full);
    journal.entries = journal.entries.filter((e: { tag: string }) => e.tag !== TAGS[2]);
    writeFileSync(journalPath, JSON.stringify(journal));
    const database = openDatabase(join(dir, 'merged.db'));
    try {
      await applyMigrations(database, folder);
      writeFileSync(journalPath, full);
      assert.equal(migrationStatus(database, folder), {
        applied: TAGS.filter((tag) => tag !== TAGS[2]),
        pending: [TAGS[2] as string],
        unknown: 0,
      });
      assert.equal((await applyMigrations(database, folder, join(dir, 'backup.db'))).applied, [TAGS[2]]);
      assert.ok(tables(database.sqlite.name).includes('restable_secrets'));
      assert.equal(migrationStatus(database, folder).pending, []);
    } finally {
      closeDatabase(database);
    }
  });
});

migrations('an applied migration edited afterwards is reported as changed (its sha256 is not the one that ran)', async () => {
  await withTempDir(async (dir) => {
    const folder = migrationsCopy(dir);
    const database = openDatabase(join(dir, 'edited.db'));
    try {
      await applyMigrations(database, folder);
      assert.equal(changedMigrations(database, folder), []);
      const file = join(folder, `${TAGS[1]}.sql`);
      writeFileSync(file, `${readFileSync(file, 'utf8')}\n--> statement-breakpoint\nCREATE INDEX later_idx ON users (name);`);
      assert.equal(changedMigrations(database, folder), [TAGS[1]]);
      assert.equal(migrationStatus(database, folder).pending, [], 'still applied: nothing runs again');
    } finally {
      closeDatabase(database);
    }
  });
});

migrations('`migrate` warns about an applied migration edited since it ran, and runs nothing again', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'edited.db') };
    assert.is((await runScript('cli/migrate.js', env)).code, 0);
    // The file that ran is recorded by its sha256: another hash is what an edit of the file looks like.
    const sqlite = new Database(env.DATABASE_PATH);
    sqlite
      .prepare(
        "UPDATE __drizzle_migrations SET hash = 'edited' WHERE created_at = (SELECT created_at FROM __drizzle_migrations ORDER BY created_at LIMIT 1 OFFSET 1)",
      )
      .run();
    sqlite.close();
    const again = await runScript('cli/migrate.js', env);
    assert.is(again.code, 0, again.output);
    assert.ok(again.output.includes('up to date, nothing to apply'), again.output);
    assert.ok(
      again.output.includes(
        `migrate: warning: 1 applied migration(s) changed since they ran (the file differs from the one that ran; not run again):\n  ${TAGS[1]}\n`,
      ),
      again.output,
    );
  });
});

migrations('the service refuses to start, in one line, on a database from a newer version', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'newer.db');
    const database = openDatabase(path);
    await applyMigrations(database, PET_SHOP_MIGRATIONS);
    database.sqlite.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('future', Date.now() + 1e9);
    closeDatabase(database);
    const { code, output } = await runScript('main.js', { DATABASE_PATH: path });
    assert.is(code, 1);
    assert.match(output, /^restable: the database has 1 migration\(s\) this code does not know .*refusing to start.*\n$/);
    const migrate = await runScript('cli/migrate.js', { DATABASE_PATH: path });
    assert.is(migrate.code, 1);
  });
});

migrations('two processes starting together on one empty file end up with one migrated database', async () => {
  for (let round = 0; round < 3; round++) {
    await withTempDir(async (dir) => {
      const env = { DATABASE_PATH: join(dir, 'race.db') };
      const [a, b] = await Promise.all([spawnService(env), spawnService(env)]);
      try {
        for (const service of [a, b]) {
          assert.is((await request(service.url, 'GET', '/readyz')).status, 200);
          assert.is((await request(service.url, 'POST', '/users', { body: userSample() })).status, 201);
          assert.is(await service.stop(), 0);
        }
      } finally {
        await Promise.all([a.stop(), b.stop()]);
      }
      const db = new Database(env.DATABASE_PATH, { readonly: true });
      assert.is(db.prepare('SELECT count(*) FROM __drizzle_migrations').pluck().get(), TAGS.length);
      assert.is(db.prepare('SELECT count(*) FROM users').pluck().get(), 2);
      db.close();
    });
  }
});

migrations.run();

const backups = suite('backups');

backups('`backup` takes a consistent copy while the service is writing', async () => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'live.db') };
  const service = await spawnService(env);
  try {
    for (let i = 0; i < 50; i++) await request(service.url, 'POST', '/users', { body: userSample() });
    let writing = true;
    const writer = (async () => {
      let n = 0;
      while (writing) n += (await request(service.url, 'POST', '/users', { body: userSample() })).status === 201 ? 1 : 0;
      return n;
    })();
    const target = join(temp.dir, 'copy.db');
    const result = await runScript('cli/backup.js', env, [target]);
    writing = false;
    assert.ok((await writer) > 0, 'writes went on during the backup');
    assert.is(result.code, 0, result.output);
    assert.match(result.output, /backed up .*live\.db to .*copy\.db \(.* MB, integrity ok\)/);
    const copy = new Database(target, { readonly: true });
    assert.is(copy.pragma('integrity_check', { simple: true }), 'ok');
    assert.ok((copy.prepare('SELECT count(*) FROM users').pluck().get() as number) >= 50);
    copy.close();
    const fallback = await runScript('cli/backup.js', env);
    assert.is(fallback.code, 0);
    assert.equal(readdirSync(join(temp.dir, 'backups')).length, 1);
    // A file already there is replaced, whatever it holds (here no database at all), and nothing is left beside it.
    const junk = join(temp.dir, 'junk.db');
    writeFileSync(junk, 'not a database, but a file a backup may be asked to replace'.repeat(100));
    const replaced = await runScript('cli/backup.js', env, [junk]);
    assert.is(replaced.code, 0, replaced.output);
    assert.is(
      inspect(junk, (db) => db.pragma('integrity_check', { simple: true })),
      'ok',
    );
    assert.equal(
      readdirSync(temp.dir).filter((name) => name.includes('.partial-')),
      [],
    );
    // A destination the file system refuses (its folder is a file; a folder that cannot be made) is one line, exit 1.
    const refusals: [Record<string, string>, string[]][] = [
      [env, [join(target, 'inside.db')]],
      [env, ['/proc/restable-nowhere/copy.db']],
      [{ DATABASE_PATH: join(temp.dir, 'nowhere', 'app.db') }, []],
      [{ ...env, DATABASE_URL: 'postgres://u@127.0.0.1:1/db' }, []],
      [env, ['a.db', 'b.db']],
    ];
    for (const [variables, args] of refusals) {
      const failure = await runScript('cli/backup.js', variables, args);
      assert.is(failure.code, 1, failure.output);
      assert.match(failure.output.trim(), /^backup: /);
      assert.is(failure.output.trim().split('\n').length, 1, failure.output);
    }
    // The database itself (by other spellings, and through a link) and its WAL: renamed into place, the copy
    // would swap the file under the running service, whose later writes would go to the unlinked one.
    symlinkSync(env.DATABASE_PATH, join(temp.dir, 'alias.db'));
    for (const [variables, destination] of [
      [env, `${temp.dir}/./live.db`],
      [env, join(temp.dir, 'alias.db')],
      [env, `${env.DATABASE_PATH}-wal`],
      [{ DATABASE_PATH: join(temp.dir, 'alias.db') }, `${env.DATABASE_PATH}-wal`],
    ] as const) {
      const refused = await runScript('cli/backup.js', variables, [destination]);
      assert.is(refused.code, 1, refused.output);
      assert.match(
        refused.output.trim(),
        /^backup: .* is the database itself \(or one of its files\): back it up to another file$/,
        destination,
      );
    }
    // A directory: the copy needs a file's name, and the answer suggests one inside it.
    const folder = await runScript('cli/backup.js', env, [temp.dir]);
    assert.is(folder.code, 1, folder.output);
    assert.match(folder.output.trim(), /^backup: .+ is a directory: name the file to write, such as .+\.db$/);
    assert.ok(Number((await request(service.url, 'GET', '/users?count=true')).headers.get('x-total-count')) >= 50, 'the database is whole');
  } finally {
    await service.stop();
    temp.remove();
  }
});

backups('a database that fails the integrity check is not backed up: the file named keeps what it held', async () => {
  const temp = tempDir();
  try {
    const file = join(temp.dir, 'damaged.db');
    const sqlite = new Database(file);
    sqlite.exec('CREATE TABLE t (x TEXT)');
    const insert = sqlite.prepare('INSERT INTO t (x) VALUES (?)');
    for (let i = 0; i < 3000; i++) insert.run(`value ${i} ${'x'.repeat(40)}`);
    // The index made last holds the last pages: overwritten, the table still reads but no longer agrees with it.
    sqlite.exec('CREATE INDEX t_x ON t (x)');
    const pages = sqlite.pragma('page_count', { simple: true }) as number;
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
    sqlite.close();
    const bytes = readFileSync(file);
    bytes.fill(0x5a, pageSize * (pages - 3) + 100, pageSize * (pages - 1));
    writeFileSync(file, bytes);
    const destination = join(temp.dir, 'latest.db');
    writeFileSync(destination, 'the last good backup');
    const refused = await runScript('cli/backup.js', { DATABASE_PATH: file }, [destination]);
    assert.is(refused.code, 1, refused.output);
    assert.match(
      refused.output.trim(),
      /^backup: the copy of the database failed its integrity check \(\d+ problem\(s\), the first: [^*\n][^\n]+$/,
    );
    assert.is(readFileSync(destination, 'utf8'), 'the last good backup');
    assert.equal(readdirSync(temp.dir).sort(), ['damaged.db', 'latest.db']);
    // Nor is it migrated: the backup taken first would not restore it.
    const database = openDatabase(file);
    try {
      const error = await applyMigrations(database, PET_SHOP_MIGRATIONS, join(temp.dir, 'before.db')).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.instance(error, MigrationError);
      assert.match((error as Error).message, /^not migrating: the copy of the database failed its integrity check/);
      assert.not.ok(existsSync(join(temp.dir, 'before.db')));
    } finally {
      closeDatabase(database);
    }
  } finally {
    temp.remove();
  }
});

backups('a damaged database file answers 503 saying so, never a 500', async () => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'app.db') };
  try {
    const first = await spawnService(env);
    const users = Array.from({ length: 300 }, (_, i) => ({ name: `user ${i} ${'x'.repeat(60)}`, email: `u${i}@example.com` }));
    assert.is((await request(first.url, 'POST', '/users', { body: users })).status, 201);
    assert.is(await first.stop(), 0);
    // The users table's root page overwritten past its header: the table's b-tree no longer reads.
    const sqlite = new Database(env.DATABASE_PATH);
    const { rootpage } = sqlite.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'users'").get() as { rootpage: number };
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
    sqlite.close();
    const bytes = readFileSync(env.DATABASE_PATH);
    bytes.fill(0x5a, (rootpage - 1) * pageSize + 100, rootpage * pageSize);
    writeFileSync(env.DATABASE_PATH, bytes);
    const second = await spawnService(env);
    try {
      const reply = await request(second.url, 'GET', '/users?limit=1000');
      assert.is(reply.status, 503, reply.text);
      assert.is(reply.body.detail, 'The database file is damaged; it must be restored from a backup.');
      assert.is(reply.headers.get('retry-after'), null, 'trying again will not help');
    } finally {
      await second.stop();
    }
  } finally {
    temp.remove();
  }
});

backups('a restored backup sends the change feed’s readers back to a full read, with no seq handed out twice', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'live.db') };
    const live = await spawnService(env);
    let restored: Process | undefined;
    try {
      for (let i = 0; i < 3; i++) await request(live.url, 'POST', '/users', { body: userSample() });
      const copy = join(dir, 'copy.db');
      assert.is((await runScript('cli/backup.js', env, [copy])).code, 0);
      // Written after the backup: a reader follows them, then the database is restored from the copy.
      for (let i = 0; i < 3; i++) await request(live.url, 'POST', '/users', { body: userSample() });
      const read = (await request(live.url, 'GET', '/_changes')).body as { seq: number }[];
      const position = read.at(-1)?.seq as number;
      assert.is(position, 6);
      assert.is(await live.stop(), 0);
      restored = await spawnService({ DATABASE_PATH: copy });
      assert.is((await request(restored.url, 'POST', '/users', { body: userSample() })).status, 201);
      // Every position a reader of the live file holds is older than what the restored file keeps: start over.
      for (const since of [0, 3, position]) {
        const gone = await request(restored.url, 'GET', `/_changes?since=${since}`);
        assert.is(gone.status, 410, gone.text);
      }
      const afresh = (await request(restored.url, 'GET', '/_changes')).body as { seq: number; op: string }[];
      assert.is(afresh.length, 4);
      assert.ok(afresh.every((change) => change.seq > 2 ** 32));
      assert.equal(
        afresh.map((change) => change.seq - (afresh[0] as { seq: number }).seq),
        [0, 1, 2, 3],
      );
    } finally {
      await live.stop();
      await restored?.stop();
    }
  });
});

backups.run();

const shutdown = suite('graceful shutdown');

shutdown('SIGTERM during a slow request: it completes, then the process exits 0 with the WAL checkpointed', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'stop.db') };
    const service = await spawnService(env);
    let again: Process | undefined;
    try {
      const body = JSON.stringify(userSample());
      const reply = new Promise<{ status: number; text: string; connection?: string }>((resolve, reject) => {
        const req = httpRequest(`${service.url}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text, connection: res.headers.connection }));
        });
        req.on('error', reject);
        req.write(body.slice(0, 10));
        req.flushHeaders();
        setTimeout(() => {
          service.child.kill('SIGTERM');
          setTimeout(() => req.end(body.slice(10)), 500);
        }, 300);
      });
      const { status, text, connection } = await reply;
      assert.is(status, 201, text);
      // It arrived before the stop and finished after it: its connection is not kept for another request.
      assert.is(connection, 'close');
      assert.is(await service.exited, 0);
      assert.match(service.output(), /stopping: no new connections/);
      assert.match(service.output(), /stopped: database checkpointed and closed/);
      assert.not.ok(existsSync(`${env.DATABASE_PATH}-wal`), 'the WAL was checkpointed into the database');
      again = await spawnService(env);
      assert.is((await request(again.url, 'GET', `/users/${JSON.parse(text).id}`)).status, 200);
      assert.is(await again.stop('SIGINT'), 0);
    } finally {
      await Promise.all([service.stop(), again?.stop()]);
    }
  });
});

shutdown('a second signal stops at once with exit 1, with WORKERS too, dropping the request in flight', async () => {
  for (const workers of ['1', '2']) {
    await withTempDir(async (dir) => {
      // A long grace period: without the second signal the process would exit 0 only after it.
      const service = await spawnService({ DATABASE_PATH: join(dir, 'hurry.db'), WORKERS: workers, SHUTDOWN_TIMEOUT_MS: '20000' });
      try {
        const req = httpRequest(`${service.url}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': '40' },
        });
        req.on('error', () => {});
        req.write('{"na');
        req.flushHeaders();
        await new Promise((resolve) => setTimeout(resolve, 300)); // the request is in flight, its body never ends
        service.child.kill('SIGTERM');
        await new Promise((resolve) => setTimeout(resolve, 300));
        service.child.kill('SIGINT');
        assert.is(await service.exited, 1, `WORKERS=${workers}: ${service.output()}`);
        assert.match(service.output(), /second signal/);
        req.destroy();
      } finally {
        await service.stop('SIGKILL');
      }
    });
  }
});

shutdown('while stopping, /readyz answers 503 and connections close after their response', async () => {
  const service = await startService();
  try {
    assert.is((await service.request('GET', '/readyz')).status, 200);
    service.app.beginShutdown();
    const reply = await service.request('GET', '/readyz');
    assert.is(reply.status, 503);
    assert.match(reply.body.detail, /shutting down/);
    assert.is(reply.headers.get('connection'), 'close');
  } finally {
    await service.close();
  }
});

/** Adds `count` users with 1,000-character names, so that a page of them is large (~1 KB each). */
async function addLongUsers(base: string, count: number): Promise<void> {
  for (let from = 0; from < count; from += 200) {
    const users = Array.from({ length: Math.min(200, count - from) }, (_, j) => ({
      name: 'n'.repeat(1000),
      email: `long${from + j}@example.com`,
    }));
    assert.is((await request(base, 'POST', '/users', { body: users })).status, 201);
  }
}

/** A connection that pipelines `count` GETs of a page of 1,000 users and reads nothing until the test does. */
function pipelineUnread(base: string, count: number): Socket {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  socket.pause();
  socket.on('error', () => {});
  socket.write('GET /users?limit=1000 HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(count));
  return socket;
}

shutdown('SIGTERM while answers wait for a slow reader: each answer sent arrives whole, nothing pipelined behind runs', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'slow.db'), SHUTDOWN_TIMEOUT_MS: '5000' };
    const service = await spawnService(env);
    try {
      // ~1 MB an answer (more than the kernel's buffers hold), ten of them pipelined; the client reads 64 KB every 50 ms.
      await addLongUsers(service.url, 1000);
      const socket = pipelineUnread(service.url, 10);
      let received = Buffer.alloc(0);
      const reader = setInterval(() => {
        const chunk = socket.read(64 * 1024) ?? socket.read();
        if (chunk) received = Buffer.concat([received, chunk]);
      }, 50);
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      await new Promise((resolve) => setTimeout(resolve, 300));
      service.child.kill('SIGTERM');
      await closed;
      clearInterval(reader);
      for (let chunk = socket.read(); chunk; chunk = socket.read()) received = Buffer.concat([received, chunk]);
      assert.is(await service.exited, 0);
      // Every answer that began arrives whole (no body cut off), at least the one under way at the signal.
      let answers = 0;
      for (let at = 0; at < received.length; answers++) {
        const head = received.indexOf('\r\n\r\n', at);
        assert.ok(head > 0, 'a whole head');
        const length = Number(/content-length: (\d+)/i.exec(received.subarray(at, head).toString('latin1'))?.[1]);
        assert.ok(received.length >= head + 4 + length, `answer ${answers} cut off: ${received.length - head - 4} of ${length} bytes`);
        at = head + 4 + length;
      }
      assert.ok(answers >= 1, 'the answer under way was sent');
      assert.not.match(service.output(), /request failed/);
    } finally {
      await service.stop();
    }
  });
});

shutdown('a client gone with requests still pipelined leaves nothing running: SIGTERM exits at once with 0', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'gone.db'), SHUTDOWN_TIMEOUT_MS: '3000' };
    const service = await spawnService(env);
    try {
      await addLongUsers(service.url, 200);
      const socket = pipelineUnread(service.url, 20); // reads nothing, then goes away with its requests still waiting
      await new Promise((resolve) => setTimeout(resolve, 2000));
      socket.resetAndDestroy(); // unread answers waiting: a reset, which Node reports as the client's error
      await new Promise((resolve) => setTimeout(resolve, 500));
      const started = Date.now();
      service.child.kill('SIGTERM');
      assert.is(await service.exited, 0);
      assert.ok(Date.now() - started < 2500, `exited ${Date.now() - started} ms after SIGTERM`);
    } finally {
      await service.stop();
    }
  });
});

shutdown('start-up logs the address, the database path and the applied migrations', async () => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'log.db') };
  const service = await spawnService(env);
  try {
    const lines = service
      .output()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const migrated = lines.find((l) => l.msg === `applied ${TAGS.length} migration(s)`);
    assert.equal(migrated?.applied, TAGS);
    const listening = lines.find((l) => /^restable listening on/.test(l.msg));
    assert.is(listening?.database, env.DATABASE_PATH);
    assert.match(listening?.address, /^http:\/\/127\.0\.0\.1:\d+$/);
  } finally {
    await service.stop();
    temp.remove();
  }
});

shutdown.run();

const workers = suite('WORKERS=2 (node:cluster)');

workers('two workers share the port and the file: concurrent writes all succeed, then a clean stop', async () => {
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'cluster.db'), WORKERS: '2' };
    const service = await spawnService(env);
    try {
      const made = await request(service.url, 'POST', '/users', { body: userSample() });
      const writes = await Promise.all([
        ...Array.from({ length: 60 }, () => request(service.url, 'POST', '/users', { body: userSample() })),
        ...Array.from({ length: 20 }, (_, i) => request(service.url, 'PATCH', `/users/${made.body.id}`, { body: { name: `n${i}` } })),
      ]);
      assert.equal([...new Set(writes.map((w) => w.status))].sort(), [200, 201]);
      const count = await request(service.url, 'GET', '/users?count=true&limit=1');
      assert.is(count.headers.get('x-total-count'), '61');
      assert.is(await service.stop(), 0);
    } finally {
      await service.stop();
    }
    assert.match(service.output(), /started 2 workers/);
    assert.is(service.output().match(/stopped: database checkpointed and closed/g)?.length, 2);
  });
});

workers.run();

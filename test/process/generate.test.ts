// `npm run db:generate` proving what it writes: the real command on a temp copy of the pet shop (its
// schema, both migrations folders, a drizzle-kit config), and the migrators naming the file of a refused statement.
import { cpSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { createPgConfig } from '@electric-sql/pglite/node-postgres';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { applyPgMigrations } from '../../src/engine/postgres/migrate.js';
import { MigrationError } from '../../src/engine/sqlite/migrate.js';
import {
  installPetShopWith,
  PET_SHOP_MIGRATIONS,
  petShopSchemaSource,
  ROOT,
  runGenerate,
  runScript,
  withTempDir,
} from '../support/helpers.js';

/** A project of its own in `dir`: the pet shop's schema.ts, its migrations (both engines) and a drizzle-kit config naming them. */
function petShopProject(dir: string): { schema: string; edit: (change: (source: string) => string) => void } {
  const schema = join(dir, 'schema.ts');
  writeFileSync(schema, petShopSchemaSource());
  cpSync(PET_SHOP_MIGRATIONS, join(dir, 'migrations'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  // drizzle-kit reads the config's paths relative to the working directory (the project's, as generate runs it).
  const internal = relative(dir, join(ROOT, 'src', 'db', 'internal-schema.ts'));
  const config = { dialect: 'sqlite', schema: ['./schema.ts', internal], out: './migrations' };
  writeFileSync(
    join(dir, 'drizzle.config.ts'),
    `import { defineConfig } from 'drizzle-kit';\nexport default defineConfig(${JSON.stringify(config)});\n`,
  );
  return { schema, edit: (change) => writeFileSync(schema, change(readFileSync(schema, 'utf8'))) };
}

/** Runs `npm run db:generate`'s command in the project `dir` (paths in its messages are relative to it). */
function generate(dir: string, name: string): Promise<{ code: number | null; output: string }> {
  const args = ['--sqlite-config', 'drizzle.config.ts', '--schema', 'schema.ts', '--out', 'migrations/pg', '--name', name];
  return runGenerate(args, { cwd: dir, env: { ...process.env, npm_lifecycle_event: 'db:generate' }, timeoutMs: 180_000 });
}

/** Every file of the project's migrations/ (both engines), by path, with its content. */
function migrationFiles(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      if (statSync(path).isDirectory()) walk(path);
      else files[relative(dir, path)] = readFileSync(path, 'utf8');
    }
  };
  walk(join(dir, 'migrations'));
  return files;
}

const NEXT = '0004'; // the pet shop has 0000–0003 on SQLite

/** A nullable column of pets, its named check, or both: the change of the issue. */
const withColumn = (source: string) => source.replace("ownerId: integer('owner_id')", "reader: text('reader'),\n    $&");
const withCheck = (source: string) =>
  source
    .replace(
      "import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';",
      "import { sql } from 'drizzle-orm';\nimport { check, index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';",
    )
    .replace(
      "(t) => [index('pets_owner_id_idx').on(t.ownerId)]",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: source text for the schema file, where ${} is drizzle's sql template
      "(t) => [index('pets_owner_id_idx').on(t.ownerId), check('pets_reader_check', sql`${t.reader} <> ''`)]",
    );

const proving = suite('db:generate proves each migration it writes');

proving(
  'a change that runs is written and proven on both engines; one that cannot is refused naming the file, the statement and the remedy, and nothing is written',
  async () => {
    await withTempDir(async (dir) => {
      const project = petShopProject(dir);
      assert.ok(withCheck(withColumn(petShopSchemaSource())).includes("check('pets_reader_check'"), 'the edit applies to the pet shop');

      // An earlier migration, generated and not committed: the failed run below must leave it alone.
      project.edit((source) => source.replace("name: text('name').notNull(),", "$&\n  nickname: text('nickname'),"));
      const good = await generate(dir, 'nickname');
      assert.is(good.code, 0, good.output);
      assert.match(
        good.output,
        `SQLite: proved: the 5 migration(s) of migrations apply in order to a new SQLite file, the change feed's triggers too`,
      );
      assert.match(
        good.output,
        /PostgreSQL: proved: the 3 migration\(s\) of migrations\/pg apply in order to a new PostgreSQL database: PostgreSQL \d+\.\d+ \(PGlite [\d.]+\), in memory/,
      );
      assert.match(
        good.output,
        `wrote migrations/${NEXT}_nickname.sql, migrations/meta/${NEXT}_snapshot.json, migrations/pg/0002_nickname.sql, migrations/pg/meta/0002_snapshot.json, migrations/meta/_journal.json, migrations/pg/meta/_journal.json`,
      );
      assert.match(readFileSync(join(dir, 'migrations', `${NEXT}_nickname.sql`), 'utf8'), /ALTER TABLE `users` ADD `nickname` text/);
      const before = migrationFiles(dir);

      project.edit((source) => withCheck(withColumn(source)));
      const refused = await generate(dir, 'reader');
      assert.is(refused.code, 1, refused.output);
      const file = 'migrations/0005_reader.sql';
      assert.match(
        refused.output,
        `generate: ${file}, generated just now, cannot run: SQLite refused the statement at ${file}:14\n  INSERT INTO \`__new_pets\`(`,
      );
      assert.match(refused.output, '  no such column: "reader" - should this be a string literal in single-quotes?\n');
      assert.match(
        refused.output,
        'what to do: make the change in two migrations. Take the new check() (or the other constraint change) of pets out of schema.ts, keep the new column(s), run `npm run db:generate -- --name add_reader`',
      );
      assert.match(
        refused.output,
        'generate: nothing was written to migrations or migrations/pg: the migrations were generated and tried in a scratch copy',
      );
      assert.equal(migrationFiles(dir), before, 'the earlier migrations, the uncommitted one too, are as they were');

      // The remedy it gives: the column first, then the check.
      project.edit((source) => source.replace(/, check\('pets_reader_check'.*?\)\]/, ']'));
      const column = await generate(dir, 'add_reader');
      assert.is(column.code, 0, column.output);
      project.edit(withCheck);
      const checked = await generate(dir, 'reader_check');
      assert.is(checked.code, 0, checked.output);
      assert.match(checked.output, 'SQLite: proved: the 7 migration(s) of migrations apply in order');
      assert.match(checked.output, 'PostgreSQL: proved: the 5 migration(s) of migrations/pg apply in order');
    });
  },
);

proving.run();

/** Appends a migration of `statements` to the drizzle-kit folder `folder` (a hand-made one, as a merge could bring). */
function appendBroken(folder: string, tag: string, statements: string[]): void {
  const journalPath = join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8'));
  const last = journal.entries.at(-1);
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1, tag });
  writeFileSync(journalPath, JSON.stringify(journal));
  writeFileSync(join(folder, `${tag}.sql`), statements.join('--> statement-breakpoint\n'));
}

const naming = suite('a refused migration is named by its file, line and statement');

naming('npm run migrate and npm start name the file, the line and the statement SQLite refused', async () => {
  const install = await installPetShopWith('');
  appendBroken(join(install, 'migrations'), '0004_broken', [
    'ALTER TABLE `pets` ADD `reader` text;\n',
    'INSERT INTO `pets` (`nope`) SELECT 1;',
  ]);
  await withTempDir(async (dir) => {
    const env = { DATABASE_PATH: join(dir, 'app.db') };
    const line =
      'migration failed, nothing was applied: migrations/0004_broken.sql:3 (INSERT INTO `pets` (`nope`) SELECT 1;): table pets has no column named nope';
    const migrate = await runScript('cli/migrate.js', env, [], install);
    assert.is(migrate.code, 1, migrate.output);
    assert.is(migrate.output, `migrate: ${line}\n`);
    const start = await runScript('main.js', env, [], install);
    assert.is(start.code, 1, start.output);
    assert.match(start.output, `restable: ${line}\n`);
  });
});

naming('the PostgreSQL migrator names them too (on PGlite)', async () => {
  await withTempDir(async (dir) => {
    const folder = join(dir, 'pg');
    cpSync(join(PET_SHOP_MIGRATIONS, 'pg'), folder, { recursive: true });
    appendBroken(folder, '0002_broken', ['ALTER TABLE "pets" ADD COLUMN "reader" text;\n', '\nINSERT INTO "pets" ("nope") SELECT 1;']);
    const pglite = await PGlite.create();
    const pool = new pg.Pool(createPgConfig(pglite));
    try {
      // unaccent is not loaded: the pet shop's search migration would fail first, so the chain stops before it.
      const journal = join(folder, 'meta', '_journal.json');
      const entries = JSON.parse(readFileSync(journal, 'utf8')).entries.filter((e: { tag: string }) => !e.tag.endsWith('_search'));
      writeFileSync(journal, JSON.stringify({ version: '7', dialect: 'postgresql', entries }));
      const error = await applyPgMigrations({ engine: 'postgres', pool, url: 'pglite' }, folder).catch((e: unknown) => e);
      assert.instance(error, MigrationError);
      assert.is(
        (error as Error).message,
        `migration failed, nothing was applied: ${join(folder, '0002_broken.sql')}:4 (INSERT INTO "pets" ("nope") SELECT 1;): column "nope" of relation "pets" does not exist`,
      );
    } finally {
      await pool.end();
      await pglite.close();
    }
  });
});

naming.run();

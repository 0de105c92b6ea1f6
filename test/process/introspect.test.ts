// `npm run introspect` on the music-store fixture (test/fixtures/music-store.sql): the generated schema
// module, its migrations (baseline recorded as applied, restable's tables pending) and no row changed; served: existing-database.test.ts.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { generateSQLiteDrizzleJson, generateSQLiteMigration } from 'drizzle-kit/api';
import { getTableColumns, is } from 'drizzle-orm';
import { getTableConfig, getViewConfig, type SQLiteColumn, SQLiteTable, SQLiteView } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkDrift } from '../../src/cli/generate.js';
import { customKindOf } from '../../src/db/columns.js';
import type { DatabaseHandle } from '../../src/engine/sqlite/connection.js';
import { migrationStatus } from '../../src/engine/sqlite/migrate.js';
import { createRegistry } from '../../src/model/registry.js';
import { PET_SHOP_MIGRATIONS, ROOT, type Service, startService, tempDir } from '../support/helpers.js';
import { checksums, FIXTURE, introspect, introspectFixture, type Run } from '../support/music-store.js';

/** Type-checks the generated module alone, as strictly as a project may (strict, unchecked index access). */
function strictTsc(run: Run) {
  return spawnSync(
    process.execPath,
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      ...['--noEmit', '--strict', '--noUncheckedIndexedAccess', '--skipLibCheck', '--target', 'ES2022'],
      ...['--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node', run.schemaPath],
    ],
    { cwd: run.dir, encoding: 'utf8' },
  );
}

const Introspect = suite<{ run: Run }>('npm run introspect');

Introspect.before(async (context) => {
  context.run = await introspectFixture();
});

Introspect.after((context) => context.run?.remove());

/** The generated table (or view) whose SQL name is `name`. */
function sourceNamed(schema: Record<string, unknown>, name: string): SQLiteTable | SQLiteView {
  const found = Object.values(schema).find(
    (v) => (is(v, SQLiteTable) && getTableConfig(v).name === name) || (is(v, SQLiteView) && getViewConfig(v).name === name),
  );
  if (!found) throw new Error(`no table or view ${name} in the generated schema`);
  return found as SQLiteTable | SQLiteView;
}

const columnsOf = (source: SQLiteTable | SQLiteView) =>
  (is(source, SQLiteView) ? getViewConfig(source).selectedFields : getTableColumns(source)) as Record<string, SQLiteColumn>;

Introspect('declares every table and view with its exact name, and valid unique field keys', ({ run }) => {
  const names = Object.values(run.schema)
    .filter((v) => is(v, SQLiteTable) || is(v, SQLiteView))
    .map((v) => (is(v, SQLiteView) ? getViewConfig(v).name : getTableConfig(v as SQLiteTable).name))
    .sort();
  const expected = [
    'Album',
    'AlbumSummary',
    'Artist',
    'Currency',
    'Customer',
    'Employee',
    'Genre',
    'Invoice',
    'InvoiceLine',
    'Liner Notes',
    'MediaType',
    'PlayLog',
    'Playlist',
    'PlaylistTrack',
    'Setting',
    'Tag',
    'Ticket',
    'Track',
    'TrackTag',
  ];
  assert.equal(names, expected);
  for (const name of names) {
    const columns = columnsOf(sourceNamed(run.schema, name));
    for (const key of Object.keys(columns)) assert.ok(/^[A-Za-z_][A-Za-z0-9_]*$/.test(key), `${name}.${key} is a valid field key`);
  }
  const linerNotes = columnsOf(sourceNamed(run.schema, 'Liner Notes'));
  assert.is(linerNotes.noteText?.name, 'Note Text');
  assert.is(columnsOf(sourceNamed(run.schema, 'Album')).artistId?.name, 'ArtistId');
});

Introspect('types columns by SQLite affinity: NUMERIC exact, DATETIME text, BLOB bytes, no type untyped', ({ run }) => {
  const kind = (table: string, field: string) => {
    const column = columnsOf(sourceNamed(run.schema, table))[field] as SQLiteColumn;
    return customKindOf(column) ?? column.columnType;
  };
  assert.is(kind('Track', 'unitPrice'), 'SQLiteNumeric');
  assert.is(kind('Invoice', 'total'), 'SQLiteNumeric');
  assert.is(kind('Track', 'name'), 'SQLiteText');
  assert.is((columnsOf(sourceNamed(run.schema, 'Track')).name as SQLiteColumn & { length?: number }).length, 200);
  assert.is(kind('Invoice', 'invoiceDate'), 'dateText');
  assert.is(kind('Liner Notes', 'written'), 'dateText');
  assert.is(kind('Employee', 'photo'), 'bytes');
  assert.is(kind('Setting', 'value'), 'untyped');
  // A BOOLEAN keeps its integers and takes true/false too.
  assert.is(kind('Customer', 'isActive'), 'booleanInteger');
  assert.is(kind('Currency', 'rate'), 'SQLiteReal');
  assert.is(kind('AlbumSummary', 'trackCount'), 'untyped');
  const customer = columnsOf(sourceNamed(run.schema, 'Customer'));
  assert.is(customer.isActive?.default, 1);
  assert.ok(customer.email?.isUnique, 'Customer.Email keeps its UNIQUE constraint');
  assert.is(columnsOf(sourceNamed(run.schema, 'Invoice')).currencyCode?.default, 'USD');
});

Introspect('declares keys in key order, AUTOINCREMENT, and keyless tables without one', ({ run }) => {
  const keyOf = (name: string) => {
    const table = sourceNamed(run.schema, name) as SQLiteTable;
    const composite = getTableConfig(table).primaryKeys[0];
    if (composite) return composite.columns.map((c) => c.name);
    return Object.values(getTableColumns(table))
      .filter((c) => c.primary)
      .map((c) => c.name);
  };
  assert.equal(keyOf('PlaylistTrack'), ['PlaylistId', 'TrackId']);
  assert.equal(keyOf('Tag'), ['Kind', 'Label']);
  assert.equal(keyOf('TrackTag'), ['Kind', 'Label', 'TrackId'], 'the PRIMARY KEY order, not the column order');
  assert.equal(keyOf('Currency'), ['Code']);
  assert.equal(keyOf('PlayLog'), []);
  const employee = getTableColumns(sourceNamed(run.schema, 'Employee') as SQLiteTable);
  assert.ok((employee.employeeId as SQLiteColumn & { autoIncrement?: boolean }).autoIncrement, 'AUTOINCREMENT is kept');
  const artist = getTableColumns(sourceNamed(run.schema, 'Artist') as SQLiteTable);
  assert.not.ok((artist.artistId as SQLiteColumn & { autoIncrement?: boolean }).autoIncrement);
  assert.ok(is(sourceNamed(run.schema, 'AlbumSummary'), SQLiteView));
  const select = getViewConfig(sourceNamed(run.schema, 'AlbumSummary') as SQLiteView).query?.queryChunks[0] as { value: string[] };
  assert.match(select.value.join(''), /^SELECT[\s\S]*FROM "Album"[\s\S]*GROUP BY/);
});

Introspect('declares foreign keys, self-references and multi-column ones with their actions', ({ run }) => {
  const fks = (name: string) =>
    getTableConfig(sourceNamed(run.schema, name) as SQLiteTable).foreignKeys.map((fk) => {
      const ref = fk.reference();
      return `${ref.columns.map((c) => c.name).join('+')}->${getTableConfig(ref.foreignTable).name}(${ref.foreignColumns.map((c) => c.name).join('+')})${fk.onDelete && fk.onDelete !== 'no action' ? ` ${fk.onDelete}` : ''}`;
    });
  assert.equal(fks('Employee'), ['ReportsTo->Employee(EmployeeId)']);
  assert.equal(fks('Ticket').sort(), ['ClosedBy->Employee(EmployeeId)', 'OpenedBy->Employee(EmployeeId)']);
  assert.equal(fks('InvoiceLine').sort(), ['InvoiceId->Invoice(InvoiceId) cascade', 'TrackId->Track(TrackId)']);
  assert.equal(fks('Customer'), ['SupportRepId->Employee(EmployeeId) set null']);
  assert.equal(fks('TrackTag').sort(), ['Kind+Label->Tag(Kind+Label)', 'TrackId->Track(TrackId)']);
  assert.equal(fks('Album'), ['ArtistId->Artist(ArtistId)'], 'declared although old rows break it');
});

Introspect('names each related path of a table with two foreign keys to one parent, on both sides', ({ run }) => {
  const source = readFileSync(run.schemaPath, 'utf8');
  assert.match(source, /TicketByOpenedBy: many\(ticket, \{ relationName: 'TicketByOpenedBy' \}\)/);
  assert.match(source, /TicketByClosedBy: many\(ticket, \{ relationName: 'TicketByClosedBy' \}\)/);
  assert.match(
    source,
    /one\(employee, \{ fields: \[ticket\.openedBy\], references: \[employee\.employeeId\], relationName: 'TicketByOpenedBy' \}\)/,
  );
  assert.not.match(source, /many\(album/, 'a single foreign key needs no relations()');
  assert.match(source, /\(\): AnySQLiteColumn => employee\.employeeId/, 'the self-reference is typed');
  assert.match(run.output.stdout, /\/Employee\/\{id\}\/TicketByOpenedBy/);
});

Introspect('writes a module Biome leaves as it is and strict tsc accepts', ({ run }) => {
  const source = readFileSync(run.schemaPath, 'utf8');
  assert.match(source, /^\/\/ Generated by `npm run introspect` from .*music\.db on \d{4}-\d{2}-\d{2}/);
  const biome = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/@biomejs/biome/bin/biome'), 'check', '--write', '--stdin-file-path=src/db/schema.ts'],
    { cwd: ROOT, input: source, encoding: 'utf8' },
  );
  assert.is(biome.status, 0, biome.stderr);
  assert.is(biome.stdout, source, 'already formatted, imports sorted, nothing to fix');
  const tsc = strictTsc(run);
  assert.is(tsc.status, 0, tsc.stdout + tsc.stderr);
});

Introspect('records the baseline as applied without running it; restable tables are pending', ({ run }) => {
  const sqlite = new Database(run.db, { readonly: true });
  try {
    const status = migrationStatus({ sqlite } as DatabaseHandle, run.out);
    assert.equal(status, { applied: ['0000_baseline'], pending: ['0001_restable_tables'], unknown: 0 });
    const internal = sqlite.prepare("SELECT name FROM sqlite_master WHERE name LIKE 'restable_%'").pluck().all();
    assert.equal(internal, [], 'the second migration has not run yet');
  } finally {
    sqlite.close();
  }
  assert.match(readFileSync(join(run.out, '0000_baseline.sql'), 'utf8'), /CREATE TABLE `PlaylistTrack`/);
  assert.match(readFileSync(join(run.out, '0001_restable_tables.sql'), 'utf8'), /CREATE TABLE `restable_secrets`/);
});

Introspect('changes no row of the database', ({ run }) => {
  assert.equal(checksums(run.db, Object.keys(run.before)), run.before);
});

Introspect('writes PostgreSQL migrations too, and neither backend drifts from the schema', async ({ run }) => {
  assert.ok(existsSync(join(run.out, 'pg', 'meta', '_journal.json')), run.output.stdout);
  const drifts = await checkDrift({ schema: run.schema, pgFolder: join(run.out, 'pg'), sqliteFolder: run.out });
  assert.equal(drifts, []);
});

Introspect('refuses to overwrite the schema without --force, saying what it would overwrite', ({ run }) => {
  const before = readFileSync(run.schemaPath, 'utf8');
  const refused = introspect([run.db, '--schema', run.schemaPath, '--out', run.out]);
  assert.is(refused.code, 1);
  assert.is(refused.stdout, '');
  assert.is(refused.stderr.trim().split('\n').length, 1, refused.stderr);
  assert.match(refused.stderr, /schema\.ts exists; run again with --force/);
  assert.is(readFileSync(run.schemaPath, 'utf8'), before);
});

Introspect('refuses a schema path where drizzle-orm cannot be imported, before writing anything', ({ run }) => {
  const { dir, remove } = tempDir(); // no node_modules reachable from here
  try {
    const schema = join(dir, 'schema.ts');
    const refused = introspect([run.db, '--schema', schema, '--out', join(dir, 'migrations'), '--force']);
    assert.is(refused.code, 1);
    assert.is(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.match(refused.stderr, /drizzle-orm cannot be imported from/);
    assert.not.ok(existsSync(schema));
    assert.not.ok(existsSync(join(dir, 'migrations')));
  } finally {
    remove();
  }
});

Introspect('refuses a database whose migrations are already recorded, even with --force', ({ run }) => {
  const again = introspect([run.db, '--schema', run.schemaPath, '--out', run.out, '--force']);
  assert.is(again.code, 1);
  assert.match(again.stderr, /already records 1 migration\(s\)/);
});

Introspect('gives the same schema for a file written by the sqlite3 command-line tool', async ({ run }) => {
  // Debian's sqlite3 (.ci/run installs it): a missing tool is a failure, not a skip.
  assert.is(spawnSync('sqlite3', ['-version']).status, 0, 'the sqlite3 command-line tool is needed: apt-get install sqlite3');
  const fromCli = await introspectFixture((path) => {
    const made = spawnSync('sqlite3', [path], { input: readFileSync(FIXTURE) });
    if (made.status !== 0) throw new Error(`sqlite3 failed: ${made.stderr}`);
    return path;
  });
  try {
    const body = (path: string) => readFileSync(path, 'utf8').split('\n').slice(1).join('\n');
    assert.fixture(body(fromCli.schemaPath), body(run.schemaPath));
    assert.equal(checksums(fromCli.db, Object.keys(fromCli.before)), fromCli.before);
  } finally {
    fromCli.remove();
  }
});

Introspect.run();

const Edges = suite('introspect: awkward declarations');

/** Names and declarations real files have that the music store does not: each must still yield a module that loads and type-checks. */
const AWKWARD = `
  CREATE TABLE "case" ("id" INTEGER PRIMARY KEY, "AlbumId" INT, "album_id" INT, "constructor" TEXT, "2nd" TEXT, "Prix €" DECIMAL(8,3));
  CREATE TABLE "text" ("Code" VARCHAR(3) NOT NULL PRIMARY KEY, "Label" TEXT DEFAULT 'it''s \\ \${x}', "Ratio" DOUBLE DEFAULT 1.5,
    "Born" TIMESTAMP DEFAULT (datetime('now')), "Flag" BOOL DEFAULT TRUE, "Raw" BLOB DEFAULT X'00', "Any" DEFAULT 7,
    "Twice" INTEGER GENERATED ALWAYS AS ("Ratio" * 2) STORED);
  CREATE TABLE "2020 Sales" ("CaseId" INTEGER REFERENCES "CASE", "Code" TEXT REFERENCES "Text" ("code") ON UPDATE CASCADE,
    "Lost" INTEGER REFERENCES "Nowhere" ("Id"), "Amount" MONEY NOT NULL DEFAULT 0);
  CREATE UNIQUE INDEX "one_code_per_case" ON "2020 Sales" ("CaseId", "Code") WHERE "Code" IS NOT NULL;
  CREATE INDEX "by_lower_code" ON "2020 Sales" (lower("Code"));
  CREATE VIEW "odd \`view\`" ("a", "b") AS SELECT 1, '\${not a template}';
`;

Edges('a name holding a double quote: SQLite serves it, and no PostgreSQL migration is written for it', async () => {
  const run = await introspectFixture((path) => {
    const db = new Database(path);
    db.exec('CREATE TABLE "Parent Table" ("a b" INTEGER, "k""q" TEXT, PRIMARY KEY ("a b", "k""q"))');
    db.close();
    return path;
  });
  try {
    assert.match(
      run.output.stdout,
      /none: this schema cannot be converted to PostgreSQL \(column "k"q" of "Parent Table" holds a double quote/,
    );
    assert.not.ok(existsSync(join(run.out, 'pg')), 'no PostgreSQL migration');
    assert.ok(existsSync(join(run.out, '0000_baseline.sql')));
  } finally {
    run.remove();
  }
});

Edges('writes a module that loads and type-checks for reserved, clashing and non-identifier names', async () => {
  const run = await introspectFixture((path) => {
    const db = new Database(path);
    db.exec(AWKWARD);
    db.close();
    return path;
  });
  try {
    const source = readFileSync(run.schemaPath, 'utf8');
    const caseTable = sourceNamed(run.schema, 'case') as SQLiteTable;
    assert.equal(Object.keys(getTableColumns(caseTable)), ['id', 'albumId', 'albumId2', 'constructor2', '_2nd', 'prix']);
    assert.match(source, /export const caseTable = sqliteTable\('case'/, 'a reserved word is no export name');
    assert.match(source, /export const textTable = sqliteTable\('text'/, 'nor an import');
    const text = getTableColumns(sourceNamed(run.schema, 'text') as SQLiteTable);
    assert.is(text.label?.default, `it's \\ \${x}`);
    assert.is(text.ratio?.default, 1.5);
    assert.is(text.flag?.default, 1);
    assert.ok(text.twice?.generated, 'the generated column stays generated');
    // The table as drizzle-kit would create it again (a migration that rebuilds it): SQL defaults keep their parentheses.
    const created = await generateSQLiteMigration(
      await generateSQLiteDrizzleJson({}),
      await generateSQLiteDrizzleJson({ text: sourceNamed(run.schema, 'text') }),
    );
    const scratch = new Database(':memory:');
    for (const statement of created) scratch.exec(statement);
    scratch.close();
    const sales = getTableConfig(sourceNamed(run.schema, '2020 Sales') as SQLiteTable);
    const references = sales.foreignKeys.map((fk) =>
      fk
        .reference()
        .foreignColumns.map((c) => c.name)
        .join(),
    );
    assert.equal(references, ['id', 'Code'], 'a reference without columns names the key; names match case-insensitively');
    assert.equal(
      sales.indexes.map((i) => i.config.name),
      ['one_code_per_case'],
    );
    assert.ok(sales.indexes[0]?.config.where, 'a partial index keeps its WHERE');
    assert.match(source, /index "by_lower_code" is on an expression/);
    assert.match(source, /foreign key \(Lost\) → Nowhere names no table/);
    assert.ok(is(sourceNamed(run.schema, 'odd `view`'), SQLiteView));
    const tsc = strictTsc(run);
    assert.is(tsc.status, 0, tsc.stdout + tsc.stderr);
    assert.equal(checksums(run.db, Object.keys(run.before)), run.before);
  } finally {
    run.remove();
  }
});

Edges('a foreign key whose to-one name is also a field gets its one() named otherwise, so the schema serves', async () => {
  const run = await introspectFixture((path) => {
    const db = new Database(path);
    db.exec(`CREATE TABLE "Status" ("StatusId" INTEGER PRIMARY KEY, "Label" TEXT);
             CREATE TABLE "Task" ("TaskId" INTEGER PRIMARY KEY, "Status" TEXT, "StatusId" INTEGER REFERENCES "Status");`);
    db.close();
    return path;
  });
  try {
    const task = createRegistry(run.schema).resources.find((r) => r.name === 'Task');
    assert.equal([...(task?.expansions.keys() ?? [])], ['statusIdStatus']);
    assert.is(task?.expansions.get('statusIdStatus')?.target.name, 'Status');
    const tsc = strictTsc(run);
    assert.is(tsc.status, 0, tsc.stdout + tsc.stderr);
  } finally {
    run.remove();
  }
});

Edges('ANY is untyped() in a STRICT table, served as stored (a BLOB as base64); elsewhere NUMERIC, as SQLite holds it', async () => {
  const run = await introspectFixture((path) => {
    const db = new Database(path);
    db.exec(`CREATE TABLE "Loose" ("id" INTEGER PRIMARY KEY, "v" ANY);
             CREATE TABLE "Strict" ("id" INTEGER PRIMARY KEY, "v" ANY, "w" any, "n" INT) STRICT;
             INSERT INTO "Strict" VALUES (1, X'00FF', 'text', 1), (2, '0.10', 1.5, 2);`);
    db.close();
    return path;
  });
  let service: Service | undefined;
  try {
    const kind = (table: string, field: string) => {
      const column = columnsOf(sourceNamed(run.schema, table))[field] as SQLiteColumn;
      return customKindOf(column) ?? column.columnType;
    };
    assert.is(kind('Strict', 'v'), 'untyped');
    assert.is(kind('Strict', 'w'), 'untyped');
    assert.is(kind('Strict', 'n'), 'SQLiteInteger');
    assert.is(kind('Loose', 'v'), 'SQLiteNumeric');
    assert.match(readFileSync(run.schemaPath, 'utf8'), /\/\/ STRICT in the database/);
    service = await startService({ schema: run.schema, migrationsFolder: run.out, env: { DATABASE_PATH: run.db } });
    assert.equal((await service.request('GET', '/Strict/1')).body, { id: 1, v: 'AP8=', w: 'text', n: 1 });
    assert.equal((await service.request('GET', '/Strict/2')).body, { id: 2, v: '0.10', w: 1.5, n: 2 });
    const created = await service.request('POST', '/Strict', { body: { v: 'any text', w: 2.5, n: 3 } });
    assert.is(created.status, 201, created.text);
    assert.equal(created.body, { id: 3, v: 'any text', w: 2.5, n: 3 });
  } finally {
    await service?.close();
    run.remove();
  }
});

Edges.run();

const Keys = suite('introspect: integer keys SQLite does not assign');

/** Keys SQLite does not assign (declared INT or BIGINT, INTEGER … DESC, WITHOUT ROWID), and two rowid aliases. */
const KEYS = `
  CREATE TABLE "IntKey" ("id" INT PRIMARY KEY, "v" TEXT);
  CREATE TABLE "BigKey" ("id" BIGINT PRIMARY KEY, "v" TEXT);
  CREATE TABLE "DescKey" ("id" INTEGER PRIMARY KEY DESC, "v" TEXT);
  CREATE TABLE "NoRowid" ("id" INTEGER PRIMARY KEY, "v" TEXT) WITHOUT ROWID;
  CREATE TABLE "Rowid" ("id" integer PRIMARY KEY, "v" TEXT);
  CREATE TABLE "RowidDesc" ("id" INTEGER, "v" TEXT, PRIMARY KEY ("id" DESC));
`;
const GIVEN = ['IntKey', 'BigKey', 'DescKey', 'NoRowid'];

/** Whether SQLite keeps an index of its own for the table's key, i.e. the key is no rowid alias. */
const keyIndexed = (db: Database.Database, table: string) =>
  (db.prepare(`PRAGMA index_list("${table}")`).all() as { origin: string }[]).some((index) => index.origin === 'pk');

Keys('declares them intKey() (int), required on create; a new file made by the migrations keeps them unassigned', async () => {
  const run = await introspectFixture((path) => {
    const db = new Database(path);
    db.exec(KEYS);
    db.close();
    return path;
  });
  try {
    const registry = createRegistry(run.schema);
    for (const table of [...GIVEN, 'Rowid', 'RowidDesc']) {
      const id = columnsOf(sourceNamed(run.schema, table)).id as SQLiteColumn;
      const resource = registry.resources.find((r) => r.name === table);
      if (GIVEN.includes(table)) {
        assert.is(customKindOf(id), 'integer', table);
        assert.is(id.getSQLType(), 'int', table);
        assert.not.ok(resource?.serverAssigned.has('id'), `${table}: the client gives the key`);
        assert.not.ok(resource?.createSchema.safeParse({ v: 'x' }).success, `${table}: a create needs the key`);
        assert.ok(resource?.createSchema.safeParse({ id: 7, v: 'x' }).success, table);
      } else {
        assert.is(id.columnType, 'SQLiteInteger', table);
        assert.ok(resource?.serverAssigned.has('id'), `${table}: SQLite assigns its rowid`);
      }
    }
    const tsc = strictTsc(run);
    assert.is(tsc.status, 0, tsc.stdout + tsc.stderr);
    assert.equal(await checkDrift({ schema: run.schema, pgFolder: join(run.out, 'pg'), sqliteFolder: run.out }), []);
    // What a later migration that rebuilds a table declares (a new file gets it all): still no rowid alias.
    const fresh = new Database(join(run.dir, 'fresh.db'));
    try {
      fresh.exec(readFileSync(join(run.out, '0000_baseline.sql'), 'utf8').replaceAll('--> statement-breakpoint', ''));
      for (const table of GIVEN) assert.ok(keyIndexed(fresh, table), `${table} keeps a key SQLite does not assign`);
      for (const table of ['Rowid', 'RowidDesc']) assert.not.ok(keyIndexed(fresh, table), `${table} keeps its rowid key`);
    } finally {
      fresh.close();
    }
  } finally {
    run.remove();
  }
});

Keys.run();

const Project = suite('introspect: the project files, replaced whole or not at all');

/** A project folder holding the pet shop's schema and migrations (search.json in both folders included), and a database to introspect. */
function petShopProject(sql: string) {
  const { dir, remove } = tempDir();
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  cpSync(join(ROOT, 'test', 'pet-shop', 'schema.ts'), join(dir, 'schema.ts'));
  cpSync(PET_SHOP_MIGRATIONS, join(dir, 'migrations'), { recursive: true });
  const db = join(dir, 'existing.db');
  const sqlite = new Database(db);
  sqlite.exec(sql);
  sqlite.close();
  const args = [db, '--schema', join(dir, 'schema.ts'), '--out', join(dir, 'migrations'), '--force'];
  const digest = (path: string) =>
    createHash('sha256')
      .update(readFileSync(join(dir, path)))
      .digest('hex');
  /** Every file of the project but the database and node_modules, with a digest of its content. */
  const files = () =>
    Object.fromEntries(
      (readdirSync(dir, { recursive: true }) as string[])
        .filter((path) => !/^(node_modules|existing\.db)/.test(path) && statSync(join(dir, path)).isFile())
        .sort()
        .map((path) => [path, digest(path)]),
    );
  return { dir, db, args, files, remove };
}

Project('refuses a column named __proto__ in one line, before changing any file', () => {
  const project = petShopProject('CREATE TABLE "t" ("id" INTEGER PRIMARY KEY, "__proto__" TEXT);');
  try {
    const before = project.files();
    const refused = introspect(project.args);
    assert.is(refused.code, 1);
    assert.is(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.match(refused.stderr, /^introspect: .*the column "__proto__" of t cannot be declared/);
    assert.equal(project.files(), before);
  } finally {
    project.remove();
  }
});

Project('refuses, in one line and before recording anything, a table the service could not serve or would make itself', () => {
  for (const [sql, refusal] of [
    [
      'CREATE TABLE "_batch" ("id" INTEGER PRIMARY KEY); CREATE TABLE "docs" ("id" INTEGER PRIMARY KEY);',
      /collides with the service path \/_batch; rename the table in the database, then introspect again$/,
    ],
    [
      'CREATE TABLE "t" ("id" INTEGER PRIMARY KEY); CREATE TABLE "restable_secrets" ("k" TEXT);',
      /has tables named like restable's own \(restable_secrets\), which restable did not make: rename them first$/,
    ],
    // The only table of the file: said as such, not as a file with nothing to serve.
    ['CREATE TABLE "RESTABLE_x" ("id" INTEGER PRIMARY KEY, "v" TEXT);', /has tables named like restable's own \(RESTABLE_x\)/],
  ] as const) {
    const project = petShopProject(sql);
    try {
      const before = project.files();
      const refused = introspect(project.args);
      assert.is(refused.code, 1, refused.stderr);
      assert.is(refused.stderr.trim().split('\n').length, 1, refused.stderr);
      assert.match(refused.stderr.trim(), refusal);
      assert.equal(project.files(), before);
      const recorded = new Database(project.db, { readonly: true });
      assert.not.ok(recorded.prepare("SELECT 1 FROM sqlite_master WHERE name = '__drizzle_migrations'").get(), 'nothing recorded');
      recorded.close();
    } finally {
      project.remove();
    }
  }
});

Project('a failure after the files are made (the baseline cannot be recorded) leaves every file as it was', () => {
  const project = petShopProject(`CREATE TABLE "t" ("id" INTEGER PRIMARY KEY, "v" TEXT);
                                  CREATE TABLE "__drizzle_migrations" ("other" TEXT);`);
  try {
    const before = project.files();
    const failed = introspect(project.args);
    assert.is(failed.code, 1);
    assert.is(failed.stderr.trim().split('\n').length, 1, failed.stderr);
    assert.match(failed.stderr, /cannot record the baseline in __drizzle_migrations/);
    assert.equal(project.files(), before);
  } finally {
    project.remove();
  }
});

Project('replaces all of the pet shop migrations, search.json included: the drift check (npm run db:check) passes', () => {
  const project = petShopProject('CREATE TABLE "t" ("id" INTEGER PRIMARY KEY, "v" TEXT);');
  try {
    const done = introspect(project.args);
    assert.is(done.code, 0, done.stderr);
    const migrations = Object.keys(project.files()).filter((path) => path.startsWith('migrations'));
    assert.equal(migrations, [
      'migrations/0000_baseline.sql',
      'migrations/0001_restable_tables.sql',
      'migrations/meta/0000_snapshot.json',
      'migrations/meta/0001_snapshot.json',
      'migrations/meta/_journal.json',
      'migrations/pg/0000_baseline.sql',
      'migrations/pg/meta/0000_snapshot.json',
      'migrations/pg/meta/_journal.json',
    ]);
    // db:check's command (package.json), on this project's schema and migrations.
    const args = ['--check', '--schema', join(project.dir, 'schema.ts'), '--out', join(project.dir, 'migrations', 'pg')];
    const check = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli', 'generate.ts'), ...args], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    assert.is(check.status, 0, check.stderr + check.stdout);
    assert.match(check.stdout, /the SQLite and PostgreSQL migrations match the schema/);
  } finally {
    project.remove();
  }
});

Project.run();

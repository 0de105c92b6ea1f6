// What the real service says at start about the database it is given: a file of someone else's tables is
// refused (DATABASE_ADOPT goes ahead), a schema ahead of its migrations is a warning, an unwritable file or
// folder names the uid:gid that must write it. Over the compiled entry points and real files.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  inspect,
  installPetShopWith,
  PET_SHOP_MIGRATION_TAGS,
  type Process,
  ROOT,
  request,
  runScript,
  spawnService,
  withTempDir,
} from '../support/helpers.js';

/** A SQLite file written by other software: tables of its own (and an FTS5 index, whose shadow tables are not counted), a row. */
function foreignFile(path: string, fts = true): string {
  const db = new Database(path);
  db.exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT, price NUMERIC);
    CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers (id));
    CREATE TABLE invoice_lines (invoice_id INTEGER, product_id INTEGER, PRIMARY KEY (invoice_id, product_id));
    INSERT INTO customers (name) VALUES ('Ada');`);
  if (fts) db.exec('CREATE VIRTUAL TABLE notes USING fts5(body)');
  db.close();
  return path;
}

const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The service's own JSON log lines in its output (the request log's and stderr's left out). */
const logLines = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{') && !line.includes('"requestId"'))
    .map((line) => JSON.parse(line) as { level: number; msg: string; [key: string]: unknown });

const adoption = suite('adopting an existing database');

adoption(
  'a file of tables the schema does not declare, and none of its migrations, is refused in one line and left as it was',
  async () => {
    await withTempDir(async (dir) => {
      const path = foreignFile(join(dir, 'shop.db'));
      const before = digest(path);
      const line =
        `${path} holds 5 table(s) that the schema does not declare (customers, invoice_lines, invoices and 2 more) and has applied none of its migrations: ` +
        `refusing to adopt it. To serve its own tables, run npm run introspect -- ${path}; to add the schema's tables beside them anyway, set DATABASE_ADOPT=true`;
      for (const workers of ['1', '2']) {
        const started = await runScript('main.js', { DATABASE_PATH: path, WORKERS: workers });
        assert.is(started.code, 1, started.output);
        assert.is(started.output, `restable: ${line}\n`);
      }
      const migrated = await runScript('cli/migrate.js', { DATABASE_PATH: path });
      assert.is(migrated.code, 1, migrated.output);
      assert.is(migrated.output, `migrate: ${line}\n`);
      // Not a byte changed: not turned to WAL, no table, no backup.
      assert.is(digest(path), before);
      assert.equal(readdirSync(dir), ['shop.db']);
      assert.is(
        inspect(path, (db) => db.pragma('journal_mode', { simple: true })),
        'delete',
      );
    });
  },
);

adoption('DATABASE_ADOPT=true migrates such a file and serves the schema beside its tables, which keep their rows', async () => {
  await withTempDir(async (dir) => {
    const path = foreignFile(join(dir, 'shop.db'));
    const service = await spawnService({ DATABASE_PATH: path, DATABASE_ADOPT: 'true' });
    try {
      assert.is((await request(service.url, 'GET', '/readyz')).status, 200);
      assert.is((await request(service.url, 'POST', '/users', { body: { name: 'A', email: 'a@example.com' } })).status, 201);
      assert.match(service.output(), new RegExp(`"msg":"applied ${PET_SHOP_MIGRATION_TAGS.length} migration\\(s\\)"`));
    } finally {
      assert.is(await service.stop(), 0);
    }
    assert.equal(
      inspect(path, (db) => db.prepare('SELECT name FROM customers').pluck().all()),
      ['Ada'],
    );
    // Adopted once, it holds this schema's migrations: it starts again without the variable.
    const again = await spawnService({ DATABASE_PATH: path });
    assert.is(await again.stop(), 0);
    assert.match(again.output(), /database is up to date/);
  });
});

adoption('a new file, an empty one, and one migrated by this schema that other software added a table to all start', async () => {
  await withTempDir(async (dir) => {
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    const migrated = join(dir, 'migrated.db');
    for (const path of [join(dir, 'new', 'app.db'), empty, migrated]) {
      const service = await spawnService({ DATABASE_PATH: path });
      assert.is((await request(service.url, 'GET', '/readyz')).status, 200, path);
      assert.is(await service.stop(), 0);
    }
    new Database(migrated).exec('CREATE TABLE audit_log (id INTEGER PRIMARY KEY, line TEXT)').close();
    const service = await spawnService({ DATABASE_PATH: migrated });
    assert.match(service.output(), /database is up to date/);
    assert.is(await service.stop(), 0);
    assert.is((await runScript('cli/migrate.js', { DATABASE_PATH: migrated })).code, 0);
  });
});

adoption('a file introspected by `npm run introspect` starts, serving its own tables', async () => {
  await withTempDir(async (dir) => {
    const path = foreignFile(join(dir, 'shop.db'), false);
    // The generated schema and migrations replace the pet shop's in an install, as they replace src/db/schema.ts and migrations/.
    const install = await installPetShopWith('');
    const schema = join(install, 'dist', 'db', 'schema.ts');
    const introspected = spawnSync(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'src', 'cli', 'introspect.ts'), path, '--schema', schema, '--out', join(dir, 'out')],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.is(introspected.status, 0, introspected.stderr + introspected.stdout);
    const { default: ts } = await import('typescript');
    const compiled = ts.transpileModule(readFileSync(schema, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(join(install, 'dist', 'db', 'schema.js'), compiled.outputText);
    rmSync(join(install, 'migrations'), { recursive: true });
    cpSync(join(dir, 'out'), join(install, 'migrations'), { recursive: true });
    const service = await spawnService({ DATABASE_PATH: path }, install);
    try {
      const customers = await request(service.url, 'GET', '/customers');
      assert.is(customers.status, 200, customers.text);
      assert.equal(customers.body, [{ id: 1, name: 'Ada' }]);
      assert.match(service.output(), /"msg":"applied 1 migration\(s\)"/);
    } finally {
      assert.is(await service.stop(), 0);
    }
  });
});

adoption.run();

const ahead = suite('a schema ahead of its migrations');

/** The warning start-up logs for `missing`. */
const aheadWarning = (missing: string) =>
  `the schema declares what no migration made (${missing}): run npm run db:generate, then restart; until then /readyz answers 503`;

/** Starts the service on a new file, then again on it; returns both outputs (the first applies the migrations, the second none). */
async function twoStarts(install: string, path: string): Promise<string[]> {
  const outputs: string[] = [];
  for (let i = 0; i < 2; i++) {
    const service: Process = await spawnService({ DATABASE_PATH: path }, install);
    try {
      assert.is((await request(service.url, 'GET', '/readyz')).status, 503);
    } finally {
      assert.is(await service.stop(), 0);
    }
    outputs.push(service.output());
  }
  return outputs;
}

ahead('a table no migration made: one warning line naming it and the command, never "database is up to date"', async () => {
  const install = await installPetShopWith(
    "import { sqliteTable as labelsTable, integer as labelsInteger } from 'drizzle-orm/sqlite-core';\n" +
      "export const labels = labelsTable('labels', { id: labelsInteger('id').primaryKey() });",
  );
  await withTempDir(async (dir) => {
    const [first, second] = await twoStarts(install, join(dir, 'app.db'));
    for (const output of [first as string, second as string]) {
      const lines = logLines(output);
      const warnings = lines.filter((line) => line.level === 40);
      assert.equal(
        warnings.map((line) => [line.msg, line.missing]),
        [[aheadWarning('labels'), ['labels']]],
      );
      assert.not.ok(
        lines.some((line) => line.msg === 'database is up to date'),
        output,
      );
    }
    assert.ok(logLines(first as string).some((line) => line.msg === `applied ${PET_SHOP_MIGRATION_TAGS.length} migration(s)`));
  });
});

ahead('a column no migration made is named as table.column', async () => {
  const install = await installPetShopWith('');
  const schema = join(install, 'dist', 'db', 'schema.js');
  const source = readFileSync(schema, 'utf8');
  const email = "email: text('email').notNull().unique(),";
  assert.ok(source.includes(email));
  writeFileSync(schema, source.replace(email, `${email} nickname: text('nickname'), motto: text('motto'),`));
  await withTempDir(async (dir) => {
    const [, second] = await twoStarts(install, join(dir, 'app.db'));
    const warnings = logLines(second as string).filter((line) => line.level === 40);
    assert.equal(
      warnings.map((line) => line.msg),
      [aheadWarning('users.nickname, users.motto')],
    );
  });
});

ahead('npm run migrate warns on stderr about what no migration made, and never says "up to date" then', async () => {
  const install = await installPetShopWith(
    "import { sqliteTable as labelsTable, integer as labelsInteger } from 'drizzle-orm/sqlite-core';\n" +
      "export const labels = labelsTable('labels', { id: labelsInteger('id').primaryKey() });",
  );
  await withTempDir(async (dir) => {
    const path = join(dir, 'app.db');
    for (let i = 0; i < 2; i++) {
      const { code, output } = await runScript('cli/migrate.js', { DATABASE_PATH: path }, [], install);
      assert.is(code, 0, output);
      assert.ok(
        output.includes(
          'migrate: warning: the schema declares what no migration made (labels): run npm run db:generate, then npm run migrate again',
        ),
        output,
      );
      assert.not.ok(output.includes('up to date'), output);
    }
  });
});

ahead.run();

const writable = suite('a database this process cannot write');

/** An unprivileged user and group for the child (tests run as root here, whom no permission stops). */
const UID = 65534;
const GID = 65534;
const isRoot = process.getuid?.() === 0;

/** Runs a compiled entry point of `install` as UID:GID to its end (or 30 s); one that listens is sent SIGTERM. */
function runAs(install: string, script: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [join(install, 'dist', script)], {
    cwd: install,
    env: { PATH: process.env.PATH, PORT: '0', ...env },
    uid: UID,
    gid: GID,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stopped = false;
  const onData = (chunk: Buffer) => {
    output += chunk;
    if (!stopped && output.includes('restable listening on')) stopped = child.kill('SIGTERM');
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}

/** The refusal for `path`, whose `what` this process cannot write. */
const unwritableLine = (path: string, what: string, folder: string) =>
  `cannot write the database ${path}: ${what} is not writable by this process (uid:gid ${UID}:${GID}); SQLite writes the file and its -wal and -shm files beside it, ` +
  `so make the folder ${folder} and the files in it writable by ${UID}:${GID} (a host folder mounted into a container: chown -R ${UID}:${GID} <the host folder>, ` +
  'or run the container with --user $(id -u):$(id -g), or use a named volume)';

writable('a folder, or a file in it, that the uid cannot write is refused in one line naming the uid:gid and the fixes', async () => {
  if (!isRoot) {
    console.log('  skipped: needs root, to run the service as an unprivileged uid (here uid %d)', process.getuid?.());
    return;
  }
  const install = await installPetShopWith('');
  await withTempDir(async (dir) => {
    // Readable by the child (the install and the database's folders), writable only by root, as a host folder mounted by root.
    chmodSync(install, 0o755);
    chmodSync(dir, 0o755);
    const folder = join(dir, 'data');
    mkdirSync(folder, { mode: 0o755 });
    const path = join(folder, 'app.db');
    const newFile = await runAs(install, 'main.js', { DATABASE_PATH: path });
    assert.is(newFile.code, 1, newFile.output);
    assert.is(newFile.output, `restable: ${unwritableLine(path, `the folder ${folder}`, folder)}\n`);
    const below = join(folder, 'sub', 'app.db');
    const missing = await runAs(install, 'main.js', { DATABASE_PATH: below });
    assert.is(
      missing.output,
      `restable: ${unwritableLine(below, `the folder ${folder} (to make ${join(folder, 'sub')} in)`, join(folder, 'sub'))}\n`,
    );
    const migrate = await runAs(install, 'cli/migrate.js', { DATABASE_PATH: path });
    assert.is(migrate.code, 1, migrate.output);
    assert.is(migrate.output, `migrate: ${unwritableLine(path, `the folder ${folder}`, folder)}\n`);
    // A file root made (migrated, so nothing is pending) in a folder the uid may write: the file is what it cannot write.
    assert.is((await runScript('cli/migrate.js', { DATABASE_PATH: path }, [], install)).code, 0);
    chownSync(folder, UID, GID);
    const file = await runAs(install, 'main.js', { DATABASE_PATH: path });
    assert.is(file.code, 1, file.output);
    assert.is(file.output, `restable: ${unwritableLine(path, `the file ${path}`, folder)}\n`);
    // The same uid starts once it owns the file: nothing else stopped it.
    chownSync(path, UID, GID);
    const owned = await runAs(install, 'main.js', { DATABASE_PATH: path });
    assert.is(owned.code, 0, owned.output);
    assert.match(owned.output, /restable listening on /);
  });
});

writable.run();

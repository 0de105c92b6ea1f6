// start-up.test.ts's adoption and schema-ahead checks on PostgreSQL (DATABASE_URL): a database of someone
// else's tables is refused, DATABASE_ADOPT goes ahead, a schema ahead of its migrations is one warning line.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { redactUrl } from '../../src/engine/postgres/pool.js';
import { readJournal } from '../../src/engine/sqlite/migrate.js';
import {
  createPgDatabase,
  installPetShopWith,
  PET_SHOP_PG_MIGRATIONS,
  request,
  runScript,
  runSql,
  spawnService,
} from '../support/helpers.js';

if (!process.env.TEST_DATABASE_URL)
  throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL)');

/** Tables of another application: a partitioned one (its partitions are not counted), a plain one with a row. */
const FOREIGN = `CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL);
  CREATE TABLE events (at date NOT NULL, what text) PARTITION BY RANGE (at);
  CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
  CREATE TABLE invoices (id integer PRIMARY KEY);
  INSERT INTO customers VALUES (1, 'Ada');`;

const adoption = suite('adopting an existing PostgreSQL database');

adoption('a database of tables the schema does not declare, and none of its migrations, is refused in one line, unchanged', async () => {
  const db = await createPgDatabase();
  try {
    await runSql(db.url, FOREIGN);
    const shown = redactUrl(db.url);
    const line =
      `the PostgreSQL database ${shown} holds 3 table(s) that the schema does not declare (customers, events, invoices) and has applied none of its migrations: ` +
      `refusing to adopt it. To serve its own tables, run npm run introspect -- --url "$DATABASE_URL"; to add the schema's tables beside them anyway, set DATABASE_ADOPT=true`;
    const started = await runScript('main.js', { DATABASE_URL: db.url });
    assert.is(started.code, 1, started.output);
    assert.is(started.output, `restable: ${line}\n`);
    const migrated = await runScript('cli/migrate.js', { DATABASE_URL: db.url });
    assert.is(migrated.code, 1, migrated.output);
    assert.is(migrated.output, `migrate: ${line}\n`);
    const left = await runSql(db.url, "SELECT relname FROM pg_class WHERE relname LIKE 'restable%' OR relname = '__drizzle_migrations'");
    assert.equal(left, []);
  } finally {
    await db.drop();
  }
});

adoption('DATABASE_ADOPT=true serves the schema beside them; adopted, or migrated and added to later, it starts without', async () => {
  const db = await createPgDatabase();
  try {
    await runSql(db.url, FOREIGN);
    const adopted = await spawnService({ DATABASE_URL: db.url, DATABASE_ADOPT: 'true' });
    try {
      assert.is((await request(adopted.url, 'POST', '/users', { body: { name: 'A', email: 'a@example.com' } })).status, 201);
      assert.match(adopted.output(), new RegExp(`"msg":"applied ${readJournal(PET_SHOP_PG_MIGRATIONS).length} migration\\(s\\)"`));
    } finally {
      assert.is(await adopted.stop(), 0);
    }
    await runSql(db.url, 'CREATE TABLE audit_log (id integer PRIMARY KEY)');
    const again = await spawnService({ DATABASE_URL: db.url });
    assert.match(again.output(), /database is up to date/);
    assert.is(await again.stop(), 0);
    assert.equal(await runSql(db.url, 'SELECT name FROM customers'), [{ name: 'Ada' }]);
  } finally {
    await db.drop();
  }
});

adoption.run();

const ahead = suite('a schema ahead of its PostgreSQL migrations');

ahead('a table no migration made: one warning line naming it, never "database is up to date"', async () => {
  const install = await installPetShopWith(
    "import { sqliteTable as labelsTable, integer as labelsInteger } from 'drizzle-orm/sqlite-core';\n" +
      "export const labels = labelsTable('labels', { id: labelsInteger('id').primaryKey() });",
  );
  const db = await createPgDatabase();
  try {
    for (let i = 0; i < 2; i++) {
      const service = await spawnService({ DATABASE_URL: db.url }, install);
      try {
        assert.is((await request(service.url, 'GET', '/readyz')).status, 503);
      } finally {
        assert.is(await service.stop(), 0);
      }
      const lines = service
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{') && !line.includes('"requestId"'))
        .map((line) => JSON.parse(line));
      assert.equal(
        lines.filter((line) => line.level === 40).map((line) => line.msg),
        ['the schema declares what no migration made (labels): run npm run db:generate, then restart; until then /readyz answers 503'],
      );
      assert.not.ok(
        lines.some((line) => line.msg === 'database is up to date'),
        service.output(),
      );
    }
  } finally {
    await db.drop();
  }
});

ahead.run();

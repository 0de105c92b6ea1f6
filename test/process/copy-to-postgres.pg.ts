// `npm run copy-to-postgres`: a SQLite service filled over HTTP, copied into PostgreSQL, then
// served from PostgreSQL answers the same pages, ETags, idempotent replays and cursors; refusals are one line.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPgDatabase, type Process, type Reply, request, runScript, spawnService, withTempDir } from '../support/helpers.js';

if (!process.env.TEST_DATABASE_URL)
  throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL)');

const Copy = suite('copy-to-postgres');

/** The lists compared page by page across the two backends (a related list and a sorted, filtered one among them). */
const LISTS = [
  '/users?limit=7',
  '/pets?limit=7',
  '/orders?limit=7',
  '/users/1/pets?limit=2',
  '/pets?limit=4&sort=-name',
  '/pets?ownerId[null]=true&limit=3',
];

interface Page {
  status: number;
  body: string;
  link: string | null;
}

/** Every page of `path`, following `Link: <…>; rel="next"` until the last page. */
async function pages(base: string, path: string): Promise<Page[]> {
  const seen: Page[] = [];
  let next: string | undefined = path;
  while (next) {
    const reply: Reply = await request(base, 'GET', next);
    seen.push({ status: reply.status, body: reply.text, link: reply.headers.get('link') });
    assert.is(reply.status, 200, `GET ${next}`);
    next = /^<([^>]+)>; rel="next"$/.exec(reply.headers.get('link') ?? '')?.[1];
    assert.ok(seen.length < 100, 'paging ends');
  }
  return seen;
}

/** What a client can observe of the data: every page of every list, and each element's body and ETag. */
async function snapshot(base: string): Promise<Record<string, unknown>> {
  const lists: Record<string, Page[]> = {};
  for (const path of LISTS) lists[path] = await pages(base, path);
  const elements: Record<string, { body: string; etag: string | null }> = {};
  for (const collection of ['users', 'pets', 'orders']) {
    for (const page of lists[`/${collection}?limit=7`] ?? []) {
      for (const { id } of JSON.parse(page.body) as { id: number }[]) {
        const reply = await request(base, 'GET', `/${collection}/${id}`);
        elements[`/${collection}/${id}`] = { body: reply.text, etag: reply.headers.get('etag') };
      }
    }
  }
  return { lists, elements };
}

const json = (body: unknown) => ({ body });

/** Fills a service through its API: users, pets (some without an owner), orders, edits, deletes and an idempotent POST. */
async function fill(base: string) {
  for (let i = 1; i <= 12; i++) {
    const reply = await request(base, 'POST', '/users', json({ name: `User ${i}`, email: `user${i}@example.com` }));
    assert.is(reply.status, 201);
  }
  const species = ['cat', 'dog', 'bird', 'fish', 'other'];
  for (let i = 1; i <= 20; i++) {
    const ownerId = i % 3 === 0 ? null : (i % 5) + 1;
    const reply = await request(
      base,
      'POST',
      '/pets',
      json({ name: `Pet ${String(i).padStart(2, '0')}`, species: species[i % 5], ownerId }),
    );
    assert.is(reply.status, 201);
  }
  for (let i = 1; i <= 9; i++) {
    const reply = await request(
      base,
      'POST',
      '/orders',
      json({ userId: (i % 4) + 1, petId: i, quantity: i, status: i % 2 ? 'placed' : 'approved' }),
    );
    assert.is(reply.status, 201);
  }
  assert.is((await request(base, 'PATCH', '/pets/4', json({ name: 'Renamed' }))).status, 200);
  // The highest key is deleted: PostgreSQL must not hand it out again, as SQLite (AUTOINCREMENT) would not.
  assert.is((await request(base, 'DELETE', '/users/12')).status, 204);
  const idempotent = await request(base, 'POST', '/users', {
    body: { name: 'Once', email: 'once@example.com' },
    headers: { 'idempotency-key': 'copy-test-key-1' },
  });
  assert.is(idempotent.status, 201);
  return idempotent;
}

Copy('copies a SQLite service into PostgreSQL and the PostgreSQL service answers exactly as the SQLite one did', async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, 'app.db');
    const target = await createPgDatabase();
    let sqliteService: Process | undefined = await spawnService({ DATABASE_PATH: file });
    let pgService: Process | undefined;
    try {
      const base = sqliteService.url;
      const idempotent = await fill(base);
      // A cursor handed out by the SQLite service (this also makes the cursor key it keeps in the database).
      const first = await request(base, 'GET', '/pets?limit=5&sort=name');
      const cursorPath = /^<([^>]+)>/.exec(first.headers.get('link') ?? '')?.[1] as string;
      assert.ok(cursorPath?.includes('cursor='), 'the SQLite service gave a cursor');
      const cursorPage = await request(base, 'GET', cursorPath);
      const before = await snapshot(base);
      const users = (before.lists as Record<string, Page[]>)['/users?limit=7'] ?? [];
      const largestKey = Math.max(...users.flatMap((page) => (JSON.parse(page.body) as { id: number }[]).map((user) => user.id)));
      // Where a reader of the SQLite service's feed stands at the move.
      const feed = (await request(base, 'GET', '/_changes?since=0&limit=1000')).body as { seq: number }[];
      const lastSeq = feed.at(-1)?.seq as number;
      assert.ok(lastSeq > 1, 'the writes were recorded');
      assert.is(await sqliteService.stop(), 0);
      sqliteService = undefined;

      const copied = await runScript('cli/copy-to-postgres.js', {}, ['--from', file, '--to', target.url]);
      assert.is(copied.code, 0, copied.output);
      // The count per table: 12 users made, one deleted, one made idempotently.
      assert.match(copied.output, /users\s+12 row\(s\)/);
      assert.match(copied.output, /pets\s+20 row\(s\)/);
      assert.match(copied.output, /orders\s+9 row\(s\)/);
      assert.match(copied.output, /restable_idempotency_keys\s+1 row\(s\)/);
      assert.match(copied.output, /restable_secrets\s+1 row\(s\)/);
      assert.match(copied.output, /copied 43 row\(s\) in 5 table\(s\)/);

      pgService = await spawnService({ DATABASE_URL: target.url });
      const after = await snapshot(pgService.url);
      assert.equal(after, before);

      const again = await request(pgService.url, 'GET', cursorPath);
      assert.is(again.status, 200, 'a cursor minted by the SQLite service pages on PostgreSQL');
      assert.is(again.text, cursorPage.text);

      const retry = await request(pgService.url, 'POST', '/users', {
        body: { name: 'Once', email: 'once@example.com' },
        headers: { 'idempotency-key': 'copy-test-key-1' },
      });
      assert.is(retry.status, 201);
      assert.is(retry.headers.get('idempotent-replayed'), 'true');
      assert.is(retry.text, idempotent.text);
      assert.is(retry.headers.get('etag'), idempotent.headers.get('etag'));

      const created = await request(pgService.url, 'POST', '/users', json({ name: 'New', email: 'new@example.com' }));
      assert.is(created.status, 201);
      // The feed goes on after the file's last change: a reader that was there gets the next one; one from
      // before is a 410 (read afresh: the copied rows are data, not changes).
      assert.match(copied.output, new RegExp(`the change feed goes on after seq ${lastSeq}`));
      const next = (await request(pgService.url, 'GET', `/_changes?since=${lastSeq}`)).body as { seq: number; id: number }[];
      assert.equal(
        next.map((c) => [c.seq, c.id]),
        [[lastSeq + 1, created.body.id]],
      );
      assert.is((await request(pgService.url, 'GET', '/_changes?since=0')).status, 410);
      assert.ok(created.body.id > largestKey, `new key ${created.body.id} is past the largest copied key ${largestKey}`);
      assert.ok(created.body.id > 13, 'keys SQLite handed out before (the deleted user 12, the idempotent 13) are not reused');
    } finally {
      await sqliteService?.stop();
      await pgService?.stop();
      await target.drop();
    }
  });
});

Copy('refuses a target that already holds rows, in one line, and changes nothing', async () => {
  await withTempDir(async (dir) => {
    const file = join(dir, 'app.db');
    const target = await createPgDatabase();
    try {
      const service = await spawnService({ DATABASE_PATH: file });
      assert.is((await request(service.url, 'POST', '/users', json({ name: 'A', email: 'a@example.com' }))).status, 201);
      assert.is(await service.stop(), 0);
      // A service started once on the empty PostgreSQL database (as the README's steps may have it) made its
      // cursor key and the feed's triggers there: the copy still takes it, the file's key replacing that one.
      // It may even have written and deleted an element: its tables are empty again, but its feed holds changes.
      const early = await spawnService({ DATABASE_URL: target.url });
      const made = await request(early.url, 'POST', '/users', json({ name: 'Gone', email: 'gone@example.com' }));
      assert.is((await request(early.url, 'DELETE', made.headers.get('location') as string)).status, 204);
      assert.is((await request(early.url, 'GET', '/_changes?since=0')).body.length, 2, 'read: numbered into the feed');
      assert.is(await early.stop(), 0);
      const first = await runScript('cli/copy-to-postgres.js', {}, ['--from', file, '--to', target.url]);
      assert.is(first.code, 0, first.output);
      // The feed is the file's (its newest change first): the changes made there before are gone.
      const served = await spawnService({ DATABASE_URL: target.url });
      const feed = await request(served.url, 'GET', '/_changes?since=0');
      assert.is(await served.stop(), 0);
      assert.is(feed.status, 200, feed.text);
      assert.equal(
        feed.body.map((change: { seq: number; op: string; element?: { name: string } }) => [change.seq, change.op, change.element?.name]),
        [[1, 'create', 'A']],
      );
      const second = await runScript('cli/copy-to-postgres.js', {}, ['--from', file, '--to', target.url]);
      assert.is(second.code, 1);
      const errors = second.output.split('\n').filter((line) => line.startsWith('copy-to-postgres:'));
      assert.is(errors.length, 1, second.output);
      assert.match(errors[0] as string, /already holds rows \(in users\)/, second.output);
      assert.not.match(second.output, /\bat \S+:\d+/, 'no stack trace');
    } finally {
      await target.drop();
    }
  });
});

Copy('refuses a SQLite file that is not migrated, and a missing one, in one line', async () => {
  await withTempDir(async (dir) => {
    const target = await createPgDatabase();
    try {
      const blank = join(dir, 'blank.db');
      new Database(blank).close();
      const unmigrated = await runScript('cli/copy-to-postgres.js', {}, ['--from', blank, '--to', target.url]);
      assert.is(unmigrated.code, 1);
      assert.match(
        unmigrated.output,
        /^copy-to-postgres: .*blank\.db has \d+ pending migration\(s\); run `DATABASE_PATH=.* npm run migrate` first\n$/,
      );
      const missing = await runScript('cli/copy-to-postgres.js', {}, ['--from', join(dir, 'none.db'), '--to', target.url]);
      assert.is(missing.code, 1);
      assert.match(missing.output, /^copy-to-postgres: cannot open the SQLite database .*none\.db: .*\n$/);
      const junk = join(dir, 'junk.db');
      writeFileSync(junk, 'not a database, but long enough to be taken for one at first sight'.repeat(100));
      const notSqlite = await runScript('cli/copy-to-postgres.js', {}, ['--from', junk, '--to', target.url]);
      assert.is(notSqlite.code, 1);
      assert.match(notSqlite.output, /^copy-to-postgres: cannot read the SQLite database .*junk\.db: file is not a database\n$/);
      const usage = await runScript('cli/copy-to-postgres.js', {}, ['--from', blank]);
      assert.is(usage.code, 1);
      assert.match(usage.output, /^copy-to-postgres: usage: /);
    } finally {
      await target.drop();
    }
  });
});

Copy.run();

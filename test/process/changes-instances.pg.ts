// The change feed (docs/changes.md) across two instances on one PostgreSQL database: long
// transactions (bulk arrays of 500, batches of 100 operations) beside single writes, so that
// transactions commit in another order than they wrote, while readers on both instances walk the
// feed: each sees every change once, in seq order, seqs without a gap, as acknowledged, and both
// instances serve the same feed; event streams carry what the other instance wrote and resume there.
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  assertEventsWellFormed,
  assertFeedMatchesData,
  type Change,
  compareWithLedger,
  contiguityBreaks,
  dataOf,
  followWithResumes,
  keyOf,
  type Ledger,
  newestOf,
  openStream,
  readFeed,
  recorded,
  startReader,
  startWriteLoad,
  until,
} from '../support/changes.js';
import { createPgDatabase, type Process, request, spawnService } from '../support/helpers.js';

if (!process.env.TEST_DATABASE_URL)
  throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL)');

interface Pair {
  a: Process;
  b: Process;
  drop: () => Promise<void>;
}

const instances = suite<{ pair?: Pair }>('change feed: two instances on one PostgreSQL database');

instances.before(async (context) => {
  const database = await createPgDatabase();
  // Batches of 100 operations wait for each other (one advisory lock): give them time rather than a 422.
  const env = { DATABASE_URL: database.url, BATCH_TIMEOUT_MS: '60000', PG_CONNECT_TIMEOUT_MS: '20000' };
  // Started together: both migrate and set up the feed's tables and triggers at once.
  const started = await Promise.allSettled([spawnService(env), spawnService(env)]);
  const processes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) {
    await Promise.all(processes.map((p) => p.stop()));
    await database.drop();
    throw failed.reason;
  }
  context.pair = { a: processes[0] as Process, b: processes[1] as Process, drop: database.drop };
});

instances.after(async ({ pair }) => {
  if (!pair) return;
  await Promise.all([pair.a.stop(), pair.b.stop()]);
  await pair.drop();
});

/**
 * How many changes carry an earlier time than one before them in seq order: each is a change of a
 * transaction that wrote before another one but committed after it (`at` is when it was written).
 */
function committedOutOfOrder(feed: Change[]): number {
  let latest = '';
  let count = 0;
  for (const change of feed) {
    if (change.at < latest) count++;
    else latest = change.at;
  }
  return count;
}

instances(
  'long and short transactions through both instances, readers on both: every change once, in seq order, as acknowledged',
  async (context) => {
    const { a, b } = context.pair as Pair;
    const start = await newestOf(a.url);
    const readers = [
      startReader(a.url, { limit: 10, since: start }),
      startReader(b.url, { limit: 100, since: start }),
      startReader(a.url, { limit: 1000, since: start }),
      startReader(b.url, { limit: 1000, since: start }),
      startReader(b.url, { limit: 200, kinds: 'users', since: start }),
    ];
    // Three writers send only arrays of 500 and batches of 100 operations (some of which fail and roll
    // back), eight others single writes, small arrays and batches, each writer's writes through a and b in turn.
    const load = startWriteLoad({
      targets: [a.url, b.url],
      label: 'pg',
      writers: 11,
      heavy: 3,
      writes: 50,
      heavyWrites: 6,
      heavyBulk: 500,
      heavyBatch: 100,
      bulkMax: 20,
      batchMax: 10,
      refusals: true,
    });
    const ledger = await load.done;
    assert.equal(ledger.unexpected, [], 'every write answered as planned');
    assert.ok(ledger.acknowledged >= 250, `${ledger.acknowledged} writes acknowledged`);

    const feed = await readFeed(a.url, start);
    assert.equal(
      contiguityBreaks(
        feed.map((c) => c.seq),
        start + 1,
      ),
      [],
      'seqs follow one another from the first',
    );
    assert.equal((await readFeed(b.url, start)).map(recorded), feed.map(recorded), 'both instances serve the same feed');
    assert.ok(committedOutOfOrder(feed) > 0, 'some transactions committed in another order than they wrote (else this test proves little)');
    const newest = (feed.at(-1) as Change).seq;
    const users = feed.filter((c) => c.kind === 'users');
    await Promise.all(readers.map((reader, i) => reader.finish(i === 4 ? (users.at(-1) as Change).seq : newest)));
    readers.forEach((reader, i) => {
      assert.equal(reader.problems, [], `reader ${i}: its pages`);
      assert.ok(reader.pages > 5, `reader ${i} walked the feed during the load (${reader.pages} pages)`);
      assert.equal(reader.changes.map(recorded), (i === 4 ? users : feed).map(recorded), `reader ${i} saw each change once, in seq order`);
    });

    const rows = await dataOf(b.url);
    assert.equal(compareWithLedger(feed, ledger, rows), [], 'per element, the feed holds the acknowledged writes in their order');
    assert.is(feed.length, ledger.changes, 'as many changes as the acknowledged writes made');
    assertFeedMatchesData(await readFeed(a.url), rows);
  },
);

instances('an event stream on one instance carries what the other instance writes', async (context) => {
  const { a, b } = context.pair as Pair;
  for (const [reader, writer] of [
    [b, a],
    [a, b],
  ] as const) {
    const stream = await openStream(reader.url, '/_changes');
    try {
      assert.is(stream.status, 200, stream.text);
      const made = await request(writer.url, 'POST', '/pets', { body: { name: `Across ${Date.now()}`, species: 'fish' } });
      assert.is(made.status, 201, made.text);
      await until('the change made through the other instance', () => stream.events.some((e) => e.data.id === made.body.id));
      assert.equal(
        stream.events.map((e) => `${e.event} ${keyOf(e.data.kind, e.data.id)}`),
        [`create pets/${made.body.id}`],
      );
      assert.equal(stream.events[0]?.data.element, made.body);
      assertEventsWellFormed(stream);
    } finally {
      stream.close();
    }
  }
});

instances('a stream resumed with Last-Event-ID on the other instance continues after that id: no gap, no duplicate', async (context) => {
  const { a, b } = context.pair as Pair;
  const start = await newestOf(a.url);
  let stop = false;
  const load = startWriteLoad({
    targets: [a.url, b.url],
    label: 'pg-resume',
    writers: 4,
    heavy: 1,
    writes: 100_000,
    heavyBulk: 200,
    heavyBatch: 40,
    bulkMax: 10,
    batchMax: 8,
    stop: () => stop,
  });
  let ledger: Ledger | undefined;
  const received = await followWithResumes([a.url, b.url], start, 8, async () => {
    stop = true;
    ledger = await load.done;
    return newestOf(b.url);
  }).finally(() => {
    stop = true;
  });
  await load.done;
  const feed = await readFeed(a.url, start);
  assert.equal(ledger?.unexpected, []);
  assert.equal(
    contiguityBreaks(
      received.map((e) => e.data.seq),
      start + 1,
    ),
    [],
    'the events received, stream after stream',
  );
  assert.equal(
    received.map((e) => recorded(e.data)),
    feed.map(recorded),
    'the events are the feed',
  );
  assert.equal(compareWithLedger(feed, ledger as Ledger, await dataOf(b.url)), []);
});

instances.run();

const upgrade = suite('change feed: a database set up by an earlier version');

upgrade('a pending table with the primary key of earlier versions loses it at start, and changes still flow', async () => {
  const database = await createPgDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  let service: Process | undefined;
  try {
    await client.query(
      'CREATE TABLE restable_changes_pending (local bigserial PRIMARY KEY, kind text NOT NULL, key jsonb NOT NULL, op text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())',
    );
    service = await spawnService({ DATABASE_URL: database.url });
    const { rows } = await client.query("SELECT conname FROM pg_constraint WHERE conrelid = 'restable_changes_pending'::regclass");
    assert.equal(rows, [], 'no constraint (and so no index) is left on the pending table');
    const created = await request(service.url, 'POST', '/users', { body: { name: 'Ada', email: 'ada@example.com' } });
    assert.is(created.status, 201);
    const feed = await readFeed(service.url);
    assert.equal(
      feed.map((c) => [c.op, c.kind, c.id]),
      [['create', 'users', (created.body as { id: number }).id]],
    );
  } finally {
    await service?.stop();
    await client.end();
    await database.drop();
  }
});

upgrade.run();

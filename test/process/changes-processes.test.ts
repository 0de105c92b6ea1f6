// The change feed (docs/changes.md) across processes on one SQLite file: concurrent writers on
// two processes while readers on both walk the feed (every change once, in seq order, as acknowledged);
// event streams that carry what the other process (or the other worker of WORKERS=2) wrote and resume
// with Last-Event-ID without a gap; and SIGKILL of a process under write load (the feed and the data
// agree afterwards). Every service is the compiled entry point (`npm run build` first).
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  assertEventsWellFormed,
  assertFeedMatchesData,
  type Change,
  compareWithLedger,
  contiguityBreaks,
  dataOf,
  type EventStream,
  followWithResumes,
  keyOf,
  type Ledger,
  newestOf,
  openStream,
  readFeed,
  recorded,
  requestAlone,
  startReader,
  startWriteLoad,
  until,
} from '../support/changes.js';
import { type Process, request, spawnService, tempDir } from '../support/helpers.js';

// --- two processes on one file ----------------------------------------------------------------------

interface Pair {
  temp: ReturnType<typeof tempDir>;
  a: Process;
  b: Process;
}

const pair = suite<{ pair?: Pair }>('change feed: two processes on one SQLite file');

pair.before(async (context) => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'app.db') };
  // Started together: both migrate and install the feed's triggers on one new file at once.
  const started = await Promise.allSettled([spawnService(env), spawnService(env)]);
  const processes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) {
    await Promise.all(processes.map((p) => p.stop()));
    temp.remove();
    throw failed.reason;
  }
  context.pair = { temp, a: processes[0] as Process, b: processes[1] as Process };
});

pair.after(async ({ pair }) => {
  if (!pair) return;
  await Promise.all([pair.a.stop(), pair.b.stop()]);
  pair.temp.remove();
});

pair('concurrent writers on both processes, readers walking both: every change once, in seq order, as acknowledged', async (context) => {
  const { a, b } = context.pair as Pair;
  const start = await newestOf(a.url);
  const readers = [
    startReader(a.url, { limit: 7, since: start }),
    startReader(b.url, { limit: 100, since: start }),
    startReader(a.url, { limit: 1000, since: start }),
    startReader(b.url, { limit: 50, kinds: 'pets,orders', since: start }),
  ];
  // Each writer's n-th write goes to a or b in turn, so one element's writes pass through both processes.
  const load = startWriteLoad({ targets: [a.url, b.url], label: 'mix', writers: 8, writes: 50, bulkMax: 25, batchMax: 12, refusals: true });
  const ledger = await load.done;
  assert.equal(ledger.unexpected, [], 'every write answered as planned');
  assert.ok(ledger.acknowledged >= 250, `${ledger.acknowledged} writes acknowledged`);
  assert.ok(ledger.refused > 0, 'some writes were refused and rolled back');

  const feed = await readFeed(a.url, start);
  assert.equal(
    contiguityBreaks(
      feed.map((c) => c.seq),
      start + 1,
    ),
    [],
    'seqs follow one another from the first',
  );
  assert.equal((await readFeed(b.url, start)).map(recorded), feed.map(recorded), 'both processes serve the same feed');
  const newest = (feed.at(-1) as Change).seq;
  const filtered = feed.filter((c) => c.kind === 'pets' || c.kind === 'orders');
  await Promise.all(readers.map((reader, i) => reader.finish(i === 3 ? ((filtered.at(-1) as Change).seq ?? 0) : newest)));
  readers.forEach((reader, i) => {
    assert.equal(reader.problems, [], `reader ${i}: its pages`);
    assert.ok(reader.pages > 5, `reader ${i} walked the feed during the load (${reader.pages} pages)`);
    const want = i === 3 ? filtered : feed;
    assert.equal(reader.changes.map(recorded), want.map(recorded), `reader ${i} saw each change once, in seq order`);
  });

  const rows = await dataOf(b.url);
  assert.equal(compareWithLedger(feed, ledger, rows), [], 'per element, the feed holds the acknowledged writes in their order');
  assert.is(feed.length, ledger.changes, 'as many changes as the acknowledged writes made');
  // The feed read from the first change matches the data (this test's and what other tests left).
  assertFeedMatchesData(await readFeed(a.url), rows);
});

pair('an event stream on one process carries what the other process writes, as it commits', async (context) => {
  const { a, b } = context.pair as Pair;
  for (const [reader, writer] of [
    [b, a],
    [a, b],
  ] as const) {
    const stream = await openStream(reader.url, '/_changes');
    try {
      assert.is(stream.status, 200, stream.text);
      const made = await request(writer.url, 'POST', '/users', {
        body: { name: 'Across', email: `across-${Date.now()}-${Math.random()}@feed.test` },
      });
      assert.is(made.status, 201, made.text);
      await until('the change made through the other process', () =>
        stream.events.some((e) => e.data.kind === 'users' && e.data.id === made.body.id),
      );
      const event = stream.events.find((e) => e.data.id === made.body.id) as EventStream['events'][number];
      assert.is(event.event, 'create');
      assert.equal(event.data.element, made.body, 'the element as created');
      // Nothing but what was made after the stream opened.
      assert.equal(
        stream.events.map((e) => `${e.data.op} ${keyOf(e.data.kind, e.data.id)}`),
        [`create users/${made.body.id}`],
      );
      assertEventsWellFormed(stream);
    } finally {
      stream.close();
    }
  }
});

pair('a stream resumed with Last-Event-ID, on either process, continues after that id: no gap, no duplicate', async (context) => {
  const { a, b } = context.pair as Pair;
  const start = await newestOf(a.url);
  let stop = false;
  const load = startWriteLoad({
    targets: [a.url, b.url],
    label: 'resume',
    writers: 3,
    writes: 100_000,
    bulkMax: 8,
    batchMax: 6,
    stop: () => stop,
  });
  let ledger: Ledger | undefined;
  const received = await followWithResumes([a.url, b.url], start, 8, async () => {
    stop = true;
    ledger = await load.done;
    return newestOf(a.url);
  }).finally(() => {
    stop = true;
  });
  await load.done;
  const feed = await readFeed(b.url, start);
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
  assert.equal(compareWithLedger(feed, ledger as Ledger, await dataOf(a.url)), []);
});

// --- WORKERS=2 on one port --------------------------------------------------------------------------

const workers = suite<{ temp?: ReturnType<typeof tempDir>; service?: Process }>('change feed: WORKERS=2');

workers.before(async (context) => {
  context.temp = tempDir();
  const service = await spawnService({ DATABASE_PATH: join(context.temp.dir, 'app.db'), WORKERS: '2' });
  context.service = service;
  // spawnService returns once the first worker listens: wait for the second too.
  await until('both workers to listen', () => service.output().match(/listening on/g)?.length === 2);
});

workers.after(async ({ temp, service }) => {
  await service?.stop();
  temp?.remove();
});

/** The worker (1 or 2) that answered the request with this X-Request-Id, from the service's log line of it. */
async function servedBy(service: Process, requestId: string | null | undefined): Promise<number> {
  let worker: number | undefined;
  await until(`the log line of request ${requestId}`, () => {
    for (const line of service.output().split('\n')) {
      if (!line.includes(`"requestId":"${requestId}"`)) continue;
      worker = JSON.parse(line).worker;
      return true;
    }
    return false;
  });
  return worker as number;
}

workers('a stream on one worker carries the writes of both; resumed on either, it continues with no gap', async ({ service }) => {
  const { url } = service as Process;
  const writers = new Set<number>();
  const ids: number[] = [];
  // Every request on a connection of its own: the cluster hands each new connection to the next worker.
  const write = async () => {
    const reply = await requestAlone(url, 'POST', '/users', {
      name: `Worker ${ids.length}`,
      email: `worker-${ids.length}-${Math.random()}@feed.test`,
    });
    assert.is(reply.status, 201, reply.text);
    ids.push(reply.body.id as number);
    writers.add(await servedBy(service as Process, reply.headers.get('x-request-id')));
  };
  const summary = (events: EventStream['events']) => events.map((e) => `${e.data.op} ${keyOf(e.data.kind, e.data.id)}`);
  const stream = await openStream(url, '/_changes');
  try {
    assert.is(stream.status, 200, stream.text);
    // Writes until both workers have made some: whichever holds the stream, the other one wrote too.
    while (writers.size < 2 && ids.length < 50) await write();
    assert.is(writers.size, 2, 'writes reached both workers');
    await until('every write, from both workers', () => stream.events.length >= ids.length);
    assert.equal(
      summary(stream.events),
      ids.map((id) => `create users/${id}`),
    );
    assertEventsWellFormed(stream);
  } finally {
    stream.close();
  }
  // Resumed streams land on either worker (the number of connections between them varies, and the
  // cluster hands connections out in turn); writes land while no stream is open and while one is.
  const start = Number(stream.lastId());
  const received: EventStream['events'] = [];
  let last = String(start);
  ids.length = 0;
  writers.clear();
  for (let round = 0; round < 8; round++) {
    for (let i = 0; i <= round % 3; i++) await write();
    const resumed = await openStream(url, '/_changes', { 'last-event-id': last });
    assert.is(resumed.status, 200, resumed.text);
    await write();
    await until(`round ${round}: the writes so far`, () => received.length + resumed.events.length >= ids.length);
    resumed.close();
    assertEventsWellFormed(resumed);
    received.push(...resumed.events);
    last = resumed.lastId() ?? last;
  }
  assert.is(writers.size, 2, 'writes reached both workers');
  assert.equal(
    contiguityBreaks(
      received.map((e) => e.data.seq),
      start + 1,
    ),
    [],
  );
  assert.equal(
    summary(received),
    ids.map((id) => `create users/${id}`),
  );
  assert.equal(
    received.map((e) => recorded(e.data)),
    (await readFeed(url, start)).map(recorded),
  );
});

// --- SIGKILL under write load -----------------------------------------------------------------------

const kill = suite('change feed: SIGKILL of a process under write load');

kill('after a kill -9 mid-load (twice), the feed and the data agree, and every acknowledged write is in the feed', async () => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'app.db') };
  const processes: Process[] = [];
  const spawn = async () => {
    const started = await spawnService(env);
    processes.push(started);
    return started;
  };
  try {
    // A process beside the victims: it reads the feed during the load and lives through the kills.
    const survivor = await spawn();
    const reader = startReader(survivor.url, { limit: 100, since: 0 });
    const ledgers: Ledger[] = [];
    for (let round = 0; round < 2; round++) {
      const victim = await spawn();
      let killed = false;
      // No orders: an unanswered create must be told in the data by its name.
      const load = startWriteLoad({
        targets: [victim.url],
        label: `kill${round}`,
        writers: 8,
        writes: 100_000,
        bulkMax: 20,
        batchMax: 10,
        orders: false,
        refusals: true,
        expectNetworkErrors: true,
        stop: () => killed,
      });
      const before = 150 + Math.floor(Math.random() * 150);
      await until('writes acknowledged before the kill', () => load.ledger.acknowledged >= before);
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed = true;
      ledgers.push(await load.done);
    }
    const ledger: Ledger = {
      acked: new Map(ledgers.flatMap((l) => [...l.acked])),
      unknown: ledgers.flatMap((l) => l.unknown),
      unexpected: ledgers.flatMap((l) => l.unexpected),
      acknowledged: ledgers.reduce((sum, l) => sum + l.acknowledged, 0),
      refused: ledgers.reduce((sum, l) => sum + l.refused, 0),
      changes: ledgers.reduce((sum, l) => sum + l.changes, 0),
    };
    assert.equal(ledger.unexpected, [], 'every answer before the kill was the planned one');
    assert.is(
      ledger.acked.size,
      ledgers.reduce((sum, l) => sum + l.acked.size, 0),
      'the rounds wrote different elements',
    );
    // Each writer was cut off by the kill: its last write got no answer (in flight, or refused connection).
    assert.is(ledger.unknown.length, 2 * 8, 'every writer had a write unanswered');

    // A service started afresh on the file after the kills.
    const restarted = await spawn();
    const feed = await readFeed(restarted.url);
    assert.equal(contiguityBreaks(feed.map((c) => c.seq)), [], 'seqs follow one another from 1');
    assert.equal((await readFeed(survivor.url)).map(recorded), feed.map(recorded), 'the survivor serves the same feed');
    await reader.finish((feed.at(-1) as Change).seq);
    assert.equal(reader.problems, []);
    assert.equal(reader.changes.map(recorded), feed.map(recorded), 'the reader during the kills saw each change once, in order');

    const rows = await dataOf(restarted.url);
    // Users and pets that have a create and no later delete are exactly the rows: no change of a write that did not commit.
    assertFeedMatchesData(feed, rows);
    // Every acknowledged write in the feed, element by element in its order; an unanswered one all or not at all.
    assert.equal(compareWithLedger(feed, ledger, rows), []);
    // Whatever committed of the unanswered writes is whole: the data has all of an unanswered bulk create or none of it.
    for (const { what, effects } of ledger.unknown) {
      const names = effects.filter((e) => e.op === 'create' && e.name).map((e) => e.name as string);
      const kinds = new Map(effects.map((e) => [e.name, e.kind]));
      const present = names.filter((name) => [...(rows.get(kinds.get(name) as string)?.values() ?? [])].some((row) => row.name === name));
      assert.ok(present.length === 0 || present.length === names.length, `unanswered ${what}: ${present.length} of ${names.length} rows`);
    }
  } finally {
    await Promise.all(processes.map((p) => p.stop()));
    temp.remove();
  }
});

pair.run();
workers.run();
kill.run();

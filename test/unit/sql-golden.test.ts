// Golden SQL of the SQLite store: the statements each store operation runs, recorded at the driver, must equal
// test/unit/golden/sqlite.sql exactly (a safety net for refactors of the stores); `UPDATE_GOLDEN=1` rewrites that file.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Check, Created } from '../../src/engine/store.js';
import { ApiError } from '../../src/errors.js';
import { jsonResponse } from '../../src/http/messages.js';
import type { RawQuery } from '../../src/request/list-query.js';
import { type Row, toCreateRow, toCreateRows, toPatchedRow, toReplacementRow } from '../../src/request/validation.js';
import { type Engine, openSqliteEngine } from '../support/engine.js';

const GOLDEN = join(dirname(fileURLToPath(import.meta.url)), 'golden', 'sqlite.sql');
const GOLDEN_NAME = 'test/unit/golden/sqlite.sql';

/** What the HTTP layer answers a create with (as store.case.ts's respond). */
const respond = (created: Row | Row[]) => jsonResponse(201, created);
const anyRow: Check = () => undefined;

/** The statements' methods that run them: each records its SQL text as it runs. */
const RUNNERS = ['run', 'get', 'all', 'iterate'] as const;

/**
 * Records the SQL of the statements `sqlite` prepares into `sink()` (when it answers a set): `prepare` is wrapped
 * so that each statement it makes records its text each time it runs. A statement the store prepared and cached
 * during an earlier operation (or prepared beside another it needed) thus counts for every operation that runs
 * it, and only those: an operation's record does not depend on what ran before it, nor on the store's caching.
 */
function recordStatements(sqlite: Database.Database, sink: () => Set<string> | undefined): void {
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((source: string) => {
    const statement = prepare(source);
    for (const name of RUNNERS) {
      const original = statement[name] as (...args: unknown[]) => unknown;
      Object.defineProperty(statement, name, {
        value(this: Database.Statement, ...args: unknown[]) {
          sink()?.add(this.source);
          return original.apply(this, args);
        },
      });
    }
    return statement;
  }) as Database.Database['prepare'];
}

/** One statement on one line (the store's statements have none of their own, but the file's format depends on it). */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ').trim();

/** An operation's name and the distinct statements it ran, in the order first run. */
type Section = { name: string; statements: string[] };

function format(sections: Section[]): string {
  return sections.map((s) => [`-- ${s.name}`, ...s.statements, ''].join('\n')).join('\n');
}

function parse(text: string): Section[] {
  const sections: Section[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('-- ')) sections.push({ name: line.slice(3), statements: [] });
    else if (line.trim() !== '') {
      const last = sections.at(-1);
      if (!last) throw new Error(`${GOLDEN}: a statement before the first "-- <operation>" line: ${line}`);
      last.statements.push(line);
    }
  }
  return sections;
}

/** The first operation whose statements differ between the golden file and this run, described; undefined when none. */
function firstDifference(expected: Section[], actual: Section[]): string | undefined {
  for (let i = 0; i < Math.max(expected.length, actual.length); i++) {
    const want = expected[i];
    const got = actual[i];
    if (want && got && want.name === got.name && want.statements.join('\n') === got.statements.join('\n')) continue;
    const show = (s: Section | undefined) => (s ? [`-- ${s.name}`, ...s.statements.map((t) => `   ${t}`)].join('\n') : '(none)');
    return [
      `operation ${i + 1} differs from ${GOLDEN_NAME} (run with UPDATE_GOLDEN=1 to rewrite it if the change is meant):`,
      'expected:',
      show(want),
      'actual:',
      show(got),
    ].join('\n');
  }
  return undefined;
}

/** Two owners, six pets (two without an owner), a pet tag: written before any operation is recorded. */
async function seed(engine: Engine): Promise<void> {
  await engine.kind('users').create(
    toCreateRows(engine.resource('users'), [
      { name: 'Ada Lovelace', email: 'ada@example.com' },
      { name: 'Grace Hopper', email: 'grace@example.com' },
      { name: 'Alan Turing', email: 'alan@example.com' },
    ]),
    respond,
  );
  await engine.kind('pets').create(
    toCreateRows(engine.resource('pets'), [
      { name: 'Rex', species: 'dog', ownerId: 1 },
      { name: 'Tom', species: 'cat', ownerId: 1 },
      { name: 'tweety', species: 'bird', ownerId: 2 },
      { name: 'Nemo', species: 'fish', ownerId: null },
      { name: 'Felix', species: 'cat' },
      { name: 'Rexy', species: 'dog', ownerId: 2 },
    ]),
    respond,
  );
  await engine.kind('pet_tags').create(toCreateRow(engine.resource('pet_tags'), { petId: 1, label: 'good' }), respond);
  await engine
    .kind('orders')
    .create(toCreateRow(engine.resource('orders'), { userId: 2, petId: 3, status: 'approved', quantity: 2 }), respond);
}

/** Runs `work`, which the store must refuse with an ApiError of `code`. */
async function refused(code: string, work: () => unknown): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof ApiError && error.code === code) return;
    throw error;
  }
  assert.unreachable(`expected the store to refuse with ${code}`);
}

/** An operation: its name (its section of the golden file), what it does, and what to do before it, unrecorded. */
type Operation = [name: string, run: () => unknown, setup?: () => unknown];

/** The operations recorded, in order. */
function operations(engine: Engine): Operation[] {
  const list = (kind: string, raw: RawQuery) => engine.kind(kind).list(engine.query(kind, raw));
  const filter = (raw: RawQuery): Operation => [
    `list pets ${Object.entries(raw)
      .map(([name, value]) => `${name}=${value}`)
      .join('&')}`,
    () => list('pets', raw),
  ];
  const users = engine.resource('users');
  /** The cursor to the second page of pets by species,-name in twos, read by a setup (not recorded). */
  let cursor: string | undefined;
  const readCursor = async () => {
    const first = engine.query('pets', { sort: 'species,-name', limit: '2' });
    cursor = engine.cursorAfter(first, await engine.kind('pets').list(first));
    assert.ok(cursor, 'a first page of 2 of the pets has a next page');
  };
  return [
    ['get users 1', () => engine.kind('users').get(1)],
    ['get pet_tags [1, good] (composite key)', () => engine.kind('pet_tags').get([1, 'good'])],
    ['exists users 1', () => engine.kind('users').exists(1)],
    ['create users (one)', () => engine.kind('users').create(toCreateRow(users, { name: 'Edsger', email: 'edsger@example.com' }), respond)],
    [
      'create pets (bulk of 2)',
      () =>
        engine.kind('pets').create(
          toCreateRows(engine.resource('pets'), [
            { name: 'Polly', species: 'bird', ownerId: 3 },
            { name: 'Goldie', species: 'fish' },
          ]),
          respond,
        ),
    ],
    ['update users 1 (merge)', () => engine.kind('users').update(1, (current) => toPatchedRow(users, { name: 'Ada L.' }, current))],
    ['remove pets 8', () => engine.kind('pets').remove(8, anyRow)],
    [
      'update orders 1 (replace: the fields left out take their defaults)',
      () => engine.kind('orders').update(1, (current) => toReplacementRow(engine.resource('orders'), { userId: 2, petId: 3 }, current)),
    ],
    ['remove users 3 (its pets set to no owner)', () => engine.kind('users').remove(3, anyRow)],
    [
      'create users with a taken email (refused: conflict)',
      () =>
        refused('conflict', () => engine.kind('users').create(toCreateRow(users, { name: 'Ada 2', email: 'ada@example.com' }), respond)),
    ],
    [
      'create pets with a missing owner (refused: unprocessable)',
      () =>
        refused('unprocessable', () =>
          engine.kind('pets').create(toCreateRow(engine.resource('pets'), { name: 'Stray', species: 'cat', ownerId: 99 }), respond),
        ),
    ],
    [
      'remove users 2 still referenced by an order (refused: conflict)',
      () => refused('conflict', () => engine.kind('users').remove(2, anyRow)),
    ],
    ['list pets first page limit=2', () => list('pets', { limit: '2' })],
    filter({ species: 'cat' }),
    filter({ 'species[ne]': 'cat' }),
    filter({ 'id[gt]': '2' }),
    filter({ 'species[in]': 'bird,fish' }),
    filter({ 'name[contains]': 'ex' }),
    filter({ 'name[startsWith]': 'Re' }),
    filter({ 'ownerId[null]': 'true' }),
    filter({ species: 'dog', 'ownerId[ne]': '1', 'name[startsWith]': 'R' }),
    ['list pets sort=species,-name', () => list('pets', { sort: 'species,-name' })],
    [
      'list pets sort=species,-name limit=2, second page by cursor',
      () => list('pets', { sort: 'species,-name', limit: '2', cursor }),
      readCursor,
    ],
    ['list pets count=true species=cat limit=1', () => list('pets', { count: 'true', species: 'cat', limit: '1' })],
    [
      'list pets under users 1 (related list)',
      () => {
        const scope = engine.scope('users', 'ownerId', 1);
        return engine.kind('pets').list(engine.query('pets', {}, scope), scope);
      },
    ],
    [
      'list pet_tags under pets 1 (related list of a composite key)',
      () => {
        const scope = engine.scope('pets', 'petId', 1);
        return engine.kind('pet_tags').list(engine.query('pet_tags', {}, scope), scope);
      },
    ],
    ['withKeys users [2, 1, 99] (expand to-one)', () => engine.kind('users').withKeys([2, 1, 99])],
    ['withParents pets ownerId [2, 1, 3] cap 1 (expand to-many)', () => engine.kind('pets').withParents('ownerId', [2, 1, 3], 1)],
    ['list users q=ada (search)', () => list('users', { q: 'ada' })],
    ['list users q=ad name[startsWith]=Ad (search with a filter)', () => list('users', { q: 'ad', 'name[startsWith]': 'Ad' })],
    ['list users q=a sort=relevance count=true (search by rank)', () => list('users', { q: 'a', sort: 'relevance', count: 'true' })],
    [
      'create users with an Idempotency-Key',
      () =>
        engine
          .kind('users')
          .create(toCreateRow(users, { name: 'Alan K.', email: 'alank@example.com' }), respond, { key: 'k1', fingerprint: 'f1' }),
    ],
    [
      'create users with the same Idempotency-Key again (replayed)',
      async () => {
        const again = await engine
          .kind('users')
          .create(toCreateRow(users, { name: 'Alan K.', email: 'alank@example.com' }), respond, { key: 'k1', fingerprint: 'f1' });
        assert.is(again.replayed, true);
      },
    ],
    [
      'batch: create users with an Idempotency-Key',
      () =>
        engine.store.batch(
          (tx) => {
            const made = tx.of(users).create(toCreateRow(users, { name: 'Barbara', email: 'barbara@example.com' }), respond);
            if (made instanceof Promise) throw new Error('a batch on SQLite answers synchronously');
            return (made as Created).response;
          },
          { key: 'k2', fingerprint: 'f2' },
        ),
    ],
    ['purge expired Idempotency-Keys', () => engine.store.purgeExpiredKeys(500)],
  ];
}

/** Runs every operation on a fresh SQLite store: the distinct statements each one ran. */
async function record(): Promise<Section[]> {
  let current: Set<string> | undefined;
  const engine = await openSqliteEngine({ instrument: (driver) => recordStatements(driver as Database.Database, () => current) });
  try {
    await seed(engine);
    const sections: Section[] = [];
    for (const [name, run, setup] of operations(engine)) {
      await setup?.();
      current = new Set();
      try {
        await run();
      } finally {
        sections.push({ name, statements: [...current].map(oneLine) });
        current = undefined;
      }
    }
    return sections;
  } finally {
    await engine.close();
  }
}

const test = suite('golden SQL of the SQLite store');

test('each operation runs exactly the statements of test/unit/golden/sqlite.sql', async () => {
  const actual = await record();
  assert.ok(
    actual.every((s) => s.statements.length > 0),
    `an operation ran no statement: ${actual.filter((s) => s.statements.length === 0).map((s) => s.name)}`,
  );
  if (process.env.UPDATE_GOLDEN === '1') {
    writeFileSync(GOLDEN, format(actual));
    return;
  }
  const text = readFileSync(GOLDEN, 'utf8');
  const difference = firstDifference(parse(text), actual);
  if (difference) assert.unreachable(difference);
  // The same statements, and the same text too (no stray blank line or trailing space).
  assert.is(text, format(actual), `${GOLDEN_NAME} is laid out otherwise than UPDATE_GOLDEN=1 writes it`);
});

test('the statements are the same on a second run (nothing nondeterministic enters the text)', async () => {
  assert.equal(format(await record()), format(await record()));
});

test.run();

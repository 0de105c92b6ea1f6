// The store's contract below HTTP as one set of cases over any engine's store (hono's common.case.test.ts
// pattern): storeCases(label, open) runs them on a fresh store per case; store.sqlite.test.ts and store.postgres.pg.ts call it.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Check, Created, Scope } from '../../src/engine/store.js';
import { ApiError } from '../../src/errors.js';
import { jsonResponse } from '../../src/http/messages.js';
import type { Id } from '../../src/model/registry.js';
import type { RawQuery } from '../../src/request/list-query.js';
import { type Row, toCreateRow, toCreateRows, toPatchedRow, toReplacementRow } from '../../src/request/validation.js';
import type { Engine } from '../support/engine.js';

/** What the HTTP layer answers a create with (src/api/compile.ts's respond, without the ETag). */
const respond = (created: Row | Row[]) => jsonResponse(201, created);

/** Accepts any current row (a request without If-Match). */
const anyRow: Check = () => undefined;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The error `work` fails with; fails the test when it succeeds. */
async function failure(work: () => unknown): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  assert.unreachable('expected the store to refuse');
}

/** The ApiError `work` fails with, reduced to what the HTTP layer sends of it (code, detail, field errors). */
async function refusal(work: () => unknown): Promise<{ code: string; message: string; errors?: unknown }> {
  const error = await failure(work);
  if (!(error instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(error)}`, { cause: error });
  return { code: error.code, message: error.message, ...(error.errors && { errors: error.errors }) };
}

/** Creates one element from a client's body, validated as POST validates it; the created row. */
async function create(engine: Engine, kind: string, body: Row): Promise<Row> {
  const { response, replayed } = await engine.kind(kind).create(toCreateRow(engine.resource(kind), body), respond);
  assert.is(replayed, false);
  return JSON.parse(response.body);
}

/** Creates elements with one bulk create; the created rows. */
async function createAll(engine: Engine, kind: string, bodies: Row[]): Promise<Row[]> {
  const { response } = await engine.kind(kind).create(toCreateRows(engine.resource(kind), bodies), respond);
  return JSON.parse(response.body);
}

/** One page's rows of a list query. */
async function list(engine: Engine, kind: string, raw: RawQuery = {}, scope?: Scope): Promise<Row[]> {
  return (await engine.kind(kind).list(engine.query(kind, raw, scope), scope)).rows;
}

/** The keys of the rows of one page. */
const ids = async (engine: Engine, kind: string, raw: RawQuery = {}, scope?: Scope) =>
  (await list(engine, kind, raw, scope)).map((row) => row.id);

/** Every page of a list, following the cursor the HTTP layer would link to: each page's rows. */
async function walk(engine: Engine, kind: string, raw: RawQuery, scope?: Scope): Promise<Row[][]> {
  const pages: Row[][] = [];
  let cursor: string | undefined;
  do {
    const query = engine.query(kind, cursor === undefined ? raw : { ...raw, cursor }, scope);
    const page = await engine.kind(kind).list(query, scope);
    pages.push(page.rows);
    cursor = engine.cursorAfter(query, page);
    if (pages.length > 50) throw new Error('the cursor never reached the end of the list');
  } while (cursor !== undefined);
  return pages;
}

/** Two owners and six pets: mixed case names (text is ordered by code point), two pets without an owner. */
async function seedPets(engine: Engine): Promise<void> {
  await createAll(engine, 'users', [
    { name: 'Ada Lovelace', email: 'ada@example.com' },
    { name: 'Grace Hopper', email: 'grace@example.com' },
    { name: 'Alan Turing', email: 'alan@example.com' },
  ]);
  await createAll(engine, 'pets', [
    { name: 'Rex', species: 'dog', ownerId: 1 },
    { name: 'Tom', species: 'cat', ownerId: 1 },
    { name: 'tweety', species: 'bird', ownerId: 2 },
    { name: 'Nemo', species: 'fish', ownerId: null },
    { name: 'Felix', species: 'cat' },
    { name: 'Rexy', species: 'dog', ownerId: 2 },
  ]);
}

/** Runs the store cases on stores made by `open` (a fresh database for each case). */
export function storeCases(label: string, open: () => Promise<Engine>): void {
  const test = suite<{ engine: Engine }>(`store conformance on ${label}`);
  test.before.each(async (context) => {
    context.engine = await open();
  });
  test.after.each(async (context) => {
    await context.engine?.close();
  });

  /** A pet to hang tags on: its id. */
  const petId = async (engine: Engine) => (await create(engine, 'pets', { name: 'Rex', species: 'dog' })).id;

  test('create answers the row as stored; get and exists read it back', async ({ engine }) => {
    const before = Date.now();
    const { response, replayed } = await engine
      .kind('users')
      .create(toCreateRow(engine.resource('users'), { name: 'Ada', email: 'ada@example.com' }), respond);
    assert.is(replayed, false);
    assert.is(response.status, 201);
    const created = JSON.parse(response.body);
    assert.match(created.createdAt, ISO);
    assert.ok(Date.parse(created.createdAt) >= before - 1 && Date.parse(created.createdAt) <= Date.now());
    const expected = { id: 1, name: 'Ada', email: 'ada@example.com', createdAt: created.createdAt, updatedAt: created.createdAt };
    assert.equal(created, expected);
    assert.equal(await engine.kind('users').get(1), expected);
    assert.is(await engine.kind('users').exists(1), true);
    // A composite key the client gives: read back by both parts, a default (null) filled in.
    const tag = await create(engine, 'pet_tags', { petId: await petId(engine), label: 'good' });
    assert.equal(tag, { petId: 1, label: 'good', note: null });
    assert.equal(await engine.kind('pet_tags').get([1, 'good']), tag);
    assert.is(await engine.kind('pet_tags').exists([1, 'good']), true);
    assert.is(await engine.kind('pet_tags').exists([1, 'Good']), false);
  });

  test('a missing element: get is undefined, exists false, update and remove are notFound', async ({ engine }) => {
    await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    const users = engine.kind('users');
    assert.is(await users.get(2), undefined);
    assert.is(await users.exists(2), false);
    const notFound = { code: 'notFound', message: 'There is no users element with id "2".' };
    assert.equal(await refusal(() => users.update(2, (current) => current)), notFound);
    assert.equal(await refusal(() => users.remove(2, anyRow)), notFound);
    assert.is(await engine.kind('pet_tags').get([1, 'none']), undefined);
    assert.equal(await refusal(() => engine.kind('pet_tags').remove([1, 'none'], anyRow)), {
      code: 'notFound',
      message: 'There is no pet_tags element with id "1,none".',
    });
  });

  test('paging with cursors returns every row once, in order, in pages of the limit', async ({ engine }) => {
    await createAll(
      engine,
      'users',
      ['Eve', 'bob', 'Carol', 'alice', 'Dan', 'Bob', 'erin'].map((name, i) => ({ name, email: `u${i}@example.com` })),
    );
    const byKey = await walk(engine, 'users', { limit: '3' });
    assert.equal(
      byKey.map((rows) => rows.map((row) => row.id)),
      [[1, 2, 3], [4, 5, 6], [7]],
    );
    // Text in code-point order (upper case first) on both engines; the key breaks the tie between equal names.
    const byName = await walk(engine, 'users', { sort: '-name', limit: '2' });
    assert.equal(
      byName.map((rows) => rows.map((row) => row.name)),
      [['erin', 'bob'], ['alice', 'Eve'], ['Dan', 'Carol'], ['Bob']],
    );
    // A list whose length is a multiple of the limit ends on a full page.
    assert.equal((await walk(engine, 'users', { limit: '7' })).length, 1);
  });

  test('filters: each operator selects the rows the list language says', async ({ engine }) => {
    await seedPets(engine);
    const cases: [RawQuery, number[]][] = [
      [{ species: 'cat' }, [2, 5]],
      [{ 'species[eq]': 'cat' }, [2, 5]],
      [{ 'species[ne]': 'cat' }, [1, 3, 4, 6]],
      // `ne` is null-safe: a pet without an owner is not owned by 1.
      [{ 'ownerId[ne]': '1' }, [3, 4, 5, 6]],
      [{ 'id[gt]': '4' }, [5, 6]],
      [{ 'id[gte]': '4' }, [4, 5, 6]],
      [{ 'id[lt]': '3' }, [1, 2]],
      [{ 'id[lte]': '2' }, [1, 2]],
      // Text compared by code point: lower case sorts after every upper-case letter.
      [{ 'name[gt]': 'Tom' }, [3]],
      [{ 'name[lte]': 'Rex' }, [1, 4, 5]],
      [{ 'species[in]': 'bird,fish' }, [3, 4]],
      [{ 'ownerId[in]': '2,99' }, [3, 6]],
      [{ 'name[contains]': 'ex' }, [1, 6]],
      [{ 'name[contains]': 'e' }, [1, 3, 4, 5, 6]],
      [{ 'name[contains]': 'EX' }, []],
      [{ 'name[startsWith]': 'Re' }, [1, 6]],
      [{ 'name[startsWith]': 're' }, []],
      [{ 'ownerId[null]': 'true' }, [4, 5]],
      [{ 'ownerId[null]': 'false' }, [1, 2, 3, 6]],
      [{ species: 'dog', ownerId: '2' }, [6]],
      [{ 'id[gt]': '1', 'id[lt]': '1' }, []],
    ];
    for (const [raw, expected] of cases) assert.equal(await ids(engine, 'pets', raw), expected, JSON.stringify(raw));
  });

  test('sort: several keys, NULLs first ascending and last descending, and the same order across pages', async ({ engine }) => {
    await seedPets(engine);
    const cases: [string, number[]][] = [
      ['name', [5, 4, 1, 6, 2, 3]],
      ['species,-name', [3, 2, 5, 6, 1, 4]],
      ['ownerId', [4, 5, 1, 2, 3, 6]],
      ['-ownerId', [3, 6, 1, 2, 4, 5]],
      ['-ownerId,-id', [6, 3, 2, 1, 5, 4]],
    ];
    for (const [sort, expected] of cases) {
      assert.equal(await ids(engine, 'pets', { sort }), expected, sort);
      // Page by page (a cursor after a NULL and after a value), the keyset continues the same order.
      for (const limit of ['1', '4']) {
        const pages = await walk(engine, 'pets', { sort, limit });
        assert.equal(
          pages.flat().map((row) => row.id),
          expected,
          `${sort} by ${limit}`,
        );
      }
    }
    const full = await list(engine, 'pets', { sort: 'species,-name', limit: '1' });
    assert.equal(Object.keys(full[0] as Row), ['id', 'name', 'species', 'ownerId', 'createdAt', 'updatedAt']);
  });

  test('count: the total of rows matching the filters, whatever the limit; none unless asked', async ({ engine }) => {
    await seedPets(engine);
    const pets = engine.kind('pets');
    const counted = await pets.list(engine.query('pets', { species: 'cat', count: 'true', limit: '1' }));
    assert.equal(
      counted.rows.map((row) => row.id),
      [2],
    );
    assert.is(counted.more, true);
    assert.is(counted.total, 2);
    assert.is((await pets.list(engine.query('pets', { count: 'true' }))).total, 6);
    assert.is((await pets.list(engine.query('pets', { count: 'true', species: 'other' }))).total, 0);
    assert.is((await pets.list(engine.query('pets', { limit: '1' }))).total, undefined);
    // The count ignores the cursor: the second page still counts every match.
    const first = engine.query('pets', { count: 'true', limit: '2' });
    const cursor = engine.cursorAfter(first, await pets.list(first));
    const second = await pets.list(engine.query('pets', { count: 'true', limit: '2', cursor }));
    assert.equal(
      second.rows.map((row) => row.id),
      [3, 4],
    );
    assert.is(second.total, 6);
  });

  test('related lists: rows of one parent only, with filters, count and paging; none under a missing parent', async ({ engine }) => {
    await seedPets(engine);
    const owner = (id: Id) => engine.scope('users', 'ownerId', id);
    assert.equal(await ids(engine, 'pets', {}, owner(1)), [1, 2]);
    assert.equal(await ids(engine, 'pets', { species: 'dog' }, owner(2)), [6]);
    assert.equal(await ids(engine, 'pets', {}, owner(3)), []);
    assert.equal(await ids(engine, 'pets', {}, owner(99)), []);
    const page = await engine.kind('pets').list(engine.query('pets', { count: 'true' }, owner(2)), owner(2));
    assert.is(page.total, 2);
    assert.equal(
      (await walk(engine, 'pets', { limit: '1', sort: '-name' }, owner(2))).map((rows) => rows.map((row) => row.name)),
      [['tweety'], ['Rexy']],
    );
    // A composite-key kind under its parent: ordered by its key.
    await createAll(engine, 'pet_tags', [
      { petId: 2, label: 'lazy' },
      { petId: 1, label: 'loud', note: 'barks' },
      { petId: 1, label: 'good' },
    ]);
    assert.equal(await list(engine, 'pet_tags', {}, engine.scope('pets', 'petId', 1)), [
      { petId: 1, label: 'good', note: null },
      { petId: 1, label: 'loud', note: 'barks' },
    ]);
  });

  test('update: the change sees the current row; replace and merge store what they make; a throwing check writes nothing', async ({
    engine,
  }) => {
    const ada = await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    const users = engine.kind('users');
    const resource = engine.resource('users');
    let seen: Row | undefined;
    const replaced = await users.update(1, (current) => {
      seen = { ...current };
      return toReplacementRow(resource, { name: 'Ada L.', email: 'ada@example.org' }, current);
    });
    assert.equal(seen, ada);
    assert.equal(replaced, { ...ada, name: 'Ada L.', email: 'ada@example.org', updatedAt: replaced.updatedAt });
    assert.match(replaced.updatedAt as string, ISO);
    assert.ok((replaced.updatedAt as string) >= (ada.updatedAt as string));
    assert.equal(await users.get(1), replaced);

    const pet = await create(engine, 'pets', { name: 'Rex', species: 'dog', ownerId: 1 });
    const merged = await engine
      .kind('pets')
      .update(pet.id as Id, (current) => toPatchedRow(engine.resource('pets'), { name: 'Rex II', ownerId: null }, current));
    assert.equal(merged, { ...pet, name: 'Rex II', ownerId: null, updatedAt: merged.updatedAt });
    // A replacement that leaves a field with a default out stores the default.
    await create(engine, 'orders', { userId: 1, petId: pet.id, status: 'approved', quantity: 3 });
    const reset = await engine
      .kind('orders')
      .update(1, (current) => toReplacementRow(engine.resource('orders'), { userId: 1, petId: 1 }, current));
    assert.equal([reset.status, reset.quantity], ['placed', 1]);

    // A precondition that fails (as If-Match does) stops the write with its own error.
    const stale = new ApiError('preconditionFailed', 'stale');
    const error = await failure(() =>
      users.update(1, () => {
        throw stale;
      }),
    );
    assert.is(error, stale);
    assert.equal(await users.get(1), replaced);
  });

  test('remove: the check sees the current row and may stop it; then the element is gone', async ({ engine }) => {
    const ada = await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    const users = engine.kind('users');
    const stale = new ApiError('preconditionFailed', 'stale');
    const error = await failure(() =>
      users.remove(1, () => {
        throw stale;
      }),
    );
    assert.is(error, stale);
    assert.is(await users.exists(1), true);
    let seen: Row | undefined;
    await users.remove(1, (current) => {
      seen = { ...current };
    });
    assert.equal(seen, ada);
    assert.is(await users.get(1), undefined);
    assert.equal(await refusal(() => users.remove(1, anyRow)), { code: 'notFound', message: 'There is no users element with id "1".' });
    // Removing a parent cascades to its tags (ON DELETE CASCADE) and sets its pets' owner to null (SET NULL).
    await create(engine, 'users', { name: 'Grace', email: 'grace@example.com' });
    await create(engine, 'pets', { name: 'Rex', species: 'dog', ownerId: 2 });
    await create(engine, 'pet_tags', { petId: 1, label: 'good' });
    await users.remove(2, anyRow);
    assert.is((await engine.kind('pets').get(1))?.ownerId, null);
    await engine.kind('pets').remove(1, anyRow);
    assert.equal(await list(engine, 'pet_tags'), []);
  });

  test('a unique value taken is a conflict naming its fields, on create, bulk create and update', async ({ engine }) => {
    await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    await create(engine, 'users', { name: 'Grace', email: 'grace@example.com' });
    const taken = {
      code: 'conflict',
      message: 'A users element with the same email already exists.',
      errors: [{ path: 'email', message: 'is already taken' }],
    };
    const users = engine.kind('users');
    const resource = engine.resource('users');
    assert.equal(await refusal(() => users.create(toCreateRow(resource, { name: 'Ada 2', email: 'ada@example.com' }), respond)), taken);
    assert.equal(await refusal(() => users.update(2, (current) => toPatchedRow(resource, { email: 'ada@example.com' }, current))), taken);
    // A composite key taken names both of its fields.
    await create(engine, 'pets', { name: 'Rex', species: 'dog' });
    await create(engine, 'pet_tags', { petId: 1, label: 'good' });
    assert.equal(
      await refusal(() => engine.kind('pet_tags').create(toCreateRow(engine.resource('pet_tags'), { petId: 1, label: 'good' }), respond)),
      {
        code: 'conflict',
        message: 'A pet_tags element with the same petId, label already exists.',
        errors: [
          { path: 'petId', message: 'is already taken' },
          { path: 'label', message: 'is already taken' },
        ],
      },
    );
    assert.equal(await ids(engine, 'users'), [1, 2]);
  });

  test('a reference to a missing parent is unprocessable naming every field that names nothing', async ({ engine }) => {
    await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    await create(engine, 'pets', { name: 'Rex', species: 'dog' });
    const missing = (fields: [string, string][]) => ({
      code: 'unprocessable',
      message: 'A reference points at an element that does not exist.',
      errors: fields.map(([path, parent]) => ({ path, message: `names no ${parent} element` })),
    });
    const pets = engine.resource('pets');
    assert.equal(
      await refusal(() => engine.kind('pets').create(toCreateRow(pets, { name: 'Tom', species: 'cat', ownerId: 99 }), respond)),
      missing([['ownerId', 'users']]),
    );
    assert.equal(
      await refusal(() => engine.kind('pets').update(1, (current) => toPatchedRow(pets, { ownerId: 42 }, current))),
      missing([['ownerId', 'users']]),
    );
    const orders = engine.resource('orders');
    assert.equal(
      await refusal(() => engine.kind('orders').create(toCreateRow(orders, { userId: 7, petId: 8 }), respond)),
      missing([
        ['userId', 'users'],
        ['petId', 'pets'],
      ]),
    );
    assert.equal(
      await refusal(() => engine.kind('orders').create(toCreateRow(orders, { userId: 1, petId: 8 }), respond)),
      missing([['petId', 'pets']]),
    );
    // A parent still referenced (ON DELETE RESTRICT) cannot be removed: a conflict naming the referrers.
    await create(engine, 'orders', { userId: 1, petId: 1 });
    assert.equal(await refusal(() => engine.kind('users').remove(1, anyRow)), {
      code: 'conflict',
      message: 'This users element is still referenced by orders (userId); change or remove those first.',
    });
    assert.equal(await ids(engine, 'pets'), [1]);
    assert.is(await engine.kind('users').exists(1), true);
  });

  test('a bulk create is all or nothing; its refusal names the element', async ({ engine }) => {
    await create(engine, 'users', { name: 'Ada', email: 'ada@example.com' });
    const users = engine.resource('users');
    const bulk = (bodies: Row[]) => engine.kind('users').create(toCreateRows(users, bodies), respond);
    assert.equal(
      await refusal(() =>
        bulk([
          { name: 'Grace', email: 'grace@example.com' },
          { name: 'Alan', email: 'alan@example.com' },
          { name: 'Ada again', email: 'ada@example.com' },
        ]),
      ),
      {
        code: 'conflict',
        message: 'Element 2: A users element with the same email already exists.',
        errors: [{ path: '2/email', message: 'is already taken' }],
      },
    );
    assert.equal(
      await refusal(() =>
        bulk([
          { name: 'Grace', email: 'grace@example.com' },
          { name: 'Grace twin', email: 'grace@example.com' },
        ]),
      ),
      {
        code: 'conflict',
        message: 'Element 1: A users element with the same email already exists.',
        errors: [{ path: '1/email', message: 'is already taken' }],
      },
    );
    const pets = engine.resource('pets');
    assert.equal(
      await refusal(() =>
        engine.kind('pets').create(
          toCreateRows(pets, [
            { name: 'Rex', species: 'dog', ownerId: 1 },
            { name: 'Tom', species: 'cat', ownerId: 5 },
          ]),
          respond,
        ),
      ),
      {
        code: 'unprocessable',
        message: 'Element 1: A reference points at an element that does not exist.',
        errors: [{ path: '1/ownerId', message: 'names no users element' }],
      },
    );
    assert.equal(await ids(engine, 'users'), [1]);
    assert.equal(await ids(engine, 'pets'), []);
    // A bulk create that succeeds answers its rows in request order, keys in sequence after the refused ones
    // (a refused insert may use up keys: the values after it are not asserted, only their order).
    const created = await createAll(engine, 'users', [
      { name: 'Grace', email: 'grace@example.com' },
      { name: 'Alan', email: 'alan@example.com' },
      { name: 'Edsger', email: 'edsger@example.com' },
    ]);
    assert.equal(
      created.map((row) => row.name),
      ['Grace', 'Alan', 'Edsger'],
    );
    const keys = created.map((row) => row.id as number);
    assert.ok(
      keys.every((key, i) => i === 0 || key > (keys[i - 1] as number)),
      `keys in request order: ${keys}`,
    );
    assert.equal(await list(engine, 'users', { 'id[gt]': '1' }), created);
  });

  test('search: every word of q, the last as a prefix, with filters; relevance orders the same matches', async ({ engine }) => {
    await createAll(engine, 'users', [
      { name: 'Ada Lovelace', email: 'ada@example.com' },
      { name: 'Grace Hopper', email: 'grace@example.com' },
      { name: 'Alan Turing', email: 'alan@example.com' },
      { name: 'Adele Goldberg', email: 'adele@example.com' },
    ]);
    assert.equal(await ids(engine, 'users', { q: 'ada' }), [1]);
    assert.equal(await ids(engine, 'users', { q: 'ad' }), [1, 4]);
    assert.equal(await ids(engine, 'users', { q: 'hopper grace' }), [2]);
    assert.equal(await ids(engine, 'users', { q: 'TURING' }), [3]);
    assert.equal(await ids(engine, 'users', { q: 'ada turing' }), []);
    assert.equal(await ids(engine, 'users', { q: 'ad', 'name[startsWith]': 'Adele' }), [4]);
    const counted = await engine.kind('users').list(engine.query('users', { q: 'a', count: 'true', limit: '1' }));
    assert.is(counted.total, 3);
    // By relevance: the engines rank with their own functions (bm25, ts_rank), so the order of equally good
    // matches and the rank values may differ (the HTTP contract leaves them to the engine); the matches do not.
    const ranked = (await walk(engine, 'users', { q: 'a', sort: 'relevance', limit: '1' })).flat();
    assert.equal(ranked.map((row) => row.id as number).sort(), [1, 3, 4]);
  });

  test('an Idempotency-Key: the first create is stored with its answer, a retry replays it, another request is refused', async ({
    engine,
  }) => {
    const users = engine.kind('users');
    const row = () => toCreateRow(engine.resource('users'), { name: 'Ada', email: 'ada@example.com' });
    const once = { key: 'key-1', fingerprint: 'f1' };
    const first: Created = await users.create(row(), respond, once);
    assert.is(first.replayed, false);
    const again = await users.create(row(), respond, once);
    assert.equal(again, { response: first.response, replayed: true });
    assert.equal(await refusal(() => users.create(row(), respond, { key: 'key-1', fingerprint: 'f2' })), {
      code: 'unprocessable',
      message: 'This Idempotency-Key was used with another request; use a new key for a new request.',
    });
    assert.equal(await ids(engine, 'users'), [1]);
    // Nothing has expired yet.
    assert.is(await engine.store.purgeExpiredKeys(500), 0);
  });

  test('expand: rows by keys, and children by parents at most `cap` each in key order', async ({ engine }) => {
    await seedPets(engine);
    const found = await engine.kind('users').withKeys([2, 1, 99]);
    assert.equal(found.map((row) => row.id).sort(), [1, 2]);
    assert.equal((await engine.kind('users').withKeys([2]))[0], await engine.kind('users').get(2));
    const children = await engine.kind('pets').withParents('ownerId', [2, 1, 3], 1);
    assert.equal(
      children.map((row) => [row.ownerId, row.id]),
      [
        [1, 1],
        [2, 3],
      ],
    );
    const all = await engine.kind('pets').withParents('ownerId', [1, 2], 100);
    assert.equal(
      all.map((row) => row.id),
      [1, 2, 3, 6],
    );
  });

  test('a batch is one transaction: a failure in it leaves nothing of its writes', async ({ engine }) => {
    const users = engine.resource('users');
    const boom = new ApiError('unprocessable', 'stop');
    const error = await failure(() =>
      engine.store.batch((tx) => {
        const made = tx.of(users).create(toCreateRow(users, { name: 'Ada', email: 'ada@example.com' }), respond);
        // SQLite runs a batch's writes at once (synchronously), PostgreSQL after a round trip.
        const fail = () => {
          throw boom;
        };
        return made instanceof Promise ? made.then(fail) : fail();
      }),
    );
    assert.is(error, boom);
    assert.equal(await ids(engine, 'users'), []);
    const done = await engine.store.batch((tx) => {
      const made = tx.of(users).create(toCreateRow(users, { name: 'Grace', email: 'grace@example.com' }), respond);
      return made instanceof Promise ? made.then((created) => created.response) : made.response;
    });
    assert.is(done.replayed, false);
    assert.equal(
      (await list(engine, 'users')).map((row) => row.name),
      ['Grace'],
    );
  });

  test.run();
}

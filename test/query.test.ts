// Unit suite of the pure query parser (src/query.ts): no server, no database; each rule and
// each 400 of API.md §5 on its own.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import * as schema from '../src/db/schema.js';
import { ApiError } from '../src/errors.js';
import { encodeCursor, LIMIT, parseListQuery, type RawQuery } from '../src/query.js';
import { createRegistry, type Resource } from '../src/resources.js';

const { resources } = createRegistry(schema);
const kind = (name: string) => resources.find((r) => r.name === name) as Resource;
const users = kind('users');
const pets = kind('pets');

/** The 400's field errors for a query, or fails when it parses. */
function rejected(resource: Resource, query: RawQuery): { path: string; message: string }[] {
  try {
    parseListQuery(resource, query);
  } catch (error) {
    assert.instance(error, ApiError);
    assert.is((error as ApiError).code, 'badRequest');
    return (error as ApiError).errors ?? [];
  }
  throw new assert.Assertion({ message: `expected ${JSON.stringify(query)} to be rejected` } as never);
}

const test = suite('query parser');

test('defaults: 100 rows, ordered by primary key, no filters, no count, no cursor', () => {
  const query = parseListQuery(users, {});
  assert.is(query.limit, LIMIT.default);
  assert.equal(
    query.sort.map((k) => [k.field.key, k.descending]),
    [['id', false]],
  );
  assert.equal(query.filters, []);
  assert.is(query.count, false);
  assert.is(query.after, undefined);
});

test('limit accepts 1 to 1000 and nothing else', () => {
  assert.is(parseListQuery(users, { limit: '1' }).limit, 1);
  assert.is(parseListQuery(users, { limit: '1000' }).limit, 1000);
  for (const bad of ['0', '1001', '-1', '1.5', 'ten', '', '01', '1e2']) {
    assert.equal(
      rejected(users, { limit: bad }).map((e) => e.path),
      ['limit'],
      bad,
    );
  }
  assert.equal(
    rejected(users, { limit: ['1', '2'] }).map((e) => e.path),
    ['limit'],
  );
});

test('sort takes fields with optional "-" and always ends with the primary key', () => {
  const query = parseListQuery(users, { sort: 'name,-email' });
  assert.equal(
    query.sort.map((k) => [k.field.key, k.descending]),
    [
      ['name', false],
      ['email', true],
      ['id', false],
    ],
  );
  const byId = parseListQuery(users, { sort: '-id' });
  assert.equal(
    byId.sort.map((k) => [k.field.key, k.descending]),
    [['id', true]],
  );
});

test('sort rejects unknown, repeated and empty fields', () => {
  for (const bad of ['nope', 'name,name', 'name,', '-', '']) {
    assert.equal(
      rejected(users, { sort: bad }).map((e) => e.path),
      ['sort'],
      bad,
    );
  }
});

test('count is true or false', () => {
  assert.is(parseListQuery(users, { count: 'true' }).count, true);
  assert.is(parseListQuery(users, { count: 'false' }).count, false);
  assert.equal(
    rejected(users, { count: 'yes' }).map((e) => e.path),
    ['count'],
  );
});

test('field=value is equality, converted to the field type', () => {
  const [filter] = parseListQuery(pets, { ownerId: '7' }).filters;
  assert.is(filter?.field.key, 'ownerId');
  assert.is(filter?.op, 'eq');
  assert.is(filter?.value, 7);
});

test('every operator parses, with values of the field type', () => {
  const cases: [string, string, unknown][] = [
    ['id[eq]', '3', 3],
    ['id[ne]', '3', 3],
    ['id[gt]', '-3', -3],
    ['id[gte]', '0', 0],
    ['id[lt]', '10', 10],
    ['id[lte]', '10', 10],
    ['id[in]', '1,2,3', [1, 2, 3]],
    ['name[contains]', '50%_off', '50%_off'],
    ['name[startsWith]', 'A', 'A'],
    ['ownerId[null]', 'true', true],
    ['ownerId[null]', 'false', false],
    ['species[in]', 'cat,dog', ['cat', 'dog']],
    ['createdAt[gte]', '2026-01-01', '2026-01-01'],
  ];
  for (const [name, raw, value] of cases) {
    const [filter] = parseListQuery(pets, { [name]: raw }).filters;
    assert.equal(filter?.value, value, name);
    assert.is(filter?.op, /\[(\w+)\]/.exec(name)?.[1] as string);
  }
});

test('repeated filters are all kept (combined with AND)', () => {
  const { filters } = parseListQuery(pets, { 'id[gt]': ['1', '5'] });
  assert.equal(
    filters.map((f) => f.value),
    [1, 5],
  );
});

test('unknown fields, unknown operators and malformed names are 400s naming the parameter', () => {
  assert.equal(rejected(pets, { colour: 'red' }), [{ path: 'colour', message: 'names no field of pets' }]);
  assert.equal(
    rejected(pets, { 'name[like]': 'x' }).map((e) => e.path),
    ['name[like]'],
  );
  assert.equal(
    rejected(pets, { 'name[eq][x]': 'x' }).map((e) => e.path),
    ['name[eq][x]'],
  );
  assert.equal(
    rejected(pets, { '[eq]': 'x' }).map((e) => e.path),
    ['[eq]'],
  );
});

test('unconvertible values are 400s naming the parameter', () => {
  const cases: RawQuery[] = [
    { id: 'abc' },
    { 'id[gt]': '1.5' },
    { 'id[in]': '1,x' },
    { 'id[in]': '' },
    { id: '99999999999999999999' },
    { species: 'dragon' },
    { 'ownerId[null]': 'maybe' },
    { 'id[contains]': '1' },
    { 'ownerId[startsWith]': '1' },
  ];
  for (const query of cases)
    assert.equal(
      rejected(pets, query).map((e) => e.path),
      Object.keys(query),
      JSON.stringify(query),
    );
});

test('several bad parameters are all reported at once', () => {
  assert.equal(
    rejected(users, { limit: '0', sort: 'nope', bogus: '1' }).map((e) => e.path),
    ['limit', 'sort', 'bogus'],
  );
});

test('a cursor round-trips to the sort values of the row it was made from', () => {
  const query = parseListQuery(users, { sort: '-name', limit: '2' });
  const cursor = encodeCursor(query, { id: 4, name: 'Ann', email: 'a@b.c' });
  const next = parseListQuery(users, { sort: '-name', limit: '5', cursor });
  assert.equal(next.after, ['Ann', 4]);
});

test('a cursor is bound to its collection, order, filters and scope', () => {
  const query = parseListQuery(users, { sort: 'name', name: 'x' });
  const cursor = encodeCursor(query, { id: 1, name: 'x' });
  assert.ok(parseListQuery(users, { name: 'x', sort: 'name', cursor, count: 'true' }).after);
  assert.equal(
    rejected(users, { sort: '-name', name: 'x', cursor }).map((e) => e.path),
    ['cursor'],
  );
  assert.equal(
    rejected(users, { sort: 'name', name: 'y', cursor }).map((e) => e.path),
    ['cursor'],
  );
  assert.equal(
    rejected(users, { sort: 'name', cursor }).map((e) => e.path),
    ['cursor'],
  );
  assert.throws(
    () => parseListQuery(users, { sort: 'name', name: 'x', cursor }, 'ownerId=1'),
    (e: unknown) => e instanceof ApiError,
  );
  assert.throws(
    () => parseListQuery(pets, { sort: 'name', name: 'x', cursor }),
    (e: unknown) => e instanceof ApiError,
  );
});

test('garbage and forged cursors are 400s', () => {
  const query = parseListQuery(users, {});
  const forge = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  for (const cursor of [
    'garbage',
    '',
    '%%%',
    forge(null),
    forge({ q: query.fingerprint() }),
    forge({ q: query.fingerprint(), v: ['x'] }),
    forge({ q: query.fingerprint(), v: [1, 2] }),
    forge({ q: query.fingerprint(), v: [{}] }),
    forge({ q: query.fingerprint(), v: [1.5] }),
  ]) {
    assert.equal(
      rejected(users, { cursor }).map((e) => e.path),
      ['cursor'],
      cursor,
    );
  }
  assert.equal(parseListQuery(users, { cursor: forge({ q: query.fingerprint(), v: [3] }) }).after, [3]);
});

test.run();

// Unit suite of the pure query parser (src/request/list-query.ts): no server, no database; each rule and
// each 400 of API.md §5 on its own.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError } from '../../../src/errors.js';
import { createRegistry, type Resource } from '../../../src/model/registry.js';
import { createCursorCodec, Digest } from '../../../src/request/cursor.js';
import {
  encodeCursor,
  LIMIT,
  type ListQueryOptions,
  parseListQuery,
  QUERY_LIMITS,
  type RawQuery,
} from '../../../src/request/list-query.js';
import * as schema from '../../pet-shop/schema.js';

const { resources } = createRegistry(schema);
const kind = (name: string) => resources.find((r) => r.name === name) as Resource;
const users = kind('users');
const pets = kind('pets');
const cursors = createCursorCodec(() => Buffer.from('a test key, not a secret'));
const noRowid = () => {
  throw new Error('no value here is too long to carry');
};

/** The 400's field errors for a query, or fails when it parses. */
function rejected(resource: Resource, query: RawQuery, options: ListQueryOptions = { cursors }): { path: string; message: string }[] {
  try {
    parseListQuery(resource, query, options);
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
    ['createdAt[gte]', '2026-01-01', '2026-01-01T00:00:00.000Z'],
    ['createdAt[lt]', '2026-01-01T01:30:00+01:00', '2026-01-01T00:30:00.000Z'],
    ['createdAt[lt]', '2024-02-29T23:30:00-01:00', '2024-03-01T00:30:00.000Z'],
    ['updatedAt[startsWith]', '2026-0', '2026-0'],
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
    { ownerId: '-0' },
    { 'id[gt]': '07' },
    { 'createdAt[gt]': '2026-02-30' },
    { createdAt: '2025-02-29' },
    { 'createdAt[lt]': '2026-04-31T10:00:00Z' },
    { 'createdAt[lt]': '2026-13-01' },
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
  const cursor = encodeCursor(query, { id: 4, name: 'Ann', email: 'a@b.c' }, cursors, noRowid);
  const next = parseListQuery(users, { sort: '-name', limit: '5', cursor }, { cursors });
  assert.equal(next.after, ['Ann', 4]);
  assert.is(next.afterRowid, undefined);
});

test('a cursor is bound to its collection, order, filters and scope', () => {
  const query = parseListQuery(users, { sort: 'name', name: 'x' });
  const cursor = encodeCursor(query, { id: 1, name: 'x' }, cursors, noRowid);
  assert.ok(parseListQuery(users, { name: 'x', sort: 'name', cursor, count: 'true', limit: '7' }, { cursors }).after);
  for (const other of [{ sort: '-name', name: 'x' }, { sort: 'name', name: 'y' }, { sort: 'name' }, { sort: 'name', name: 'x', id: '1' }]) {
    assert.equal(
      rejected(users, { ...other, cursor }).map((e) => e.path),
      ['cursor'],
      JSON.stringify(other),
    );
  }
  assert.equal(
    rejected(users, { sort: 'name', name: 'x', cursor }, { cursors, scope: 'ownerId=1' }).map((e) => e.path),
    ['cursor'],
  );
  assert.equal(
    rejected(pets, { sort: 'name', name: 'x', cursor }).map((e) => e.path),
    ['cursor'],
  );
});

test('the order of filters does not change the list a cursor belongs to', () => {
  const query = parseListQuery(pets, { 'id[gt]': ['1', '5'], species: 'cat' });
  const cursor = encodeCursor(query, { id: 9 }, cursors, noRowid);
  assert.equal(parseListQuery(pets, { species: 'cat', 'id[gt]': ['5', '1'], cursor }, { cursors }).after, [9]);
});

test('garbage, edited, truncated and foreign cursors are 400s', () => {
  const query = parseListQuery(users, {});
  const cursor = encodeCursor(query, { id: 3 }, cursors, noRowid);
  const mac = cursor.slice(0, 22);
  const payload = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
  const otherKey = createCursorCodec(() => Buffer.from('another key'));
  for (const bad of [
    'garbage',
    '',
    '%%%',
    mac + payload({ v: [4] }),
    mac + payload({ v: [3], r: 1 }),
    flip(cursor, 3),
    flip(cursor, cursor.length - 2),
    cursor.slice(0, -1),
    cursor.slice(0, 22),
    `${cursor}A`,
    encodeCursor(query, { id: 3 }, otherKey, noRowid),
  ]) {
    assert.equal(
      rejected(users, { cursor: bad }).map((e) => e.path),
      ['cursor'],
      bad,
    );
  }
  assert.equal(
    rejected(users, { cursor }, {}).map((e) => e.path),
    ['cursor'],
    'without a codec no cursor is accepted',
  );
  assert.equal(parseListQuery(users, { cursor }, { cursors }).after, [3]);
});

test('a sealed cursor still has its values checked against the fields', () => {
  const seal = (values: unknown[]) => cursors.seal(parseListQuery(users, {}).binding(), { values: values as never });
  for (const values of [['x'], [1, 2], [1.5], [null], [new Digest('abc')]]) {
    assert.equal(
      rejected(users, { cursor: seal(values) }).map((e) => e.path),
      ['cursor'],
      JSON.stringify(values),
    );
  }
});

test('a long text sort value travels as a digest with the rowid, so a cursor stays short', () => {
  const query = parseListQuery(users, { sort: 'name' });
  const cursor = encodeCursor(query, { id: 7, name: 'n'.repeat(10_000) }, cursors, () => 70);
  assert.ok(cursor.length < 120, `${cursor.length} characters`);
  const next = parseListQuery(users, { sort: 'name', cursor }, { cursors });
  assert.instance(next.after?.[0], Digest);
  assert.is(next.after?.[1], 7);
  assert.is(next.afterRowid, 70);
});

test('bounds: filters, in values per list and in all, sort fields; each a 400 naming the parameter and the limit', () => {
  const many: RawQuery = { 'id[ne]': Array.from({ length: QUERY_LIMITS.filters }, (_, i) => String(i)) };
  assert.is(parseListQuery(pets, many).filters.length, QUERY_LIMITS.filters);
  const tooMany = rejected(pets, { ...many, name: 'Rex' });
  assert.equal(
    tooMany.map((e) => e.path),
    ['name'],
  );
  assert.match(tooMany[0]?.message ?? '', String(QUERY_LIMITS.filters));

  const list = (n: number) => Array.from({ length: n }, (_, i) => String(i)).join(',');
  assert.is((parseListQuery(pets, { 'id[in]': list(QUERY_LIMITS.inValues) }).filters[0]?.value as unknown[]).length, QUERY_LIMITS.inValues);
  const longList = rejected(pets, { 'id[in]': list(QUERY_LIMITS.inValues + 1) });
  assert.equal(
    longList.map((e) => e.path),
    ['id[in]'],
  );
  assert.match(longList[0]?.message ?? '', String(QUERY_LIMITS.inValues));

  const lists = QUERY_LIMITS.inValuesTotal / QUERY_LIMITS.inValues;
  const full: RawQuery = { 'id[in]': Array.from({ length: lists }, () => list(QUERY_LIMITS.inValues)) };
  assert.is(parseListQuery(pets, full).filters.length, lists);
  const overTotal = rejected(pets, { ...full, 'ownerId[in]': '1' });
  assert.equal(
    overTotal.map((e) => e.path),
    ['ownerId[in]'],
  );
  assert.match(overTotal[0]?.message ?? '', String(QUERY_LIMITS.inValuesTotal));

  const fields = ['name', 'email', 'createdAt', 'updatedAt', 'id'];
  const wide = Array.from({ length: QUERY_LIMITS.sortFields + 1 }, (_, i) => `${fields[i % fields.length]}`).join(',');
  const sortErrors = rejected(users, { sort: wide });
  assert.equal(
    sortErrors.map((e) => e.path),
    ['sort'],
  );
  assert.match(sortErrors[0]?.message ?? '', String(QUERY_LIMITS.sortFields));
});

test('q: whitespace-separated words kept literally, those without a letter or digit dropped', () => {
  const query = parseListQuery(users, { q: '  Ada  "love*  🐶 NEAR(x) -- ' });
  assert.equal(query.search?.words, ['Ada', '"love*', 'NEAR(x)']);
  assert.is(query.relevance, false);
  assert.is(parseListQuery(users, {}).search, undefined);
});

test('q: refused on a kind without searchable fields, without words, repeated, or past its limits', () => {
  const orders = kind('orders');
  assert.match(rejected(orders, { q: 'x' })[0]?.message ?? '', /no searchable fields/);
  for (const q of ['', '   ', '🐶 *', '"" -'])
    assert.equal(
      rejected(users, { q }).map((e) => e.path),
      ['q'],
      q,
    );
  assert.match(rejected(users, { q: ['a', 'b'] })[0]?.message ?? '', /more than once/);
  const many = Array.from({ length: QUERY_LIMITS.searchWords + 1 }, (_, i) => `w${i}`).join(' ');
  assert.match(rejected(users, { q: many })[0]?.message ?? '', /33 words/);
  assert.match(rejected(users, { q: 'x'.repeat(QUERY_LIMITS.searchWordLength + 1) })[0]?.message ?? '', /longer than 100/);
  assert.is(parseListQuery(users, { q: 'x'.repeat(QUERY_LIMITS.searchWordLength) }).search?.words.length, 1);
  // Characters are code points: 100 emoji are 200 UTF-16 units, and one word.
  assert.is(parseListQuery(users, { q: `${'😀'.repeat(QUERY_LIMITS.searchWordLength - 1)}a` }).search?.words.length, 1);
  assert.match(rejected(users, { q: `${'😀'.repeat(QUERY_LIMITS.searchWordLength)}a` })[0]?.message ?? '', /longer than 100/);
});

test('sort=relevance: first, ascending, with q only; the fields after it and the key follow', () => {
  const query = parseListQuery(users, { q: 'ada', sort: 'relevance,-name' });
  assert.is(query.relevance, true);
  assert.equal(
    query.sort.map((k) => [k.field.key, k.descending]),
    [
      ['name', true],
      ['id', false],
    ],
  );
  assert.match(rejected(users, { sort: 'relevance' })[0]?.message ?? '', /only a search has/);
  assert.match(rejected(users, { q: 'ada', sort: '-relevance' })[0]?.message ?? '', /best match first/);
  assert.match(rejected(users, { q: 'ada', sort: 'name,relevance' })[0]?.message ?? '', /comes first/);
});

test('a relevance cursor carries the rank first and is refused by another order or search', () => {
  const query = parseListQuery(users, { q: 'ada', sort: 'relevance' }, { cursors });
  const cursor = encodeCursor(query, { id: 7, name: 'Ada' }, cursors, noRowid, -1.25);
  assert.equal(parseListQuery(users, { q: 'ada', sort: 'relevance', cursor }, { cursors }).after, [-1.25, 7]);
  assert.equal(
    rejected(users, { q: 'ada', cursor }).map((e) => e.path),
    ['cursor'],
  );
  assert.equal(
    rejected(users, { q: 'grace', sort: 'relevance', cursor }).map((e) => e.path),
    ['cursor'],
  );
});

test.run();

// Checks shared by the SQLite and PostgreSQL suites of existing databases (existing-database.test.ts,
// existing-database.pg.ts, introspect.pg.ts): writes refused by foreign keys of several columns, whose
// 422 names the fields that point at nothing exactly as a single-column one does, on both engines alike.
import * as assert from 'uvu/assert';
import type { Service } from './helpers.js';

/**
 * A composite foreign key to a unique pair other than the key, beside a single-column one; the
 * introspected schema serves `visit` with fields personId, cityName and cityCountry.
 */
export const COMPOSITE_REFERENCES = `
  CREATE TABLE "City" ("id" INTEGER PRIMARY KEY, "name" TEXT NOT NULL, "country" TEXT NOT NULL, UNIQUE ("name", "country"));
  CREATE TABLE "Person" ("id" INTEGER PRIMARY KEY, "email" TEXT);
  CREATE TABLE "visit" (
    "id" INTEGER PRIMARY KEY,
    "person_id" INTEGER REFERENCES "Person" ("id"),
    "city_name" TEXT,
    "city_country" TEXT,
    FOREIGN KEY ("city_name", "city_country") REFERENCES "City" ("name", "country")
  );
`;

/** A unique index on an expression (introspection leaves it in the database, undeclared): PostgreSQL's spelling too. */
export const EXPRESSION_UNIQUE = 'CREATE UNIQUE INDEX "person_email" ON "Person" (lower("email"));';

/**
 * COMPOSITE_REFERENCES served with EXPRESSION_UNIQUE: a value taken under the expression is a 409 that says a
 * unique constraint, not the key, and names no field; a plain unique constraint still names its fields.
 */
export async function checkExpressionUnique(service: Service): Promise<void> {
  const first = await service.request('POST', '/Person', { body: { email: 'Grace@example.com' } });
  assert.is(first.status, 201, first.text);
  const taken = await service.request('POST', '/Person', { body: { email: 'grace@EXAMPLE.com' } });
  assert.equal(
    taken.body,
    {
      type: 'about:blank',
      title: 'Conflict',
      status: 409,
      detail: 'Another Person element already has the same values for a unique constraint of its table.',
      instance: '/Person',
      code: 'unique-taken',
    },
    taken.text,
  );
  const other = await service.request('POST', '/Person', { body: { email: 'other@example.com' } });
  const patched = await service.request('PATCH', `/Person/${other.body.id}`, { body: { email: 'GRACE@example.com' } });
  assert.is(patched.status, 409, patched.text);
  assert.is(patched.body.errors, undefined, patched.text);
  assert.not.match(patched.body.detail, /key/);

  const city = { name: 'Oslo', country: 'NO' };
  assert.is((await service.request('POST', '/City', { body: city })).status, 201);
  const twice = await service.request('POST', '/City', { body: city });
  assert.is(twice.status, 409, twice.text);
  assert.is(twice.body.detail, 'A City element with the same name, country already exists.');
  assert.equal(twice.body.errors, [
    { path: 'name', message: 'is already taken' },
    { path: 'country', message: 'is already taken' },
  ]);
}

/** The 422 of a reference to nothing, naming `errors` (the problem body exactly, on every engine). */
const dangling = (instance: string, errors: { path: string; message: string }[]) => ({
  type: 'about:blank',
  title: 'Unprocessable Content',
  status: 422,
  detail: 'A reference points at an element that does not exist.',
  instance,
  code: 'missing-parent',
  errors,
});

const noCity = [
  { path: 'cityName', message: 'names no City element' },
  { path: 'cityCountry', message: 'names no City element' },
];

/** COMPOSITE_REFERENCES served (empty): each write whose pair names no City is a 422 naming both fields. */
export async function checkCompositeReferences(service: Service): Promise<void> {
  const created = async (path: string, body: unknown) => {
    const reply = await service.request('POST', path, { body });
    assert.is(reply.status, 201, `${path}: ${reply.text}`);
    return reply.body;
  };
  const paris = await created('/City', { name: 'Paris', country: 'FR' });
  await created('/City', { name: 'Paris', country: 'US' });
  const person = await created('/Person', { email: 'ada@example.com' });

  const refused = await service.request('POST', '/visit', { body: { personId: person.id, cityName: 'Paris', cityCountry: 'DE' } });
  assert.equal(refused.body, dangling('/visit', noCity), refused.text);
  assert.is(refused.status, 422);
  // Every foreign key that names nothing is named, in field order.
  const both = await service.request('POST', '/visit', { body: { personId: 987654, cityName: 'Lyon', cityCountry: 'FR' } });
  assert.equal(both.body, dangling('/visit', [{ path: 'personId', message: 'names no Person element' }, ...noCity]), both.text);
  const single = await service.request('POST', '/visit', { body: { personId: 987654, cityName: 'Paris', cityCountry: 'FR' } });
  assert.equal(single.body, dangling('/visit', [{ path: 'personId', message: 'names no Person element' }]), single.text);
  // A pair with a NULL in it is not checked (MATCH SIMPLE, both engines).
  await created('/visit', { personId: person.id, cityName: 'Nowhere', cityCountry: null });

  const visit = await created('/visit', { personId: person.id, cityName: 'Paris', cityCountry: 'FR' });
  const path = `/visit/${visit.id}`;
  const patched = await service.request('PATCH', path, { body: { cityCountry: 'IT' } });
  assert.equal(patched.body, dangling(path, noCity), patched.text);
  const replaced = await service.request('PUT', path, { body: { ...visit, cityName: 'Rome' } });
  assert.equal(replaced.body, dangling(path, noCity), replaced.text);
  const bulk = await service.request('POST', '/visit', {
    body: [
      { personId: person.id, cityName: 'Paris', cityCountry: 'US' },
      { personId: person.id, cityName: 'Paris', cityCountry: 'ES' },
    ],
  });
  assert.is(bulk.status, 422, bulk.text);
  assert.equal(
    bulk.body.errors,
    noCity.map(({ path, message }) => ({ path: `1/${path}`, message })),
  );
  assert.equal((await service.request('GET', path)).body, visit);

  // Renaming the City a visit names is a 409 naming who names it, as for a single-column reference.
  const renamed = await service.request('PATCH', `/City/${paris.id}`, { body: { name: 'Paname' } });
  assert.is(renamed.status, 409, renamed.text);
  assert.match(renamed.body.detail, /still referenced by visit \(cityName, cityCountry\)/);
}

/** The music store's TrackTag: its (Kind, Label) names a Tag, its TrackId a Track. */
export async function checkTrackTagReferences(service: Service): Promise<void> {
  const track = (await service.request('GET', '/Track?limit=1')).body[0];
  const noTag = [
    { path: 'kind', message: 'names no Tag element' },
    { path: 'label', message: 'names no Tag element' },
  ];
  const refused = await service.request('POST', '/TrackTag', { body: { trackId: track.trackId, kind: 'no such', label: 'tag' } });
  assert.equal(refused.body, dangling('/TrackTag', noTag), refused.text);
  const both = await service.request('POST', '/TrackTag', { body: { trackId: 987654321, kind: 'no such', label: 'tag' } });
  assert.equal(both.body, dangling('/TrackTag', [{ path: 'trackId', message: 'names no Track element' }, ...noTag]), both.text);
}

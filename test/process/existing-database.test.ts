// A database restable did not create, served as it is (docs/existing-databases.md): the music store built by its
// SQL script, introspected, then every kind it yields probed over HTTP, its rows untouched until a write.
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkContract } from '../../src/contract/checker.js';
import { createRegistry, type Resource } from '../../src/model/registry.js';
import { namedChecksSuite } from '../support/checks.js';
import { type Reply, type Service, startService, walkList } from '../support/helpers.js';
import { checksums, introspectFixture, type Run } from '../support/music-store.js';
import {
  COMPOSITE_REFERENCES,
  checkCompositeReferences,
  checkExpressionUnique,
  checkTrackTagReferences,
  EXPRESSION_UNIQUE,
} from '../support/references.js';

const READ_ONLY_ALLOW = 'GET, HEAD, OPTIONS';
const ELEMENT_ALLOW = 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS';

function assertProblem(reply: Reply, status: number): void {
  assert.is(reply.status, status, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.body.status, status);
}

interface Context {
  service: Service;
  run: Run;
  resources: Resource[];
}

const shapes = suite<Context>('an existing database: introspected and served as it is');

shapes.before(async (ctx) => {
  const run = await introspectFixture();
  ctx.run = run;
  ctx.resources = createRegistry(run.schema).resources;
  ctx.service = await startService({ schema: run.schema, migrationsFolder: run.out, env: { DATABASE_PATH: run.db } });
});

shapes.after(async (ctx) => {
  await ctx.service?.close();
  ctx.run?.remove();
});

/** The first rows of a kind's collection. */
async function firstRows(service: Service, resource: Resource): Promise<Record<string, unknown>[]> {
  const reply = await service.request('GET', `${resource.path}?limit=5`);
  assert.is(reply.status, 200, `${resource.path}: ${reply.text}`);
  return reply.body;
}

/** A key of the kind that names no element: integers far past the data, text no row has. */
function missingPath(resource: Resource): string {
  const part = (field: Resource['key'][number]) => (field.column.dataType === 'number' ? '987654321' : 'no%20such%20key');
  return `${resource.path}/${resource.key.map(part).join(',')}`;
}

shapes('every kind lists, every element and related path answers, and no row changed', async ({ service, resources, run }) => {
  assert.ok(resources.length >= 15, `${resources.length} kinds`);
  // Every table, view and column of the schema is in the database (mixed case, spaces, views: no false alarm).
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 200, ready.text);
  for (const resource of resources) {
    const rows = await firstRows(service, resource);
    assert.ok(rows.length > 0, `${resource.path} is empty`);
    const head = await service.request('HEAD', `${resource.path}?limit=5`);
    assert.is(head.status, 200);
    if (resource.readOnlyKind) continue;
    const path = resource.elementPath(rows[0] as Record<string, unknown>);
    const element = await service.request('GET', path);
    assert.is(element.status, 200, `${path}: ${element.text}`);
    assert.equal(element.body, rows[0]);
    const etag = element.headers.get('etag') as string;
    assert.ok(etag);
    assert.is((await service.request('GET', path, { headers: { 'If-None-Match': etag } })).status, 304);
    const options = await service.request('OPTIONS', path);
    assert.is(options.status, 204);
    assert.is(options.headers.get('allow'), ELEMENT_ALLOW);
    for (const relation of resource.referencedBy) {
      const related = [...service.app.registry.relations].find(
        (r) => r.parent === resource && r.field === relation.field && r.child === relation.child,
      );
      if (!related) continue;
      const children = await service.request('GET', `${path}/${encodeURIComponent(related.name)}`);
      assert.is(children.status, 200, children.text);
      for (const child of children.body) assert.equal(child[related.field], resource.idOf(rows[0] as Record<string, unknown>));
      assertProblem(await service.request('GET', `${missingPath(resource)}/${encodeURIComponent(related.name)}`), 404);
    }
  }
  assert.equal(checksums(run.db, Object.keys(run.before)), run.before, 'reading changed the database');
});

shapes('a missing element is a 404 on every method; read-only kinds answer 405 with an exact Allow', async ({ service, resources }) => {
  for (const resource of resources) {
    if (resource.readOnlyKind) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const reply = await service.request(method, resource.path, { body: {} });
        assertProblem(reply, 405);
        assert.is(reply.headers.get('allow'), READ_ONLY_ALLOW);
      }
      assertProblem(await service.request('GET', `${resource.path}/1`), 404);
      continue;
    }
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      assertProblem(await service.request(method, missingPath(resource), method === 'GET' ? {} : { body: {} }), 404);
    }
  }
});

shapes('the contract checker passes on every path of the existing database, and leaves no element behind', async ({ service, run }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const tables = Object.keys(checksums(run.db)).filter((name) => name !== 'sqlite_sequence'); // keys handed out stay so
  const before = checksums(run.db, tables);
  const report = await checkContract(service.url, doc);
  assert.equal(
    report.probes.filter((p) => !p.ok),
    [],
  );
  assert.ok(report.passed > 300, `${report.passed} probes`);
  // Keys are not all `id` here (albumId, composite ones): each element made, in an array too, is deleted.
  const after = checksums(run.db, tables);
  assert.equal(
    tables.filter((table) => before[table] !== after[table]),
    [],
  );
});

shapes('names in any case and percent-encoded; composite keys as k1,k2', async ({ service }) => {
  const notes = await service.request('GET', '/Liner%20Notes?limit=1');
  assert.is(notes.status, 200);
  assert.ok('noteText' in notes.body[0], notes.text);
  assert.is((await service.request('GET', '/%41lbum/1')).status, 200);
  assert.is((await service.request('GET', '/album/1')).status, 404); // case-sensitive

  const pair = await service.request('GET', '/PlaylistTrack?limit=1');
  const [first] = pair.body as { playlistId: number; trackId: number }[];
  const path = `/PlaylistTrack/${first?.playlistId},${first?.trackId}`;
  assert.is((await service.request('GET', path)).status, 200);
  assert.is((await service.request('GET', `/PlaylistTrack/${first?.playlistId}`)).status, 404);
  assert.is((await service.request('GET', `${path},1`)).status, 404);
  assert.is((await service.request('GET', `/PlaylistTrack/${first?.playlistId},x`)).status, 404);

  // Text key parts with ",", "%", "/" and non-ASCII characters travel percent-encoded.
  const created = await service.request('POST', '/Tag', { body: { kind: 'mood, 100%', label: 'loud/ü', description: 'x' } });
  assert.is(created.status, 201, created.text);
  const location = created.headers.get('location') as string;
  assert.is(location, `/Tag/${encodeURIComponent('mood, 100%')},${encodeURIComponent('loud/ü')}`);
  const read = await service.request('GET', location);
  assert.equal(read.body, { kind: 'mood, 100%', label: 'loud/ü', description: 'x' });
  const stale = await service.request('PATCH', location, { body: { description: 'y' }, headers: { 'If-Match': '"stale"' } });
  assertProblem(stale, 412);
  const patched = await service.request('PATCH', location, {
    body: { description: 'y' },
    headers: { 'If-Match': read.headers.get('etag') as string },
  });
  assert.is(patched.status, 200, patched.text);
  const moved = await service.request('PATCH', location, { body: { label: 'other' } });
  assertProblem(moved, 422); // key fields are read-only
  assert.is((await service.request('DELETE', location)).status, 204);
  assertProblem(await service.request('GET', location), 404);
});

shapes('a write whose foreign key of two columns names no element is a 422 naming both fields', async ({ service }) => {
  await checkTrackTagReferences(service);
});

shapes('self-references and two foreign keys to one parent have their related paths', async ({ service }) => {
  const reports = await service.request('GET', '/Employee/1/Employee');
  assert.is(reports.status, 200);
  assert.ok(reports.body.length > 0);
  for (const employee of reports.body) assert.is(employee.reportsTo, 1);
  const paths = Object.keys((await service.request('GET', '/openapi.json')).body.paths).filter((p) =>
    p.startsWith('/Employee/{id}/Ticket'),
  );
  assert.is(paths.length, 2, paths.join(' '));
  for (const path of paths) assert.is((await service.request('GET', path.replace('{id}', '1'))).status, 200);
});

shapes('expand works across composite keys, self-references and named relations', async ({ service }) => {
  const pairs = await service.request('GET', '/PlaylistTrack?limit=3&expand=playlist,track.album');
  assert.is(pairs.status, 200, pairs.text);
  for (const pair of pairs.body) {
    assert.is(pair.playlist.playlistId, pair.playlistId);
    assert.is(pair.track.trackId, pair.trackId);
  }
  const boss = await service.request('GET', '/Employee/1?expand=Employee');
  assert.is(boss.status, 200, boss.text);
  assert.ok(boss.body.Employee.length > 0);
  for (const report of boss.body.Employee) assert.is(report.reportsTo, 1);
  const tickets = await service.request('GET', '/Ticket?limit=5&expand=openedByEmployee');
  assert.is(tickets.status, 200, tickets.text);
  for (const ticket of tickets.body) assert.is(ticket.openedByEmployee.employeeId, ticket.openedBy);
});

shapes('values round-trip as stored: NUMERIC exact, DATETIME as text, BLOB as base64, untyped as is', async ({ service, run }) => {
  const sqlite = new Database(run.db, { readonly: true });
  const [price, hired, photo] = sqlite
    .prepare(
      `SELECT (SELECT CAST("UnitPrice" AS TEXT) FROM "Track" WHERE "TrackId" = 1), (SELECT "HireDate" FROM "Employee" WHERE "EmployeeId" = 1), (SELECT "Photo" FROM "Employee" WHERE "EmployeeId" = 1)`,
    )
    .raw()
    .get() as [string, string, Buffer];
  const settings = sqlite.prepare('SELECT "Name", "Value" FROM "Setting"').raw().all() as [string, unknown][];
  sqlite.close();
  assert.is((await service.request('GET', '/Track/1')).body.unitPrice, price);
  const employee = (await service.request('GET', '/Employee/1')).body;
  assert.is(employee.hireDate, hired);
  assert.is(employee.photo, photo.toString('base64'));
  assert.ok(settings.some(([, v]) => typeof v === 'number') && settings.some(([, v]) => typeof v === 'string'), 'the fixture mixes types');
  for (const [name, value] of settings) assert.is((await service.request('GET', `/Setting/${encodeURIComponent(name)}`)).body.value, value);

  const track = (await service.request('GET', '/Track/1')).body;
  const { trackId: _, ...body } = track;
  const exact = await service.request('PUT', '/Track/1', { body: { ...body, unitPrice: '12345678.91' } });
  assert.is(exact.status, 200, exact.text);
  assert.is(exact.body.unitPrice, '12345678.91');
  const drift = await service.request('PUT', '/Track/1', { body: { ...body, unitPrice: '12345678901234567.89' } });
  assertProblem(drift, 422);
  assert.is(drift.body.errors[0].path, 'unitPrice');
  // A JSON number it keeps exactly is taken as its text; one it would round is not.
  const number = await service.request('PUT', '/Track/1', { body: { ...body, unitPrice: 0.99 } });
  assert.is(number.status, 200, number.text);
  assert.is(number.body.unitPrice, '0.99');
  const notExact = await service.request('PUT', '/Track/1', { body: { ...body, unitPrice: 0.1 + 0.2 } });
  assertProblem(notExact, 422);
  const notADecimal = await service.request('PATCH', '/Track/1', { body: { unitPrice: 'abc' } });
  assertProblem(notADecimal, 422);
  assert.equal(
    notADecimal.body.errors.map((e: { path: string }) => e.path),
    ['unitPrice'],
  );

  const set = await service.request('PATCH', `/Setting/${encodeURIComponent(settings[0]?.[0] as string)}`, { body: { value: 42 } });
  assert.equal(set.body.value, 42);
  const bytes = await service.request('PATCH', '/Employee/2', { body: { photo: Buffer.from('hello').toString('base64') } });
  assert.is(bytes.status, 200, bytes.text);
  const stored = new Database(run.db, { readonly: true });
  assert.equal(stored.prepare('SELECT "Photo" FROM "Employee" WHERE "EmployeeId" = 2').pluck().get(), Buffer.from('hello'));
  stored.close();
  assertProblem(await service.request('PATCH', '/Employee/2', { body: { photo: 'not base64!' } }), 422);
});

shapes('a NUMERIC filter compares numbers, and a value that is no decimal is a 400', async ({ service }) => {
  const all = await walkList(service, '/Track?limit=1000&fields=trackId,unitPrice');
  const over = all.filter((t) => Number(t.unitPrice) > 1).length;
  assert.ok(over > 0 && over < all.length, 'the fixture has prices on both sides of 1');
  const counted = await service.request('GET', '/Track?unitPrice[gt]=1.0&count=true&limit=1');
  assert.is(counted.status, 200, counted.text);
  assert.is(counted.headers.get('x-total-count'), String(over));
  // More digits than a NUMERIC value keeps would be compared as a rounded double on SQLite: refused, as in a write.
  for (const query of [
    'unitPrice[gt]=abc',
    'unitPrice[lt]=',
    'unitPrice=abc',
    'unitPrice[in]=0.99,b',
    'unitPrice[gt]=1e999',
    'unitPrice=0.99000000000000000001',
    'unitPrice[in]=0.1,0.9900000000000000001',
  ]) {
    const reply = await service.request('GET', `/Track?${query}`);
    assertProblem(reply, 400);
    assert.equal(
      reply.body.errors.map((e: { path: string }) => e.path),
      [query.split('=')[0]],
    );
  }
});

shapes(
  'DATE and DATETIME columns hold text: text SQLite would store as another number is a 422; filters and sort compare text',
  async ({ service }) => {
    // Numeric affinity: "2009" is stored as 2009 and reads back as "2009"; "02134" would read back as "2134".
    const created = await service.request('POST', '/Employee', { body: { lastName: 'Year', firstName: 'Only', birthDate: '2009' } });
    assert.is(created.status, 201, created.text);
    assert.is(created.body.birthDate, '2009');
    const location = created.headers.get('location') as string;
    const read = (await service.request('GET', location)).body;
    assert.is(read.birthDate, '2009');
    const { employeeId: _, ...body } = read;
    assert.is((await service.request('PUT', location, { body })).status, 200, 'the GET body goes back with PUT');
    for (const value of ['02134', '1.50', ' 12 ', '1e3', '-0', '+5', '12345678901234567890']) {
      const reply = await service.request('PATCH', location, { body: { birthDate: value } });
      assertProblem(reply, 422);
      assert.equal(
        reply.body.errors.map((e: { path: string }) => e.path),
        ['birthDate'],
      );
    }
    assert.is((await service.request('GET', location)).body.birthDate, '2009', 'nothing refused was written');
    // The OpenAPI document says so for the bodies that write it, and says a NUMERIC value's bounds.
    const bodies = JSON.stringify((await service.request('GET', '/openapi.json')).body.components.schemas);
    assert.ok(bodies.includes('but text that reads as a number other than a canonical integer'), 'DATE rule described');
    assert.ok(bodies.includes('An exact decimal as text, of at most 15 significant digits'), 'NUMERIC rule described');
    // And the element's schema serves a DATE as text (or null), not as anything.
    const served = (await service.request('GET', '/openapi.json')).body.components.schemas.Employee.properties.birthDate;
    assert.equal(served, { anyOf: [{ type: 'string' }, { type: 'null' }] });
    // Compared as text, as on PostgreSQL: a value that reads as a number is not turned into one.
    const all = await walkList(service, '/Employee?limit=1000&fields=employeeId,birthDate&birthDate[null]=false');
    const dates = all.map((e) => e.birthDate as string);
    const count = async (query: string) =>
      (await service.request('GET', `/Employee?${query}&count=true&limit=1`)).headers.get('x-total-count');
    assert.is(await count('birthDate[gt]=1970'), String(dates.filter((d) => d > '1970').length));
    assert.is(await count('birthDate[lt]=1970'), String(dates.filter((d) => d < '1970').length));
    assert.ok(dates.some((d) => d < '1970') && dates.some((d) => d > '1970'), 'the fixture has dates on both sides');
    assert.is(await count('birthDate=2009'), '1');
    assert.is(await count('birthDate=02009'), '0');
    assert.is(await count('birthDate[in]=2009,2010'), '1');
    const sorted = await walkList(service, '/Employee?limit=7&fields=birthDate&birthDate[null]=false&sort=birthDate');
    assert.equal(
      sorted.map((e) => e.birthDate),
      [...dates].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
    );
    assert.is((await service.request('DELETE', location)).status, 204);
  },
);

shapes(
  'BLOB, untyped and JSON fields take [null] only; DATE columns every text filter; /openapi.json says exactly that',
  async ({ service, run }) => {
    const sqlite = new Database(run.db, { readonly: true });
    const withPhoto = sqlite.prepare('SELECT count(*) FROM "Employee" WHERE "Photo" IS NOT NULL').pluck().get();
    sqlite.close();
    const count = async (query: string) => {
      const reply = await service.request('GET', `/Employee?${query}&count=true&limit=1`);
      assert.is(reply.status, 200, `${query}: ${reply.text}`);
      return reply.headers.get('x-total-count');
    };
    assert.is(await count('photo[null]=false'), String(withPhoto));
    for (const query of ['photo=aGVsbG8=', 'photo[gt]=a', 'photo[in]=a', 'sort=photo']) {
      const reply = await service.request('GET', `/Employee?${query}`);
      assertProblem(reply, 400);
    }
    const doc = (await service.request('GET', '/openapi.json')).body;
    const names = (doc.paths['/Employee'].get.parameters as { name?: string; $ref?: string }[]).map((p) => p.name).filter(Boolean);
    assert.ok(names.includes('photo[null]'), 'photo[null] is documented');
    assert.not.ok(names.includes('photo') || names.includes('photo[gt]'), 'no other photo filter is documented');
    for (const name of ['birthDate', 'birthDate[gt]', 'birthDate[startsWith]', 'birthDate[null]']) assert.ok(names.includes(name), name);
    const sort = (doc.paths['/Employee'].get.parameters as { name?: string; schema?: { pattern?: string } }[]).find(
      (p) => p.name === 'sort',
    );
    assert.match('-birthDate', new RegExp(sort?.schema?.pattern as string));
  },
);

shapes('a REAL filter takes a number written as JSON writes one, nothing Number() would also read', async ({ service }) => {
  assert.is((await service.request('GET', '/Currency?rate[gte]=1e-3&count=true&limit=1')).status, 200);
  for (const value of ['0x1', '0b1', '0o1', '1.', '+1', ' 1', '1_0', 'Infinity']) {
    const reply = await service.request('GET', `/Currency?rate=${encodeURIComponent(value)}`);
    assertProblem(reply, 400);
  }
});

shapes('orphans from old data are served; writes are checked', async ({ service, run }) => {
  const sqlite = new Database(run.db, { readonly: true });
  const [orphan, missingArtist] = sqlite
    .prepare('SELECT "AlbumId", "ArtistId" FROM "Album" WHERE "ArtistId" NOT IN (SELECT "ArtistId" FROM "Artist") LIMIT 1')
    .raw()
    .get() as [number, number];
  sqlite.close();
  assert.ok(orphan, 'the fixture has orphans');
  const album = await service.request('GET', `/Album/${orphan}`);
  assert.is(album.status, 200);
  // The artist its orphans name does not exist: its related list is a 404, not a page of the orphans.
  assert.is((await service.request('GET', '/Artist/1/Album')).status, 200);
  for (const query of ['', '?count=true', '?limit=1&sort=-title']) {
    assertProblem(await service.request('GET', `/Artist/${missingArtist}/Album${query}`), 404);
  }
  assert.is((await service.request('HEAD', `/Artist/${missingArtist}/Album`)).status, 404);
  const { albumId: _, ...body } = album.body;
  const kept = await service.request('PUT', `/Album/${orphan}`, { body });
  assertProblem(kept, 422);
  assert.is(kept.body.errors[0].path, 'artistId');
  const fixed = await service.request('PUT', `/Album/${orphan}`, { body: { ...body, artistId: 1 } });
  assert.is(fixed.status, 200, fixed.text);
});

shapes('a kind without a key pages by position: a cursor walk sees every row once', async ({ service, run }) => {
  const sqlite = new Database(run.db, { readonly: true });
  const total = sqlite.prepare('SELECT count(*) FROM "PlayLog"').pluck().get() as number;
  const distinct = sqlite.prepare('SELECT count(*) FROM (SELECT DISTINCT * FROM "PlayLog")').pluck().get() as number;
  sqlite.close();
  let path: string | undefined = '/PlayLog?limit=333&sort=-seconds&count=true';
  const seen: string[] = [];
  while (path) {
    const reply: Reply = await service.request('GET', path);
    assert.is(reply.status, 200, reply.text);
    assert.is(reply.headers.get('x-total-count'), String(total));
    seen.push(...reply.body.map((row: unknown) => JSON.stringify(row)));
    path = /<([^>]+)>; rel="next"/.exec(reply.headers.get('link') ?? '')?.[1];
  }
  assert.is(seen.length, total);
  assert.is(new Set(seen).size, distinct);
  const cursor = /cursor=([^&>]+)/.exec((await service.request('GET', '/PlayLog?limit=1')).headers.get('link') ?? '')?.[1];
  assertProblem(await service.request('GET', `/AlbumSummary?limit=1&cursor=${cursor}`), 400);
});

shapes.run();

/** A suite serving a database that `sql` builds, introspected as a user would: its service and run in the context. */
function servedFrom(title: string, sql: string) {
  const served = suite<Omit<Context, 'resources'>>(title);
  served.before(async (ctx) => {
    ctx.run = await introspectFixture((path) => {
      const db = new Database(path);
      db.exec(sql);
      db.close();
      return path;
    });
    ctx.service = await startService({ schema: ctx.run.schema, migrationsFolder: ctx.run.out, env: { DATABASE_PATH: ctx.run.db } });
  });
  served.after(async (ctx) => {
    await ctx.service?.close();
    ctx.run?.remove();
  });
  return served;
}

/** Integer keys SQLite does not assign (not its rowid), a child of one, and a key it does assign. */
const GIVEN_KEYS = `
  CREATE TABLE "IntKey" ("id" INT PRIMARY KEY, "v" TEXT);
  CREATE TABLE "BigKey" ("id" BIGINT PRIMARY KEY, "v" TEXT);
  CREATE TABLE "DescKey" ("id" INTEGER PRIMARY KEY DESC, "v" TEXT);
  CREATE TABLE "NoRowid" ("id" INTEGER PRIMARY KEY, "v" TEXT) WITHOUT ROWID;
  CREATE TABLE "Part" ("id" INTEGER PRIMARY KEY, "intKeyId" INT REFERENCES "IntKey", "v" TEXT);
  INSERT INTO "IntKey" VALUES (2, 'a'), (3, 'b'), (5, 'c'), (10, 'd');
  INSERT INTO "BigKey" SELECT * FROM "IntKey";
  INSERT INTO "DescKey" SELECT * FROM "IntKey";
  INSERT INTO "NoRowid" SELECT * FROM "IntKey";
  INSERT INTO "Part" ("intKeyId", "v") VALUES (2, 'x'), (2, 'y'), (3, 'z');
`;
const GIVEN = ['IntKey', 'BigKey', 'DescKey', 'NoRowid'];

const givenKeys = servedFrom('an existing database: integer keys SQLite does not assign are given by the client', GIVEN_KEYS);

givenKeys('a create without the key is a 422 naming it and writes nothing; a rowid key is still assigned', async ({ service, run }) => {
  for (const table of GIVEN) {
    const reply = await service.request('POST', `/${table}`, { body: { v: 'new' } });
    assertProblem(reply, 422);
    assert.equal(
      reply.body.errors.map((e: { path: string }) => e.path),
      ['id'],
      `${table}: ${reply.text}`,
    );
    for (const id of ['7', 1.5, null]) assertProblem(await service.request('POST', `/${table}`, { body: { id, v: 'new' } }), 422);
  }
  const sqlite = new Database(run.db, { readonly: true });
  for (const table of GIVEN) assert.is(sqlite.prepare(`SELECT count(*) FROM "${table}"`).pluck().get(), 4, table);
  sqlite.close();
  const part = await service.request('POST', '/Part', { body: { intKeyId: 5, v: 'w' } });
  assert.is(part.status, 201, part.text);
  assert.is(part.headers.get('location'), '/Part/4');
});

givenKeys('a create with the key answers at its element, which reads, replaces, patches and deletes', async ({ service }) => {
  for (const table of GIVEN) {
    const created = await service.request('POST', `/${table}`, { body: { id: 40, v: 'new' } });
    assert.is(created.status, 201, `${table}: ${created.text}`);
    assert.is(created.headers.get('location'), `/${table}/40`);
    assert.equal(created.body, { id: 40, v: 'new' });
    assertProblem(await service.request('POST', `/${table}`, { body: { id: 40, v: 'again' } }), 409);
    assert.equal((await service.request('GET', `/${table}/40`)).body, { id: 40, v: 'new' });
    assert.equal((await service.request('PUT', `/${table}/40`, { body: { v: 'put' } })).body, { id: 40, v: 'put' });
    assert.equal((await service.request('PATCH', `/${table}/40`, { body: { v: 'patched' } })).body, { id: 40, v: 'patched' });
    assertProblem(await service.request('PATCH', `/${table}/40`, { body: { id: 41 } }), 422);
    assert.is((await service.request('DELETE', `/${table}/40`)).status, 204);
    assertProblem(await service.request('GET', `/${table}/40`), 404);
    assertProblem(await service.request('GET', `/${table}/4x`), 404);
  }
});

givenKeys('filters, sort, pages, related paths and expand work on such a key', async ({ service }) => {
  for (const table of GIVEN) {
    const filtered = await service.request('GET', `/${table}?id[gt]=2&sort=-id&count=true`);
    assert.is(filtered.status, 200, filtered.text);
    assert.equal(
      filtered.body.map((row: { id: number }) => row.id),
      [10, 5, 3],
    );
    assert.is(filtered.headers.get('x-total-count'), '3');
    assert.equal(
      (await walkList(service, `/${table}?limit=1&sort=-id`)).map((row) => row.id),
      [10, 5, 3, 2],
    );
    assert.equal(
      (await walkList(service, `/${table}?limit=2&id[in]=2,5,10`)).map((row) => row.id),
      [2, 5, 10],
    );
    assertProblem(await service.request('GET', `/${table}?id[gt]=x`), 400);
  }
  const parts = await service.request('GET', '/IntKey/2/Part?sort=v');
  assert.equal(
    parts.body.map((row: { v: string }) => row.v),
    ['x', 'y'],
  );
  const expanded = await service.request('GET', '/IntKey/3?expand=Part');
  assert.equal(
    expanded.body.Part.map((row: { v: string }) => row.v),
    ['z'],
  );
});

givenKeys('OpenAPI documents such a key as an integer the create body requires, and filters on it', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const create = doc.components.schemas['IntKey.create'];
  assert.ok(create.required.includes('id'), JSON.stringify(create));
  assert.is(create.properties.id.type, 'integer');
  const filter = doc.paths['/IntKey'].get.parameters.find((p: { name?: string }) => p.name === 'id[gt]');
  assert.is(filter?.schema.type, 'integer');
});

givenKeys('the contract checker passes on such keys too (it gives each create a new one)', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const report = await checkContract(service.url, doc);
  assert.equal(
    report.probes.filter((p) => !p.ok),
    [],
  );
});

givenKeys.run();

const childNamedLikeField = servedFrom(
  'an existing database: a child table named like a field of its parent',
  `CREATE TABLE "users" ("id" INTEGER PRIMARY KEY, "pets" TEXT);
             CREATE TABLE "pets" ("id" INTEGER PRIMARY KEY, "user_id" INTEGER REFERENCES "users", "name" TEXT);
             INSERT INTO "users" VALUES (1, 'two cats'), (2, NULL);
             INSERT INTO "pets" VALUES (1, 1, 'Tom'), (2, 1, 'Kit'), (3, 2, 'Rex');`,
);

childNamedLikeField('serves the field, and the related path under its own name', async ({ service, run }) => {
  assert.match(run.output.stdout, /related paths named: \/users\/\{id\}\/petsByuser_id \(pets\.user_id\)/);
  assert.equal((await service.request('GET', '/users/1')).body, { id: 1, pets: 'two cats' });
  const pets = await service.request('GET', '/users/1/petsByuser_id?sort=name');
  assert.is(pets.status, 200, pets.text);
  assert.equal(
    pets.body.map((pet: { name: string }) => pet.name),
    ['Kit', 'Tom'],
  );
  const expanded = await service.request('GET', '/users/2?expand=petsByuser_id');
  assert.equal(expanded.body, { id: 2, pets: null, petsByuser_id: [{ id: 3, userId: 2, name: 'Rex' }] });
  assert.is((await service.request('GET', '/pets/3?expand=user')).body.user.id, 2);
  const created = await service.request('POST', '/users/2/petsByuser_id', { body: { name: 'Fido' } });
  assert.is(created.status, 201, created.text);
  assert.is(created.body.userId, 2);
});

childNamedLikeField.run();

const generatedColumns = servedFrom(
  'an existing database: generated columns are the database’s to compute',
  `CREATE TABLE "Defs" ("id" INTEGER PRIMARY KEY, "n" INTEGER NOT NULL,
               "twice" INTEGER GENERATED ALWAYS AS ("n" * 2) VIRTUAL, "next" INTEGER AS ("n" + 1) STORED);
             INSERT INTO "Defs" ("n") VALUES (1), (2);`,
);

generatedColumns('served, computed on every write, sent back unchanged with PUT, and never set by a client', async ({ service }) => {
  assert.equal((await service.request('GET', '/Defs/2')).body, { id: 2, n: 2, twice: 4, next: 3 });
  const created = await service.request('POST', '/Defs', { body: { n: 5 } });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body, { id: 3, n: 5, twice: 10, next: 6 });
  // A representation fetched with GET goes back with PUT (API.md §2), the other fields changed.
  const replaced = await service.request('PUT', '/Defs/3', { body: { ...created.body, n: 7 } });
  assert.is(replaced.status, 200, replaced.text);
  assert.equal(replaced.body, { id: 3, n: 7, twice: 14, next: 8 });
  const patched = await service.request('PATCH', '/Defs/3', { body: { n: 1 } });
  assert.is(patched.status, 200, patched.text);
  assert.equal(patched.body, { id: 3, n: 1, twice: 2, next: 2 });
  // Another value for a generated field is a 422 naming it, on every write.
  for (const [method, path, body] of [
    ['POST', '/Defs', { n: 1, twice: 2 }],
    ['PUT', '/Defs/3', { n: 1, twice: 99, next: 2 }],
    ['PATCH', '/Defs/3', { next: 5 }],
  ] as const) {
    const reply = await service.request(method, path, { body });
    assertProblem(reply, 422);
    assert.ok(
      reply.body.errors.some((e: { path: string }) => e.path === 'twice' || e.path === 'next'),
      `${method} ${path}: ${reply.text}`,
    );
  }
  assert.equal((await service.request('GET', '/Defs/3')).body, { id: 3, n: 1, twice: 2, next: 2 });
  assert.equal((await service.request('GET', '/Defs?twice[gt]=3&fields=id')).body, [{ id: 2 }]);
  // The document says what they are: read-only integers, no date-times.
  const schema = (await service.request('GET', '/openapi.json')).body.components.schemas.Defs.properties;
  assert.is(schema.twice.readOnly, true);
  assert.is(schema.twice.format, undefined);
  assert.is(schema.next.format, undefined);
});

generatedColumns.run();

const uniqueReferences = servedFrom(
  'an existing database: foreign keys to a unique field other than the key',
  `CREATE TABLE "Employee" ("id" INTEGER PRIMARY KEY, "email" TEXT NOT NULL UNIQUE);
             CREATE TABLE "Desk" ("id" INTEGER PRIMARY KEY, "code" TEXT NOT NULL UNIQUE);
             CREATE TABLE "Mail" ("id" INTEGER PRIMARY KEY, "to" TEXT REFERENCES "Employee" ("email"), "desk" TEXT REFERENCES "Desk" ("code"),
               "sender" INTEGER REFERENCES "Employee" ("id"));
             INSERT INTO "Employee" VALUES (1, 'ada@example.com'), (2, 'bob@example.com');
             INSERT INTO "Desk" VALUES (1, 'D1');
             INSERT INTO "Mail" VALUES (1, 'ada@example.com', 'D1', 1);`,
);

uniqueReferences(
  'only the foreign key to the key is a related path: the one to another unique field needs no name',
  async ({ service }) => {
    // Two foreign keys from Mail to Employee, one to its key: the one related path keeps the child's name.
    const paths = service.app.registry.routes.filter((r) => r.shape === 'related').map((r) => r.path);
    assert.equal(paths, ['/Employee/{id}/Mail']);
    const mail = await service.request('GET', '/Employee/1/Mail');
    assert.is(mail.status, 200, mail.text);
    assert.equal(
      mail.body.map((m: { id: number }) => m.id),
      [1],
    );
  },
);

uniqueReferences(
  'a value naming nothing is a 422 naming each field; changing or deleting a named one is a 409 naming who names it',
  async ({ service }) => {
    const dangling = await service.request('POST', '/Mail', { body: { to: 'nobody@example.com', desk: 'D9' } });
    assertProblem(dangling, 422);
    assert.equal(dangling.body.errors, [
      { path: 'to', message: 'names no Employee element' },
      { path: 'desk', message: 'names no Desk element' },
    ]);
    assert.is((await service.request('POST', '/Mail', { body: { to: 'bob@example.com', desk: 'D1' } })).status, 201);
    const renamed = await service.request('PATCH', '/Employee/1', { body: { email: 'ada@elsewhere.example' } });
    assertProblem(renamed, 409);
    assert.match(renamed.body.detail, /still referenced by Mail \(to\)/);
    const deleted = await service.request('DELETE', '/Employee/2');
    assertProblem(deleted, 409);
    assert.match(deleted.body.detail, /still referenced by Mail \(to\)/);
    assert.is((await service.request('GET', '/Employee/1')).body.email, 'ada@example.com');
  },
);

uniqueReferences.run();

const compositeReferences = servedFrom(
  'an existing database: foreign keys of several columns, a unique index on an expression',
  COMPOSITE_REFERENCES + EXPRESSION_UNIQUE,
);

compositeReferences('a pair naming nothing is a 422 naming both fields, as PostgreSQL names them', async ({ service }) => {
  await checkCompositeReferences(service);
});

compositeReferences(
  'a value taken under a unique index on an expression is a 409 that names no field, and not the key',
  async ({ service }) => {
    await checkExpressionUnique(service);
  },
);

compositeReferences.run();

/** Foreign keys as Django declares them on SQLite: checked at commit, not at each statement. */
const deferredReferences = servedFrom(
  'an existing database: foreign keys checked at commit (DEFERRABLE INITIALLY DEFERRED)',
  `CREATE TABLE "Author" ("id" INTEGER PRIMARY KEY, "name" TEXT NOT NULL);
   CREATE TABLE "Book" ("id" INTEGER PRIMARY KEY, "title" TEXT NOT NULL,
     "authorId" INTEGER REFERENCES "Author" ("id") DEFERRABLE INITIALLY DEFERRED);
   CREATE TABLE "Region" ("code" TEXT NOT NULL PRIMARY KEY, "parentCode" TEXT REFERENCES "Region" ("code") DEFERRABLE INITIALLY DEFERRED);
   INSERT INTO "Author" VALUES (1, 'Ada');
   INSERT INTO "Book" VALUES (1, 'Notes', 1);`,
);

deferredReferences(
  'a write that breaks one is refused alone, as an immediate one is: the writes committed with it stand',
  async ({ service }) => {
    // Sent together, so that the group commit puts them in one transaction.
    const replies = await Promise.all([
      service.request('POST', '/Book', { body: { title: 'Kept 1', authorId: 1 } }),
      service.request('POST', '/Book', { body: { title: 'Dangling', authorId: 99 } }),
      service.request('POST', '/Book', { body: { title: 'Kept 2', authorId: 1 } }),
      service.request('PATCH', '/Book/1', { body: { authorId: 98 } }),
      service.request('DELETE', '/Author/1'),
      service.request('POST', '/Author', { body: { name: 'Bob' } }),
    ]);
    const [kept1, dangling, kept2, patched, deleted, author] = replies as [Reply, Reply, Reply, Reply, Reply, Reply];
    assert.is(kept1.status, 201, kept1.text);
    assert.is(kept2.status, 201, kept2.text);
    assert.is(author.status, 201, author.text);
    assertProblem(dangling, 422);
    assert.equal(dangling.body.errors, [{ path: 'authorId', message: 'names no Author element' }]);
    assertProblem(patched, 422);
    assert.equal(patched.body.errors, [{ path: 'authorId', message: 'names no Author element' }]);
    assertProblem(deleted, 409);
    assert.match(deleted.body.detail, /still referenced by Book \(authorId\)/);
    const titles = (await walkList(service, '/Book')).map((b) => `${b.title}:${b.authorId}`);
    assert.equal(titles.sort(), ['Kept 1:1', 'Kept 2:1', 'Notes:1']);
    assert.is((await service.request('GET', '/Author/1')).status, 200);
  },
);

deferredReferences('a bulk create that breaks one is refused whole, naming the element', async ({ service }) => {
  const bulk = await service.request('POST', '/Book', {
    body: [
      { title: 'Fine', authorId: 1 },
      { title: 'Lost', authorId: 96 },
    ],
  });
  assertProblem(bulk, 422);
  assert.equal(bulk.body.errors, [{ path: '1/authorId', message: 'names no Author element' }]);
  assert.equal(
    (await walkList(service, '/Book')).filter((b) => b.title === 'Fine'),
    [],
  );
  // An element naming another of the same array, before or after it, is not the one blamed.
  const regions = await service.request('POST', '/Region', {
    body: [{ code: 'a0', parentCode: 'a1' }, { code: 'a1' }, { code: 'a2', parentCode: 'a1' }, { code: 'a3', parentCode: 'zz' }],
  });
  assertProblem(regions, 422);
  assert.equal(regions.body.errors, [{ path: '3/parentCode', message: 'names no Region element' }]);
  assert.equal(await walkList(service, '/Region'), []);
});

deferredReferences('a batch that breaks one is refused whole, with nothing left behind', async ({ service }) => {
  const before = await service.request('GET', '/_changes?limit=1000');
  const batch = await service.request('POST', '/_batch', {
    body: {
      operations: [
        { method: 'POST', path: '/Author', body: { name: 'Cy' } },
        { method: 'POST', path: '/Book', body: { title: 'Orphan', authorId: 97 } },
      ],
    },
  });
  assertProblem(batch, 422);
  assert.match(batch.body.detail, /foreign key/i);
  assert.equal(
    (await walkList(service, '/Author')).filter((a) => a.name === 'Cy'),
    [],
  );
  assert.equal((await service.request('GET', '/_changes?limit=1000')).body.length, before.body.length);
});

deferredReferences.run();

const checked = servedFrom(
  'an existing database: CHECK and NOT NULL constraints of its own',
  `CREATE TABLE "Product" ("id" INTEGER PRIMARY KEY, "price" NUMERIC NOT NULL CHECK (price >= 0),
     "low" INTEGER, "high" INTEGER, "code" TEXT NOT NULL DEFAULT 'x',
     CONSTRAINT "ordered" CHECK (low <= high));`,
);

checked('a refusal names the rule it breaks, and the field when the rule is about one', async ({ service }) => {
  const negative = await service.request('POST', '/Product', { body: { price: '-1' } });
  assertProblem(negative, 422);
  assert.is(negative.body.detail, 'The Product element breaks a constraint of its table (CHECK price >= 0).');
  assert.equal(negative.body.errors, [{ path: 'price', message: 'breaks CHECK price >= 0' }]);
  const unordered = await service.request('POST', '/Product', { body: { price: '1', low: 5, high: 2 } });
  assertProblem(unordered, 422);
  assert.is(unordered.body.detail, 'The Product element breaks a constraint of its table (CHECK ordered).');
  assert.is(unordered.body.errors, undefined);
  const made = await service.request('POST', '/Product', { body: { price: '1', low: 1, high: 2 } });
  assert.is(made.status, 201, made.text);
  assert.equal((await walkList(service, '/Product')).length, 1);
});

checked.run();

const valueTypes = servedFrom(
  'an existing database: NUMERIC and BOOLEAN columns take the obvious JSON values',
  `CREATE TABLE "Book" ("id" INTEGER PRIMARY KEY, "title" TEXT, "price" NUMERIC, "inPrint" BOOLEAN NOT NULL DEFAULT TRUE);
   INSERT INTO "Book" VALUES (1, 'Odd', 3, 2);`,
);

valueTypes(
  'a JSON number kept exactly is a NUMERIC value, a JSON boolean a BOOLEAN one (stored 1/0, served as stored)',
  async ({ service, run }) => {
    assert.match(readFileSync(run.schemaPath, 'utf8'), /inPrint: booleanInteger\('inPrint'\)\.notNull\(\)\.default\(1\)/);
    const created = await service.request('POST', '/Book', { body: { title: 'New', price: 7.5, inPrint: false } });
    assert.is(created.status, 201, created.text);
    assert.equal([created.body.price, created.body.inPrint], ['7.5', 0]);
    const location = created.headers.get('location') as string;
    const patched = await service.request('PATCH', location, { body: { inPrint: true, price: 1e21 } });
    assert.is(patched.status, 200, patched.text);
    assert.equal([patched.body.price, patched.body.inPrint], ['1e+21', 1]);
    assert.equal(await service.sql('SELECT "price", typeof("price") AS type, "inPrint" FROM "Book" WHERE "id" = $1', [created.body.id]), [
      { price: 1e21, type: 'real', inPrint: 1 },
    ]);
    // Text and integers as before; a value that is neither a GET's, nor a true/false, is refused.
    const { id: _, ...body } = (await service.request('GET', location)).body;
    assert.is((await service.request('PUT', location, { body: { ...body, price: '2.50', inPrint: 0 } })).status, 200);
    // The integer a BOOLEAN holds is served as it is: nothing turns a 2 into true.
    assert.is((await service.request('GET', '/Book/1')).body.inPrint, 2);
    assert.is((await service.request('GET', '/Book?inPrint=1&count=true')).headers.get('x-total-count'), '0');
  },
);

valueTypes('a value still refused says what to send', async ({ service }) => {
  const refusals: [Record<string, unknown>, string, RegExp][] = [
    [{ price: 0.30000000000000004 }, 'price', /more than the 15 significant digits .*: send the decimal as text/],
    [{ price: 2 ** 60 }, 'price', /send the decimal as text of at most 15 significant digits/],
    [{ price: true }, 'price', /a JSON number of at most 15 significant digits \(7\.5\), or its text \("12\.50"\)/],
    [{ inPrint: 'yes' }, 'inPrint', /^must be true or false \(stored as 1 or 0\), or an integer$/],
    [{ inPrint: 0.5 }, 'inPrint', /^must be true or false/],
  ];
  for (const [body, path, message] of refusals) {
    const reply = await service.request('POST', '/Book', { body: { title: 'No', ...body } });
    assertProblem(reply, 422);
    assert.equal(
      reply.body.errors.map((e: { path: string }) => e.path),
      [path],
      reply.text,
    );
    assert.match(reply.body.errors[0].message, message);
  }
  // The document says so: a number or text for NUMERIC, an integer or a boolean for BOOLEAN; GET serves the stored types.
  const { schemas } = (await service.request('GET', '/openapi.json')).body.components;
  assert.equal(schemas['Book.create'].properties.inPrint.anyOf.map((s: { type: string }) => s.type).sort(), ['boolean', 'integer']);
  const price = schemas['Book.create'].properties.price.anyOf[0];
  assert.equal(
    price.anyOf.map((s: { type: string; format?: string }) => [s.type, s.format]),
    [
      ['string', 'decimal'],
      ['number', undefined],
    ],
  );
  assert.match(price.description, /a JSON number of at most 15 significant digits is taken as its text/);
  assert.is(schemas.Book.properties.inPrint.type, 'integer');
});

valueTypes.run();

namedChecksSuite('CHECKs declared by name in the schema (SQLite)');

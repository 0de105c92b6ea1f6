// The schema introspected from the SQLite music store, served from PostgreSQL (its migrations derived from
// the same schema): every path passes the contract checker, and each real-world shape answers as on SQLite.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkContract } from '../../src/contract/checker.js';
import { namedChecksSuite } from '../support/checks.js';
import { type Service, startService } from '../support/helpers.js';
import { introspectFixture, type Run } from '../support/music-store.js';
import { checkTrackTagReferences } from '../support/references.js';

const onPostgres = suite<{ run: Run; service: Service }>('an introspected schema on PostgreSQL');

onPostgres.before(async (ctx) => {
  ctx.run = await introspectFixture();
  ctx.service = await startService({ schema: ctx.run.schema, migrationsFolder: ctx.run.out, pgMigrationsFolder: `${ctx.run.out}/pg` });
  // The database starts empty, and two references are beyond what the checker can guess: Invoice.CurrencyCode
  // defaults to 'USD', and TrackTag's (Kind, Label) names a Tag. One element each gives it values to start from.
  const seed = async (path: string, body: Record<string, unknown>) => {
    const reply = await ctx.service.request('POST', path, { body });
    assert.is(reply.status, 201, `${path}: ${reply.text}`);
    return reply.body;
  };
  await seed('/Currency', { code: 'USD', name: 'US dollar', rate: 1 });
  const mediaType = await seed('/MediaType', { name: 'MPEG audio file' });
  const track = await seed('/Track', { name: 'Song', mediaTypeId: mediaType.mediaTypeId, milliseconds: 1000, unitPrice: '0.99' });
  await seed('/Tag', { kind: 'genre', label: 'rock' });
  await seed('/TrackTag', { trackId: track.trackId, kind: 'genre', label: 'rock' });
});

onPostgres.after(async (ctx) => {
  await ctx.service?.close();
  ctx.run?.remove();
});

onPostgres('every path of every kind passes the contract checker', async ({ service }) => {
  assert.is(service.backend, 'postgres');
  // Every table, view and column of the schema is in the database (mixed-case names, views: no false alarm).
  const ready = await service.request('GET', '/readyz');
  assert.is(ready.status, 200, ready.text);
  const doc = (await service.request('GET', '/openapi.json')).body;
  const report = await checkContract(service.url, doc);
  assert.equal(
    report.probes.filter((p) => !p.ok),
    [],
  );
  assert.ok(report.passed > 300, `${report.passed} probes`);
});

onPostgres('a write whose foreign key of two columns names no element is a 422 naming both fields, as on SQLite', async ({ service }) => {
  await checkTrackTagReferences(service);
});

onPostgres(
  'DATE and DATETIME columns hold the text SQLite would: the same refusals, text comparisons and CURRENT_TIMESTAMP format',
  async ({ service }) => {
    const tag = await service.request('POST', '/Tag', { body: { kind: 'era', label: 'now' } });
    assert.is(tag.status, 201, tag.text);
    const track = (await service.request('GET', '/Track?limit=1')).body[0];
    const added = await service.request('POST', '/TrackTag', { body: { trackId: track.trackId, kind: 'era', label: 'now' } });
    assert.is(added.status, 201, added.text);
    assert.match(added.body.addedAt, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/, "SQLite's CURRENT_TIMESTAMP format, in UTC");
    assert.ok(Math.abs(Date.parse(`${added.body.addedAt.replace(' ', 'T')}Z`) - Date.now()) < 60_000, added.body.addedAt);

    const year = await service.request('POST', '/Employee', { body: { lastName: 'Year', firstName: 'Only', birthDate: '2009' } });
    assert.is(year.status, 201, year.text);
    assert.is(year.body.birthDate, '2009');
    const other = await service.request('POST', '/Employee', {
      body: { lastName: 'Date', firstName: 'Full', birthDate: '1962-02-18 00:00:00' },
    });
    assert.is(other.status, 201, other.text);
    for (const value of ['02134', '1.50', ' 12 ', '1e3', '-0']) {
      const reply = await service.request('PATCH', year.headers.get('location') as string, { body: { birthDate: value } });
      assert.is(reply.status, 422, `${value}: ${reply.text}`);
    }
    const count = async (query: string) =>
      (await service.request('GET', `/Employee?${query}&count=true&limit=1`)).headers.get('x-total-count');
    assert.is(await count('birthDate[gt]=1970'), '1');
    assert.is(await count('birthDate[lt]=1970'), '1');
    assert.is(await count('birthDate=2009'), '1');
    assert.is(await count('birthDate=02009'), '0');
  },
);

onPostgres('composite text keys, NUMERIC, BLOB and untyped values, read-only kinds', async ({ service }) => {
  const tag = await service.request('POST', '/Tag', { body: { kind: 'mood, 100%', label: 'loud/ü', description: null } });
  assert.is(tag.status, 201, tag.text);
  const location = tag.headers.get('location') as string;
  assert.is(location, `/Tag/${encodeURIComponent('mood, 100%')},${encodeURIComponent('loud/ü')}`);
  const read = await service.request('GET', location);
  assert.equal(read.body, { kind: 'mood, 100%', label: 'loud/ü', description: null });
  const stale = await service.request('PATCH', location, { body: { description: 'x' }, headers: { 'If-Match': '"stale"' } });
  assert.is(stale.status, 412);
  assert.is((await service.request('DELETE', location)).status, 204);
  assert.is((await service.request('GET', location)).status, 404);

  const employee = await service.request('POST', '/Employee', {
    body: { lastName: 'Adams', firstName: 'Andrew', photo: Buffer.from('photo').toString('base64') },
  });
  assert.is(employee.status, 201, employee.text);
  assert.is(employee.body.photo, Buffer.from('photo').toString('base64'));
  const rows = await service.sql('SELECT "Photo" FROM "Employee" WHERE "EmployeeId" = $1', [employee.body.employeeId]);
  assert.equal(rows[0]?.Photo, Buffer.from('photo'));

  // Strings that read as JSON stay strings ("1" is not the number 1).
  for (const value of [42, 'text', '02134', '1', 'true', '{"a":1}']) {
    const setting = await service.request('POST', '/Setting', { body: { name: `s-${String(value)}`, value } });
    assert.is(setting.status, 201, setting.text);
    assert.is((await service.request('GET', setting.headers.get('location') as string)).body.value, value);
  }
  const ticketPaths = Object.keys((await service.request('GET', '/openapi.json')).body.paths).filter((p) =>
    p.startsWith('/Employee/{id}/Ticket'),
  );
  assert.is(ticketPaths.length, 2);
  assert.is((await service.request('POST', '/PlayLog', { body: {} })).headers.get('allow'), 'GET, HEAD, OPTIONS');
  assert.is((await service.request('GET', '/AlbumSummary')).status, 200);
});

onPostgres(
  'a foreign key checked at commit (DEFERRABLE INITIALLY DEFERRED) refuses a write as an immediate one does',
  async ({ service }) => {
    const [constraint] = await service.sql(
      `SELECT conname AS name FROM pg_constraint WHERE conrelid = '"Track"'::regclass AND contype = 'f'
       AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = '"Track"'::regclass AND attname = 'MediaTypeId')]`,
    );
    const name = `"${constraint?.name as string}"`;
    await service.sql(`ALTER TABLE "Track" ALTER CONSTRAINT ${name} DEFERRABLE INITIALLY DEFERRED`);
    try {
      const body = { name: 'Deferred', mediaTypeId: 987654, milliseconds: 1, unitPrice: '0.99' };
      const alone = await service.request('POST', '/Track', { body });
      assert.is(alone.status, 422, alone.text);
      assert.equal(alone.body.errors, [{ path: 'mediaTypeId', message: 'names no MediaType element' }]);
      const batch = await service.request('POST', '/_batch', {
        body: {
          operations: [
            { method: 'POST', path: '/Genre', body: { name: 'Deferred genre' } },
            { method: 'POST', path: '/Track', body },
          ],
        },
      });
      assert.is(batch.status, 422, batch.text);
      assert.match(batch.body.detail, /foreign key that the database checks when it commits/);
      assert.is((await service.request('GET', '/Genre?name=Deferred%20genre&count=true')).headers.get('x-total-count'), '0');
    } finally {
      await service.sql(`ALTER TABLE "Track" ALTER CONSTRAINT ${name} NOT DEFERRABLE`);
    }
  },
);

onPostgres.run();

namedChecksSuite('CHECKs declared by name in the schema (PostgreSQL)');

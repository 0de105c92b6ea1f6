// Property-based hostile input (fast-check): random methods, paths, query strings, headers and
// bodies never get a 5xx or a glimpse of internals, and leave a database that is intact and valid.
import { request as httpRequest } from 'node:http';
import { getTableColumns, getTableName } from 'drizzle-orm';
import type { SQLiteTable } from 'drizzle-orm/sqlite-core';
import { createSelectSchema } from 'drizzle-zod';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRegistry } from '../../src/model/registry.js';
import * as schema from '../pet-shop/schema.js';
import { petSample, userSample } from '../support/fixtures.js';
import { BACKEND, type Service, startService } from '../support/helpers.js';

/**
 * Text that only the server's internals could put in a body (input echoes cannot produce these):
 * stack frames, driver error names, and PostgreSQL's own constraint messages.
 */
const LEAK =
  /\n\s+at |SqliteError|DrizzleQueryError|node_modules|\.ts:\d+|\.js:\d+|violates (?:unique|foreign key|not-null|check) constraint/;

interface Attempt {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

function send(base: string, { method, path, headers, body }: Attempt): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    // A body is always framed (Content-Length): Node's client sends an unframed GET body raw, which
    // the server then reads as the start of a next request and rightly rejects as malformed.
    const framed = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = httpRequest(`${base}${path}`, { method, headers: framed }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const segment = fc.oneof(
  fc.constantFrom(
    'users',
    'pets',
    'orders',
    'healthz',
    'readyz',
    '',
    '1',
    '2',
    '3',
    '999',
    '-1',
    '0',
    'abc',
    '1.5',
    '..',
    '%00',
    '%ZZ',
    '%2F',
    '%C3%BC',
    'USERS',
  ),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
);
const path = fc.array(segment, { minLength: 0, maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
const queryName = fc.oneof(
  fc.constantFrom(
    'limit',
    'cursor',
    'sort',
    'count',
    'name',
    'email',
    'id[gt]',
    'id[in]',
    'ownerId[null]',
    'name[contains]',
    'species[ne]',
    'x[y][z]',
    '__proto__',
  ),
  fc.string({ maxLength: 10 }),
);
const queryValue = fc.oneof(
  fc.constantFrom('1', '0', '-1', '1000', '1001', 'true', 'name,-id', '%', '_', 'a,b', ''),
  fc.string({ maxLength: 20 }),
);
const query = fc
  .array(fc.tuple(queryName, queryValue), { maxLength: 4 })
  .map((pairs) => (pairs.length ? `?${new URLSearchParams(pairs)}` : ''));
const headerValue = fc.string({ maxLength: 40, unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) });
const headers = fc.record(
  {
    'content-type': fc.oneof(
      fc.constantFrom(
        'application/json',
        'application/merge-patch+json',
        'application/json; charset=latin1',
        'text/plain',
        'application/xml',
        ';;;',
      ),
      headerValue,
    ),
    accept: fc.oneof(fc.constantFrom('application/json', '*/*', 'text/html', 'application/problem+json', ''), headerValue),
    'if-match': fc.oneof(fc.constant('*'), headerValue),
    'if-none-match': fc.oneof(fc.constant('*'), headerValue),
    'idempotency-key': headerValue,
    'x-request-id': headerValue,
    authorization: headerValue,
    origin: headerValue,
  },
  { requiredKeys: [] },
);
const field = fc.oneof(fc.jsonValue(), fc.integer(), fc.constant(null), fc.string(), fc.constantFrom('cat', 'dog', 'placed', 1, 2, 3));
const resourceBody = fc.record(
  {
    id: field,
    name: field,
    email: field,
    species: field,
    ownerId: field,
    userId: field,
    petId: field,
    status: field,
    quantity: field,
    createdAt: field,
    extra: field,
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  resourceBody.map((b) => JSON.stringify(b)),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 60 }),
  fc.constant(undefined),
);
const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND', 'LINK', 'FOO');
const attempt = fc.record({ method, path: fc.tuple(path, query).map(([p, q]) => p + q), headers, body });

const test = suite<{ service: Service }>('hostile input');

test.before(async (ctx) => {
  ctx.service = await startService();
  const s = ctx.service;
  for (let i = 0; i < 3; i++) {
    const user = await s.request('POST', '/users', { body: userSample() });
    const pet = await s.request('POST', `/users/${user.body.id}/pets`, { body: petSample() });
    await s.request('POST', '/orders', { body: { userId: user.body.id, petId: pet.body.id } });
  }
});
test.after(async ({ service }) => service.close());

test('random requests never get a 5xx or leak internals', async ({ service }) => {
  await fc.assert(
    fc.asyncProperty(attempt, async (a) => {
      const { status, text } = await send(service.url, a);
      if (status >= 500) throw new Error(`${a.method} ${a.path} → ${status}: ${text}`);
      if (LEAK.test(text)) throw new Error(`${a.method} ${a.path} leaked: ${text}`);
    }),
    { numRuns: 1000 },
  );
});

test('writes aimed at real elements with hostile bodies never get a 5xx', async ({ service }) => {
  const target = fc.tuple(fc.constantFrom('users', 'pets', 'orders'), fc.constantFrom('', '/1', '/2', '/3', '/1/pets', '/1/orders'));
  const write = fc.record({
    method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
    path: target.map(([kind, rest]) => `/${kind}${rest}`),
    headers: fc.constantFrom({ 'content-type': 'application/json' }, { 'content-type': 'application/merge-patch+json' }),
    body: resourceBody.map((b) => JSON.stringify(b)),
  });
  await fc.assert(
    fc.asyncProperty(write, async (a) => {
      const { status, text } = await send(service.url, a);
      if (status >= 500 || LEAK.test(text)) throw new Error(`${a.method} ${a.path} ${a.body} → ${status}: ${text}`);
    }),
    { numRuns: 1000 },
  );
});

// SQLite only: PRAGMA integrity_check and foreign_key_check are SQLite's (PostgreSQL enforces foreign keys itself).
(BACKEND === 'sqlite' ? test : test.skip)(
  'afterwards the SQLite file passes integrity_check and foreign_key_check (SQLite only)',
  async ({ service }) => {
    const { sqlite } = service.database;
    assert.is(sqlite.pragma('integrity_check', { simple: true }), 'ok');
    assert.equal(sqlite.pragma('foreign_key_check'), []);
  },
);

test('afterwards every row still fits its schema', async ({ service }) => {
  for (const resource of createRegistry(schema).resources) {
    const table = resource.table as SQLiteTable;
    const rowSchema = createSelectSchema(table);
    // Read as drizzle reads a row: each column by its SQL name, decoded by its column, under its field key.
    const columns = Object.entries(getTableColumns(table));
    for (const raw of await service.sql(`SELECT * FROM "${getTableName(table)}"`)) {
      const row = Object.fromEntries(
        columns.map(([key, column]) => [key, raw[column.name] === null ? null : column.mapFromDriverValue(raw[column.name])]),
      );
      const result = rowSchema.safeParse(row);
      assert.ok(result.success, `${resource.name} ${JSON.stringify(row)}`);
    }
  }
  assert.is((await service.request('GET', '/healthz')).status, 200);
  assert.is((await service.request('GET', '/readyz')).status, 200);
});

test.run();

// The contract checker against the real service (every pair passes) and against deliberately
// non-conforming servers (a proxy that answers 404 where 405 is due, drops Allow, or breaks the
// change feed); and the JSON Schema checks it holds bodies to.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { numeric, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkContract, formatReport } from '../../src/contract/checker.js';
import { schemaChecker } from '../../src/contract/schemas.js';
import * as petShop from '../pet-shop/schema.js';
import { type Service, startService } from '../support/helpers.js';

type Fault =
  | 'notFoundFor405'
  | 'dropAllow'
  | 'created200'
  | 'feedIgnoresBounds'
  | 'feedMisnamesOp'
  | 'feedAlwaysStreams'
  | 'feedStreamsNoEvent'
  | 'ticketWithoutExpiry';

/** A proxy in front of the service that breaks the contract in one way. Event streams pass as they come. */
async function faultyProxy(target: string, fault: Fault): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
    ) as Record<string, string>;
    const feed = /^\/_changes\/?(\?|$)/.test(req.url ?? '');
    if (fault === 'feedAlwaysStreams' && feed) headers.accept = 'text/event-stream';
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    try {
      const upstream = await fetch(target + req.url, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
        signal: gone.signal,
      });
      const out = Object.fromEntries(upstream.headers);
      delete out['content-length'];
      delete out['content-encoding'];
      let status = upstream.status;
      if (fault === 'notFoundFor405' && status === 405 && req.url?.startsWith('/pets')) status = 404;
      if (fault === 'dropAllow' && status === 405 && req.url === '/users') delete out.allow;
      if (fault === 'created200' && status === 201 && req.url === '/orders') status = 200;
      if (fault === 'feedIgnoresBounds' && status === 400 && feed) status = 200;
      res.writeHead(status, out);
      if (out['content-type']?.startsWith('text/event-stream') && upstream.body) {
        // Heartbeats only, for the stream that never sends an event.
        for await (const chunk of upstream.body) res.write(fault === 'feedStreamsNoEvent' ? ':\n\n' : chunk);
        res.end();
        return;
      }
      let body = Buffer.from(await upstream.arrayBuffer());
      if (fault === 'feedMisnamesOp' && feed) body = Buffer.from(body.toString().replaceAll('"op":"create"', '"op":"made"'));
      if (fault === 'ticketWithoutExpiry' && req.url === '/_changes/ticket')
        body = Buffer.from(body.toString().replace(/,"expiresAt":"[^"]*"/, ''));
      res.end(body);
    } catch {
      res.destroy(); // the client left (a stream it stopped reading)
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const test = suite<{ service: Service; doc: Record<string, any> }>('contract checker');

test('passes on a kind whose key is a NUMERIC value the client gives (a new key for every create)', async () => {
  const prices = sqliteTable('Prices', { key: numeric('Key').primaryKey(), note: text('Note') });
  const service = await startService({
    schema: { ...petShop, prices },
    prepare: ({ sqlite }) => sqlite.exec('CREATE TABLE "Prices" ("Key" NUMERIC PRIMARY KEY, "Note" TEXT)'),
  });
  try {
    const report = await checkContract(service.url, (await service.request('GET', '/openapi.json')).body);
    assert.is(report.failed, 0, formatReport(report));
    assert.ok(report.probes.some((p) => p.path.startsWith('/Prices')));
  } finally {
    await service.close();
  }
});

test.before(async (ctx) => {
  ctx.service = await startService();
  ctx.doc = (await ctx.service.request('GET', '/openapi.json')).body;
});
test.after(async ({ service }) => service.close());

test('passes every pair against the service itself, and cleans up what it made', async ({ service, doc }) => {
  const report = await checkContract(service.url, doc);
  assert.is(report.failed, 0, formatReport(report));
  const pairs = new Set(report.probes.map((p) => `${p.method} ${p.path}`));
  for (const pair of [
    'PUT /users',
    'POST /users/{id}',
    'DELETE /users/{id}/pets',
    'GET /pets/{missing}',
    'POST /users/{missing}/orders',
    'DELETE /orders/{id}',
    'GET /_changes',
    'GET [paging] /_changes',
    'GET [since=-1] /_changes',
    'GET [limit=1001] /_changes',
    'GET [Accept: image/png] /_changes',
    'GET [event-stream] /_changes',
    'HEAD [event-stream] /_changes',
    'GET /_changes/ticket',
    'POST /_changes/ticket',
  ]) {
    assert.ok(pairs.has(pair), pair);
  }
  for (const kind of ['users', 'pets', 'orders']) {
    assert.is((await service.request('GET', `/${kind}?count=true`)).headers.get('x-total-count'), '0', kind);
  }
  assert.match(formatReport(report), /contract: \d+ pairs checked, \d+ passed, 0 failed$/);
});

for (const [fault, pair] of [
  ['notFoundFor405', /^\/pets\s+PUT\s+405 Allow: GET, HEAD, OPTIONS, POST\s+404 .*FAIL$/m],
  ['dropAllow', /^\/users\s+DELETE\s+405 Allow: GET, HEAD, OPTIONS, POST\s+405 Allow: -\s+FAIL$/m],
  ['created200', /^\/orders\s+POST\s+201\s+200\s+FAIL$/m],
  ['feedIgnoresBounds', /^\/_changes\s+GET \[since=-1\]\s+400\s+200\s+FAIL$/m],
  [
    'feedMisnamesOp',
    /^\/_changes\s+GET\s+200 application\/json, valid\s+200 application\/json, \/0\/op: must be equal to one of the allowed values.*FAIL$/m,
  ],
  // An event stream where JSON was asked for: never read (it has no end), a failure.
  ['feedAlwaysStreams', /^\/_changes\s+GET\s+200 application\/json, valid\s+200 text\/event-stream, .*FAIL$/m],
  [
    'feedStreamsNoEvent',
    /^\/_changes\s+GET \[event-stream\]\s+200 text\/event-stream, event \d+ \w+ .*\s+200 text\/event-stream, no event within 2000 ms\s+FAIL$/m,
  ],
  // Any body the document gives a schema for is held to it.
  ['ticketWithoutExpiry', /^\/_changes\/ticket\s+GET\s+200\s+200, \/: must have required property 'expiresAt'\s+FAIL$/m],
] as const) {
  test(`fails, naming the pair, against a server that breaks the contract (${fault})`, async ({ service, doc }) => {
    const proxy = await faultyProxy(service.url, fault);
    try {
      // A stream that sends no event is given 2 s (the default is 10 s).
      const report = await checkContract(proxy.url, doc, fault === 'feedStreamsNoEvent' ? { timeoutMs: 2000 } : {});
      assert.ok(report.failed > 0);
      assert.match(formatReport(report), pair);
    } finally {
      await proxy.close();
    }
  });
}

test.run();

const schemas = suite('JSON Schema checks of the contract checker (Ajv, 2020-12)');

/** A small OpenAPI 3.1 document with the shapes the generated one has: elements, a change feed, a ticket. */
const doc = {
  openapi: '3.1.0',
  info: { title: 'schemas', version: '1' },
  paths: {
    '/pets/{id}': {
      get: {
        responses: {
          '200': { description: 'a pet', content: { 'application/json': { schema: { $ref: '#/components/schemas/pets' } } } },
        },
      },
    },
    '/pets': {
      get: {
        responses: {
          '200': {
            description: 'pets',
            content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/pets' } } } },
          },
        },
      },
    },
  },
  components: {
    schemas: {
      pets: {
        type: 'object',
        required: ['id', 'name', 'species', 'createdAt'],
        additionalProperties: false,
        properties: {
          id: { type: 'integer', minimum: 1, readOnly: true, example: 7 },
          name: { type: 'string', minLength: 1, maxLength: 20 },
          species: { type: 'string', enum: ['cat', 'dog'] },
          weight: { type: ['number', 'null'], minimum: 0, maximum: 100 },
          createdAt: { type: 'string', format: 'date-time' },
          owner: { $ref: '#/components/schemas/users' },
        },
      },
      users: {
        type: 'object',
        required: ['id', 'email'],
        properties: { id: { type: 'integer' }, email: { type: 'string' } },
      },
      change: {
        type: 'object',
        required: ['seq', 'kind', 'op'],
        properties: { seq: { type: 'integer', minimum: 1 }, kind: { type: 'string' }, op: { enum: ['create', 'update', 'delete'] } },
        discriminator: { propertyName: 'kind' },
        oneOf: [
          { properties: { kind: { const: 'pets' }, element: { $ref: '#/components/schemas/pets' } } },
          { properties: { kind: { const: 'users' }, element: { $ref: '#/components/schemas/users' } } },
        ],
      },
      either: { oneOf: [{ type: 'integer' }, { type: 'number' }] },
    },
  },
} as const;
const check = schemaChecker(doc);
const pet = { id: 1, name: 'Rex', species: 'dog', weight: null, createdAt: '2025-01-02T03:04:05.678Z' };
const one = doc.paths['/pets/{id}'].get.responses['200'].content['application/json'].schema;
const list = doc.paths['/pets'].get.responses['200'].content['application/json'].schema;
const { pets, change, either } = doc.components.schemas;

/** Asserts that `errors` has one at `path` whose message matches `message`. */
function flags(errors: string[], path: string, message: RegExp) {
  assert.ok(
    errors.some((error) => error.startsWith(`${path}: `) && message.test(error.slice(path.length + 2))),
    `expected an error at ${path} matching ${message}, got ${JSON.stringify(errors)}`,
  );
}

schemas('a conforming value gives no errors (annotations such as example, readOnly and discriminator pass)', () => {
  assert.equal(check(one, pet), []);
  assert.equal(check(pets, { ...pet, owner: { id: 2, email: 'a@b.c' } }), []);
  assert.equal(check(list, [pet, { ...pet, id: 2, weight: 12.5 }]), []);
  assert.equal(check(change, { seq: 3, kind: 'pets', op: 'create', element: pet }), []);
  assert.equal(check(either, 1.5), []);
  assert.equal(check(undefined, 'no schema documented'), []);
});

schemas('wrong types, out of range, enums', () => {
  flags(check(pets, { ...pet, id: 'x' }), '/id', /integer/);
  flags(check(pets, { ...pet, id: 1.5 }), '/id', /integer/);
  flags(check(pets, { ...pet, name: 3 }), '/name', /string/);
  flags(check(list, { ...pet }), '/', /array/);
  flags(check(pets, { ...pet, id: 0 }), '/id', />= 1/);
  flags(check(pets, { ...pet, weight: 101 }), '/weight', /<= 100/);
  flags(check(pets, { ...pet, name: '' }), '/name', /fewer than 1/);
  flags(check(pets, { ...pet, species: 'fish' }), '/species', /allowed values/);
});

schemas('missing required and additional properties', () => {
  const { name: _name, ...nameless } = pet;
  flags(check(pets, nameless), '/', /required property 'name'/);
  flags(check(pets, { ...pet, colour: 'brown' }), '/', /additional properties/);
});

schemas('date-times are RFC 3339 (ajv-formats)', () => {
  assert.equal(check(pets, { ...pet, createdAt: '2025-01-02T03:04:05+01:00' }), []);
  for (const value of ['2025-01-02', '2025-13-02T03:04:05Z', 'yesterday']) {
    flags(check(pets, { ...pet, createdAt: value }), '/createdAt', /date-time/);
  }
});

schemas("$ref'd components: a schema that is a ref, refs nested in inline schemas, refs inside components", () => {
  flags(check(one, { ...pet, id: 'x' }), '/id', /integer/);
  flags(check(list, [pet, { ...pet, species: 'fish' }]), '/1/species', /allowed values/);
  flags(check(pets, { ...pet, owner: { id: 2 } }), '/owner', /required property 'email'/);
  flags(check(change, { seq: 3, kind: 'pets', op: 'create', element: { ...pet, id: 'x' } }), '/element/id', /integer/);
  // A schema from outside the document: its `#/...` references point into the document.
  flags(check({ type: 'array', items: { $ref: '#/components/schemas/pets' } }, [{ ...pet, id: 'x' }]), '/0/id', /integer/);
  // Each path is an RFC 6901 pointer.
  flags(check({ type: 'object', properties: { 'x/y': { type: 'string' } } }, { 'x/y': 1 }), '/x~1y', /string/);
});

schemas('oneOf: none or more than one variant matching is an error', () => {
  const errors = check(change, { seq: 3, kind: 'fish', op: 'create' });
  flags(errors, '/', /exactly one schema in oneOf/);
  flags(errors, '/kind', /constant/);
  flags(check(change, { seq: 0, kind: 'users', op: 'made' }), '/op', /allowed values/);
  flags(check(change, { seq: 0, kind: 'users', op: 'create' }), '/seq', />= 1/);
  flags(check(either, 1), '/', /exactly one schema in oneOf/);
});

schemas.run();

// The contract checker against the real service (every pair passes) and against deliberately
// non-conforming servers (a proxy that answers 404 where 405 is due, drops Allow, or breaks the
// change feed); and the JSON Schema checks it holds bodies to.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkContract, formatReport } from '../src/contract/checker.js';
import { schemaErrors } from '../src/contract/json-schema.js';
import { type Service, startService } from './helpers.js';

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
  ['feedMisnamesOp', /^\/_changes\s+GET\s+200 application\/json, valid\s+200 application\/json, \/0\/op: must be one of .*FAIL$/m],
  // An event stream where JSON was asked for: never read (it has no end), a failure.
  ['feedAlwaysStreams', /^\/_changes\s+GET\s+200 application\/json, valid\s+200 text\/event-stream, .*FAIL$/m],
  [
    'feedStreamsNoEvent',
    /^\/_changes\s+GET \[event-stream\]\s+200 text\/event-stream, event \d+ \w+ .*\s+200 text\/event-stream, no event within 2000 ms\s+FAIL$/m,
  ],
  // Any body the document gives a schema for is held to it.
  ['ticketWithoutExpiry', /^\/_changes\/ticket\s+GET\s+200\s+200, \/: must have "expiresAt"\s+FAIL$/m],
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

const schemas = suite('JSON Schema checks of the contract checker');

schemas('types, integers, enums, const and bounds', () => {
  assert.equal(schemaErrors({ type: 'integer', minimum: 1, maximum: 3 }, 2), []);
  assert.equal(schemaErrors({ type: 'integer' }, 1.5), ['/: must be integer, not number']);
  assert.equal(schemaErrors({ type: 'integer', minimum: 1 }, 0), ['/: must be ≥ 1']);
  assert.equal(schemaErrors({ type: 'integer', maximum: 3 }, 4), ['/: must be ≤ 3']);
  assert.equal(schemaErrors({ type: ['string', 'null'] }, null), []);
  assert.equal(schemaErrors({ type: 'string' }, 1), ['/: must be string, not number']);
  assert.equal(schemaErrors({ enum: ['create', 'update'] }, 'made'), ['/: must be one of ["create","update"]']);
  assert.equal(schemaErrors({ const: { a: [1] } }, { a: [1] }), []);
  assert.equal(schemaErrors({ const: 'x' }, 'y'), ['/: must be "x"']);
  assert.equal(schemaErrors({ type: 'string', minLength: 2, maxLength: 3, pattern: '^a' }, 'b'), [
    '/: must be at least 2 characters long',
    '/: must match ^a',
  ]);
});

schemas('date-times are RFC 3339', () => {
  assert.equal(schemaErrors({ type: 'string', format: 'date-time' }, '2025-01-02T03:04:05.678Z'), []);
  assert.equal(schemaErrors({ type: 'string', format: 'date-time' }, '2025-01-02T03:04:05+01:00'), []);
  for (const value of ['2025-01-02', '2025-13-02T03:04:05Z', 'yesterday']) {
    assert.equal(schemaErrors({ type: 'string', format: 'date-time' }, value), ['/: must be an RFC 3339 date-time'], value);
  }
});

schemas('objects and arrays, each error at its JSON pointer', () => {
  const schema = {
    type: 'object',
    required: ['a', 'b'],
    additionalProperties: false,
    properties: { a: { type: 'array', items: { type: 'integer' }, maxItems: 2 }, 'x/y': { type: 'string' } },
  };
  assert.equal(schemaErrors(schema, { a: [1], b: 2 }), ['/b: no value is allowed here']);
  assert.equal(schemaErrors(schema, { a: [1, 'two', 3], 'x/y': 1 }), [
    '/: must have "b"',
    '/a: must have at most 2 items',
    '/a/1: must be integer, not string',
    '/x~1y: must be string, not number',
  ]);
  const pair = { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], minItems: 2, maxItems: 2 };
  assert.equal(schemaErrors(pair, ['a', 1]), []);
  assert.equal(schemaErrors(pair, [1, 'a']), ['/0: must be string, not number', '/1: must be integer, not string']);
  assert.equal(schemaErrors({ type: 'array', uniqueItems: true }, [{ a: 1 }, { a: 1 }]), ['/: must not repeat an item']);
});

schemas('$ref through the resolver; anyOf, oneOf (exactly one) and allOf', () => {
  const doc = { components: { schemas: { id: { type: 'integer' } } } } as Record<string, any>;
  const resolve = (node: any) => (node?.$ref ? doc.components.schemas[node.$ref.split('/').pop()] : node);
  const id = { $ref: '#/components/schemas/id' };
  assert.equal(schemaErrors({ type: 'array', items: id }, [1, 'x'], resolve), ['/1: must be integer, not string']);
  assert.equal(schemaErrors({ anyOf: [id, { type: 'null' }] }, null, resolve), []);
  // None matches: the closest branch says why.
  assert.equal(schemaErrors({ oneOf: [{ type: 'object', required: ['a'] }, { type: 'string' }] }, {}, resolve), ['/: must have "a"']);
  assert.equal(schemaErrors({ oneOf: [{ type: 'integer' }, { type: 'number' }] }, 1), [
    '/: must match exactly one of the oneOf schemas, not 2',
  ]);
  assert.equal(schemaErrors({ allOf: [{ minimum: 1 }, { maximum: 0 }] }, 1), ['/: must be ≤ 0']);
  assert.equal(schemaErrors({ not: { type: 'null' } }, null), ['/: must not match the not schema']);
  assert.equal(schemaErrors({ description: 'annotations only', readOnly: true, example: 1 }, 'anything'), []);
});

schemas.run();

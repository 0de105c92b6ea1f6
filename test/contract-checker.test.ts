// The contract checker against the real service (every pair passes) and against deliberately
// non-conforming servers (a proxy that answers 404 where 405 is due, or drops Allow).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkContract, formatReport } from '../src/contract/checker.js';
import { type Service, startService } from './helpers.js';

type Fault = 'notFoundFor405' | 'dropAllow' | 'created200';

/** A proxy in front of the service that breaks the contract in one way. */
async function faultyProxy(target: string, fault: Fault): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
    ) as Record<string, string>;
    const upstream = await fetch(target + req.url, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    const out = Object.fromEntries(upstream.headers);
    delete out['content-length'];
    delete out['content-encoding'];
    let status = upstream.status;
    if (fault === 'notFoundFor405' && status === 405 && req.url?.startsWith('/pets')) status = 404;
    if (fault === 'dropAllow' && status === 405 && req.url === '/users') delete out.allow;
    if (fault === 'created200' && status === 201 && req.url === '/orders') status = 200;
    res.writeHead(status, out);
    res.end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
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
] as const) {
  test(`fails, naming the pair, against a server that breaks the contract (${fault})`, async ({ service, doc }) => {
    const proxy = await faultyProxy(service.url, fault);
    try {
      const report = await checkContract(proxy.url, doc);
      assert.ok(report.failed > 0);
      assert.match(formatReport(report), pair);
    } finally {
      await proxy.close();
    }
  });
}

test.run();

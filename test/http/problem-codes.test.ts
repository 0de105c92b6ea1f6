// Problem codes (docs/http-api.md#problem-codes): a representative error of each class, provoked over
// HTTP, carries its stable `code` after `instance`; the OpenAPI Problem enum and the docs list every code.

import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { PROBLEM_CODES, type ProblemCode } from '../../src/problem-codes.js';
import { created, petSample, userSample } from '../support/fixtures.js';
import { BACKEND, type Reply, ROOT, type Service, startService } from '../support/helpers.js';

type Ctx = { service: Service };
function withService(name: string, env?: Record<string, string>) {
  const test = suite<Ctx>(name);
  test.before(async (ctx) => {
    ctx.service = await startService({ env });
  });
  test.after(async ({ service }) => service.close());
  return test;
}

/** The members of a problem body, in the order they are sent. */
const MEMBERS = ['type', 'title', 'status', 'detail', 'instance', 'code'];

/** Asserts that `body` (a parsed problem) names `code`, with the status the table gives it, after `instance`. */
function assertProblem(body: Record<string, unknown>, code: ProblemCode, text = JSON.stringify(body)): void {
  assert.is(body.code, code, text);
  assert.is(body.status, PROBLEM_CODES[code], text);
  assert.equal(Object.keys(body).slice(0, MEMBERS.length), MEMBERS, text);
}

const expectCode = (reply: Reply, code: ProblemCode) => {
  assert.is(reply.status, PROBLEM_CODES[code], reply.text);
  assertProblem(reply.body, code, reply.text);
};

/** Sends raw bytes on a new connection; the status and parsed body of the first answer (the server closes after these). */
function raw(url: string, data: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1', () => socket.write(data));
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
    });
    socket.on('end', () => {
      const [head = '', body = ''] = received.split('\r\n\r\n', 2);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0), body: JSON.parse(body) });
    });
    socket.on('error', reject);
  });
}

const rawExpect = async (service: Service, data: string, code: ProblemCode) => {
  const reply = await raw(service.url, data);
  assert.is(reply.status, PROBLEM_CODES[code], JSON.stringify(reply.body));
  assertProblem(reply.body, code);
};

const codes = withService('problem codes');

codes(
  'the HTTP message: bad-request, http-version-not-supported, not-implemented, expectation-failed, headers-too-large',
  async ({ service }) => {
    await rawExpect(service, 'GET /users HTTP/1.1\r\nConnection: close\r\n\r\n', 'bad-request'); // no Host
    await rawExpect(service, 'NOT A REQUEST\r\n\r\n', 'bad-request'); // the parser's own 400
    await rawExpect(service, 'GET /users HTTP/3.0\r\nHost: x\r\n\r\n', 'http-version-not-supported');
    await rawExpect(service, 'POST /users HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n', 'not-implemented');
    await rawExpect(service, 'GET /users HTTP/1.1\r\nHost: x\r\nExpect: later\r\nConnection: close\r\n\r\n', 'expectation-failed');
    await rawExpect(service, `GET /users HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 'headers-too-large');
    await rawExpect(service, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 'method-not-allowed');
  },
);

codes('routes: no-route, not-found, method-not-allowed, not-acceptable', async ({ service }) => {
  expectCode(await service.request('GET', '/nothing-here'), 'no-route');
  expectCode(await service.request('GET', '/users/999999'), 'not-found');
  expectCode(await service.request('DELETE', '/users'), 'method-not-allowed');
  expectCode(await service.request('GET', '/users', { headers: { accept: 'text/csv' } }), 'not-acceptable');
});

codes('bodies: bad-json, unsupported-media-type, payload-too-large, validation', async ({ service }) => {
  expectCode(await service.request('POST', '/users', { raw: '{', headers: { 'content-type': 'application/json' } }), 'bad-json');
  expectCode(await service.request('POST', '/users', { raw: '', headers: { 'content-type': 'application/json' } }), 'bad-json');
  expectCode(await service.request('POST', '/users', { raw: '{}', headers: { 'content-type': 'text/plain' } }), 'unsupported-media-type');
  const big = JSON.stringify({ name: 'a'.repeat(2 * 1024 * 1024) });
  expectCode(await service.request('POST', '/users', { raw: big, headers: { 'content-type': 'application/json' } }), 'payload-too-large');
  expectCode(await service.request('POST', '/users', { body: { nonsense: 1 } }), 'validation');
});

codes('queries: bad-query, bad-cursor', async ({ service }) => {
  expectCode(await service.request('GET', '/users?limit=abc'), 'bad-query');
  expectCode(await service.request('GET', '/users?nonsense=1'), 'bad-query');
  expectCode(await service.request('GET', '/healthz?limit=1'), 'bad-query');
  expectCode(await service.request('GET', '/users?cursor=not-a-cursor'), 'bad-cursor');
  // Another error beside the cursor's: the query is wrong, not only the cursor.
  expectCode(await service.request('GET', '/users?cursor=not-a-cursor&limit=abc'), 'bad-query');
});

codes('writes: unique-taken, still-referenced, missing-parent, precondition-failed, idempotency-key-reused', async ({ service }) => {
  const user = userSample();
  assert.is((await service.request('POST', '/users', { body: user })).status, 201);
  expectCode(await service.request('POST', '/users', { body: { ...user, name: 'Other' } }), 'unique-taken');
  const owner = await created(service, '/users', userSample());
  const pet = await created(service, '/pets', petSample());
  assert.is((await service.request('POST', '/orders', { body: { userId: owner, petId: pet } })).status, 201);
  expectCode(await service.request('DELETE', `/users/${owner}`), 'still-referenced');
  expectCode(await service.request('POST', '/orders', { body: { userId: 999999, petId: pet } }), 'missing-parent');
  expectCode(
    await service.request('PUT', `/pets/${pet}`, { body: petSample(), headers: { 'if-match': '"stale"' } }),
    'precondition-failed',
  );
  const key = { 'idempotency-key': 'problem-codes-key' };
  assert.is((await service.request('POST', '/pets', { body: petSample(), headers: key })).status, 201);
  expectCode(await service.request('POST', '/pets', { body: { ...petSample(), name: 'Other' }, headers: key }), 'idempotency-key-reused');
});

codes("bulk elements and batch operations keep their element's code", async ({ service }) => {
  const pet = await created(service, '/pets', petSample());
  const bulk = await service.request('POST', '/orders', { body: [{ userId: 999999, petId: pet }] });
  expectCode(bulk, 'missing-parent');
  assert.equal(bulk.body.errors, [{ path: '0/userId', message: 'names no users element' }], bulk.text);
  expectCode(await service.request('POST', '/users', { body: [userSample(), { nonsense: 1 }] }), 'validation');
  const batch = await service.request('POST', '/_batch', {
    body: {
      operations: [
        { method: 'POST', path: '/users', body: userSample() },
        { method: 'GET', path: '/users/999999' },
      ],
    },
  });
  expectCode(batch, 'not-found');
  assert.is(batch.body.operation, 1, batch.text);
  expectCode(await service.request('POST', '/_batch', { body: { operations: [] } }), 'bad-batch');
});

codes('/_changes: bad-query, not-acceptable', async ({ service }) => {
  expectCode(await service.request('GET', '/_changes?since=abc'), 'bad-query');
  expectCode(await service.request('GET', '/_changes', { headers: { accept: 'text/csv' } }), 'not-acceptable');
});

codes('the OpenAPI Problem schema requires code, with an enum of every code in the table', async ({ service }) => {
  const problem = (await service.request('GET', '/openapi.json')).body.components.schemas.Problem;
  assert.ok(problem.required.includes('code'));
  assert.is(problem.properties.code.type, 'string');
  assert.equal(problem.properties.code.enum, Object.keys(PROBLEM_CODES));
});

codes('docs/http-api.md lists every code with its status, once', () => {
  const docs = readFileSync(join(ROOT, 'docs', 'http-api.md'), 'utf8');
  for (const [code, status] of Object.entries(PROBLEM_CODES)) {
    const rows = docs.split('\n').filter((line) => line.startsWith(`| \`${code}\` |`));
    assert.is(rows.length, 1, `${code}: ${rows.length} rows`);
    assert.ok(rows[0]?.startsWith(`| \`${code}\` | ${status} |`), rows[0]);
  }
});

codes.run();

const guarded = withService('problem codes with authentication', { AUTH_TOKEN: 'f'.repeat(32), AUTH_READ_TOKEN: 'r'.repeat(32) });

guarded('unauthorized, forbidden', async ({ service }) => {
  expectCode(await service.request('GET', '/users'), 'unauthorized');
  expectCode(await service.request('GET', '/users', { headers: { authorization: 'Bearer wrong' } }), 'unauthorized');
  const read = { authorization: `Bearer ${'r'.repeat(32)}` };
  expectCode(await service.request('POST', '/users', { body: userSample(), headers: read }), 'forbidden');
});

guarded.run();

const limited = withService('problem codes with a rate limit', { RATE_LIMIT: '1' });

limited('rate-limited', async ({ service }) => {
  await service.request('GET', '/users');
  expectCode(await service.request('GET', '/users'), 'rate-limited');
});

limited.run();

const broken = withService('problem codes of a closed database');

broken('not-ready, internal', async ({ service }) => {
  if (BACKEND !== 'sqlite') return; // closes the SQLite handle
  service.database.sqlite.close();
  expectCode(await service.request('GET', '/readyz'), 'not-ready');
  expectCode(await service.request('GET', '/users'), 'internal');
});

broken.run();

// Safe clients (API.md §6 and the 401/403/406 rows of §4): ETags and preconditions, Idempotency-Key,
// content negotiation, bearer tokens, CORS, and request hardening, each over real HTTP.

import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { petSample, userSample } from '../support/fixtures.js';
import { BACKEND, type Service, startService } from '../support/helpers.js';

type Ctx = { service: Service };
function withService(name: string, env?: Record<string, string>) {
  const test = suite<Ctx>(name);
  test.before(async (ctx) => {
    ctx.service = await startService({ env });
  });
  test.after(async ({ service }) => service.close());
  return test;
}

// 1. ETags and conditional requests
const etags = withService('ETags and preconditions');

etags('every element response carries the same strong ETag for the same state', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const etag = made.headers.get('etag') as string;
  assert.match(etag, /^"[A-Za-z0-9_-]+"$/);
  const path = made.headers.get('location') as string;
  assert.is((await service.request('GET', path)).headers.get('etag'), etag);
  assert.is((await service.request('HEAD', path)).headers.get('etag'), etag);
  const put = await service.request('PUT', path, { body: made.body });
  assert.ok(put.headers.get('etag'));
  assert.is((await service.request('GET', path)).headers.get('etag'), put.headers.get('etag'));
});

etags('the ETag changes with every change, even two writes in the same millisecond', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const path = made.headers.get('location') as string;
  const seen = new Set([made.headers.get('etag')]);
  const writes = await Promise.all(['a', 'b', 'c', 'd'].map((name) => service.request('PATCH', path, { body: { name } })));
  for (const reply of writes) seen.add(reply.headers.get('etag'));
  assert.is(seen.size, 5);
});

etags('If-None-Match on GET and HEAD answers 304 with the ETag and no body', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const path = made.headers.get('location') as string;
  const etag = made.headers.get('etag') as string;
  for (const value of [etag, `"other", ${etag}`, `W/${etag}`, '*']) {
    for (const method of ['GET', 'HEAD']) {
      const reply = await service.request(method, path, { headers: { 'if-none-match': value } });
      assert.is(reply.status, 304, `${method} ${value}`);
      assert.is(reply.headers.get('etag'), etag);
      assert.is(reply.text, '');
    }
  }
  assert.is((await service.request('GET', path, { headers: { 'if-none-match': '"stale"' } })).status, 200);
});

etags('If-Match on PUT, PATCH and DELETE: 412 on mismatch, and nothing changes', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const path = made.headers.get('location') as string;
  const etag = made.headers.get('etag') as string;
  for (const [method, body] of [
    ['PUT', { ...made.body, name: 'X' }],
    ['PATCH', { name: 'X' }],
    ['DELETE', undefined],
  ] as const) {
    for (const value of ['"stale"', `W/${etag}`, 'garbage']) {
      const reply = await service.request(method, path, { body, headers: { 'if-match': value } });
      assert.is(reply.status, 412, `${method} If-Match: ${value}`);
      assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.is(reply.headers.get('etag'), etag);
    }
  }
  assert.equal((await service.request('GET', path)).body, made.body);
});

etags('If-Match with the current ETag, or *, lets the write through', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const path = made.headers.get('location') as string;
  const patched = await service.request('PATCH', path, {
    body: { name: 'Y' },
    headers: { 'if-match': made.headers.get('etag') as string },
  });
  assert.is(patched.status, 200);
  const put = await service.request('PUT', path, { body: patched.body, headers: { 'if-match': `"nope", ${patched.headers.get('etag')}` } });
  assert.is(put.status, 200);
  assert.is((await service.request('DELETE', path, { headers: { 'if-match': '*' } })).status, 204);
  assert.is((await service.request('DELETE', path, { headers: { 'if-match': '*' } })).status, 404);
});

etags('If-None-Match: * on a write to an existing element is a 412', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample() });
  const reply = await service.request('PUT', made.headers.get('location') as string, {
    body: made.body,
    headers: { 'if-none-match': '*' },
  });
  assert.is(reply.status, 412);
});

etags('two clients racing with the same ETag: exactly one wins', async ({ service }) => {
  for (let round = 0; round < 5; round++) {
    const made = await service.request('POST', '/users', { body: userSample() });
    const path = made.headers.get('location') as string;
    const etag = made.headers.get('etag') as string;
    const replies = await Promise.all(
      ['first', 'second', 'third'].map((name) => service.request('PATCH', path, { body: { name }, headers: { 'if-match': etag } })),
    );
    assert.equal(replies.map((r) => r.status).sort(), [200, 412, 412]);
    const winner = replies.find((r) => r.status === 200);
    assert.equal((await service.request('GET', path)).body, winner?.body);
  }
});

etags.run();

// 2. Idempotency-Key
etags('ETags are the only validators: no Last-Modified, If-(Un)Modified-Since ignored, and Prefer too', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample(), headers: { prefer: 'return=minimal' } });
  assert.is(made.status, 201);
  assert.ok(made.body.id, 'return=minimal still gets the element');
  assert.is(made.headers.get('last-modified'), null);
  const path = made.headers.get('location') as string;
  const future = new Date(Date.now() + 86_400_000).toUTCString();
  const past = new Date(0).toUTCString();
  const read = await service.request('GET', path, { headers: { 'if-modified-since': future } });
  assert.is(read.status, 200);
  assert.is(read.headers.get('last-modified'), null);
  const write = await service.request('PATCH', path, { body: { name: 'Unconditional' }, headers: { 'if-unmodified-since': past } });
  assert.is(write.status, 200);
  assert.is(write.body.name, 'Unconditional');
});

const keys = withService('Idempotency-Key');
const count = async (service: Service, path: string) =>
  Number((await service.request('GET', `${path}?count=true&limit=1`)).headers.get('x-total-count'));

keys('a retry with the same key and body replays the first response and creates nothing', async ({ service }) => {
  const body = userSample();
  const first = await service.request('POST', '/users', { body, headers: { 'idempotency-key': 'retry-1' } });
  assert.is(first.status, 201);
  assert.is(first.headers.get('idempotent-replayed'), null);
  const before = await count(service, '/users');
  const reordered = Object.fromEntries(Object.entries(body).reverse());
  const retry = await service.request('POST', '/users/', { body: reordered, headers: { 'idempotency-key': 'retry-1' } });
  assert.is(retry.status, 201);
  assert.is(retry.text, first.text);
  assert.is(retry.headers.get('location'), first.headers.get('location'));
  assert.is(retry.headers.get('etag'), first.headers.get('etag'));
  assert.is(retry.headers.get('idempotent-replayed'), 'true');
  assert.is(await count(service, '/users'), before);
  // The path spelled with a percent-encoded letter is the same path.
  const encoded = await service.request('POST', '/%75sers', { body, headers: { 'idempotency-key': 'retry-1' } });
  assert.is(encoded.headers.get('idempotent-replayed'), 'true', encoded.text);
  assert.is(encoded.text, first.text);
});

keys('the same key with another body, or on another path, is a 422', async ({ service }) => {
  await service.request('POST', '/users', { body: userSample(), headers: { 'idempotency-key': 'reuse' } });
  const other = await service.request('POST', '/users', { body: userSample(), headers: { 'idempotency-key': 'reuse' } });
  assert.is(other.status, 422);
  assert.match(other.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const elsewhere = await service.request('POST', '/pets', { body: petSample(), headers: { 'idempotency-key': 'reuse' } });
  assert.is(elsewhere.status, 422);
});

keys('concurrent retries of one key create exactly one element', async ({ service }) => {
  const body = userSample();
  const before = await count(service, '/users');
  const replies = await Promise.all(
    Array.from({ length: 12 }, () => service.request('POST', '/users', { body, headers: { 'idempotency-key': 'burst' } })),
  );
  assert.ok(replies.every((r) => r.status === 201));
  assert.is(new Set(replies.map((r) => r.body.id)).size, 1);
  assert.is(replies.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 11);
  assert.is(await count(service, '/users'), before + 1);
});

keys('related POSTs are idempotent too', async ({ service }) => {
  const owner = await service.request('POST', '/users', { body: userSample() });
  const path = `/users/${owner.body.id}/pets`;
  const first = await service.request('POST', path, { body: petSample(), headers: { 'idempotency-key': '"quoted-key"' } });
  const retry = await service.request('POST', path, { body: petSample(), headers: { 'idempotency-key': 'quoted-key' } });
  assert.is(retry.headers.get('idempotent-replayed'), 'true');
  const encoded = await service.request(
    'POST',
    `/users/%${owner.body.id.toString().charCodeAt(0).toString(16)}${String(owner.body.id).slice(1)}/pets`,
    {
      body: petSample(),
      headers: { 'idempotency-key': 'quoted-key' },
    },
  );
  assert.is(encoded.headers.get('idempotent-replayed'), 'true', encoded.text);
  assert.is(retry.body.id, first.body.id);
  assert.is(await count(service, path), 1);
});

keys('a failed first attempt is not stored: the corrected retry creates', async ({ service }) => {
  const bad = await service.request('POST', '/users', { body: { name: 'no email' }, headers: { 'idempotency-key': 'fix-me' } });
  assert.is(bad.status, 422);
  const good = await service.request('POST', '/users', { body: userSample(), headers: { 'idempotency-key': 'fix-me' } });
  assert.is(good.status, 201);
  assert.is(good.headers.get('idempotent-replayed'), null);
});

keys('a malformed key is a 400', async ({ service }) => {
  for (const key of ['', 'x'.repeat(256), 'has space']) {
    const reply = await service.request('POST', '/users', { body: userSample(), headers: { 'idempotency-key': key } });
    assert.is(reply.status, 400, JSON.stringify(key));
  }
});

keys('keys expire after 24 hours and are purged', async ({ service }) => {
  const body = userSample();
  const first = await service.request('POST', '/users', { body, headers: { 'idempotency-key': 'old' } });
  const dayAgo = Date.now() - 24 * 60 * 60 * 1000 - 1;
  await service.sql('UPDATE restable_idempotency_keys SET created_at = $1 WHERE key = $2', [dayAgo, 'old']);
  const again = await service.request('POST', '/users', {
    body: { ...body, email: `x${body.email}` },
    headers: { 'idempotency-key': 'old' },
  });
  assert.is(again.status, 201);
  assert.is.not(again.body.id, first.body.id);
  await service.sql('UPDATE restable_idempotency_keys SET created_at = $1 WHERE key = $2', [dayAgo, 'old']);
  assert.is(await service.app.purgeExpiredKeys(), 1);
  const [left] = await service.sql('SELECT count(*) AS n FROM restable_idempotency_keys WHERE key = $1', ['old']);
  assert.is(left?.n, 0);
});

keys('a client that half-closes its connection once its request is sent still gets the answer of its write', async ({ service }) => {
  // RFC 9112 §9.6 lets a client close its sending side after the request; the answer (a write's, which
  // waits for the database) must still reach it, or it could not know the write was made.
  const body = JSON.stringify(userSample());
  const { port } = new URL(service.url);
  const received = await new Promise<string>((resolve) => {
    const socket = connect(Number(port), '127.0.0.1', () =>
      socket.end(
        `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      ),
    );
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(text));
  });
  assert.match(received, /^HTTP\/1\.1 201 /);
  const location = /\r\nLocation: ([^\r]+)/i.exec(received)?.[1] as string;
  assert.is((await service.request('GET', location)).status, 200);
});

keys.run();

// 3. Content negotiation
const negotiation = withService('content negotiation');

negotiation('an Accept that rules out JSON is a 406 problem, and a POST creates nothing', async ({ service }) => {
  const before = await count(service, '/users');
  for (const [method, path] of [
    ['GET', '/users'],
    ['POST', '/users'],
    ['GET', '/'],
  ] as const) {
    const reply = await service.request(method, path, {
      body: method === 'POST' ? userSample() : undefined,
      headers: { accept: 'text/html' },
    });
    assert.is(reply.status, 406, `${method} ${path}`);
    assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  }
  assert.is(await count(service, '/users'), before);
});

negotiation('Accept headers that allow JSON are served', async ({ service }) => {
  for (const accept of [
    'application/json',
    '*/*',
    'application/*',
    'text/html, application/json;q=0.5',
    'application/json; charset=utf-8',
  ]) {
    assert.is((await service.request('GET', '/users', { headers: { accept } })).status, 200, accept);
  }
});

negotiation('an Accept value answers the same on every path it is sent to, and past the values remembered', async ({ service }) => {
  // The same value allows JSON and the event stream; another allows neither; many distinct values after them.
  const both = 'application/json;q=0.9, text/event-stream';
  for (let round = 0; round < 2; round++) {
    assert.is((await service.request('GET', '/users', { headers: { accept: both } })).status, 200);
    const feed = await service.request('GET', '/_changes?limit=1', { headers: { accept: 'application/json, text/plain;q=0.1' } });
    assert.is(feed.status, 200, feed.text);
    assert.is((await service.request('GET', '/users', { headers: { accept: 'text/event-stream' } })).status, 406);
  }
  for (let i = 0; i < 300; i++) {
    const accept = i % 2 === 0 ? `application/json;q=0.${(i % 9) + 1}, text/x-${i}` : `text/x-${i}`;
    assert.is((await service.request('GET', '/users?limit=1', { headers: { accept } })).status, i % 2 === 0 ? 200 : 406, accept);
  }
});

negotiation.run();

// 4. Authentication
const FULL = 'full-token-0123456789';
const READ = 'read-token-0123456789';
const auth = withService('bearer authentication', { AUTH_TOKEN: FULL, AUTH_READ_TOKEN: READ });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

auth('without a token every resource route and the index are 401 with WWW-Authenticate', async ({ service }) => {
  for (const [method, path] of [
    ['GET', '/'],
    ['GET', '/users'],
    ['POST', '/users'],
    ['GET', '/users/1'],
    ['DELETE', '/users/1'],
    ['GET', '/nope'],
  ] as const) {
    const reply = await service.request(method, path, { body: method === 'POST' ? userSample() : undefined });
    assert.is(reply.status, 401, `${method} ${path}`);
    assert.is(reply.headers.get('www-authenticate'), 'Bearer realm="restable"');
    assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  }
});

auth('a wrong token is 401 invalid_token; /healthz and /readyz stay open', async ({ service }) => {
  for (const header of ['Bearer wrong-token-0123456789', `Basic ${Buffer.from(`u:${FULL}`).toString('base64')}`, `Bearer ${FULL}x`]) {
    const reply = await service.request('GET', '/users', { headers: { authorization: header } });
    assert.is(reply.status, 401, header);
    assert.match(reply.headers.get('www-authenticate') ?? '', /^Bearer realm="restable"/);
    // A wrong bearer token is invalid_token; another scheme presents none, so no error code (RFC 6750 §3.1).
    const error = header.startsWith('Basic') ? undefined : 'invalid_token';
    assert.is(/error="([^"]+)"/.exec(reply.headers.get('www-authenticate') ?? '')?.[1], error, header);
  }
  assert.is((await service.request('GET', '/healthz')).status, 200);
  assert.is((await service.request('GET', '/readyz')).status, 200);
});

auth('the full token may do everything', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample(), headers: bearer(FULL) });
  assert.is(made.status, 201);
  const path = made.headers.get('location') as string;
  assert.is((await service.request('GET', path, { headers: { authorization: `bearer ${FULL}` } })).status, 200);
  assert.is((await service.request('DELETE', path, { headers: bearer(FULL) })).status, 204);
});

auth('the read token may GET, HEAD and OPTIONS; writes are 403', async ({ service }) => {
  const made = await service.request('POST', '/users', { body: userSample(), headers: bearer(FULL) });
  const path = made.headers.get('location') as string;
  assert.is((await service.request('GET', path, { headers: bearer(READ) })).status, 200);
  assert.is((await service.request('HEAD', '/users', { headers: bearer(READ) })).status, 200);
  assert.is((await service.request('OPTIONS', path, { headers: bearer(READ) })).status, 204);
  for (const [method, body] of [
    ['POST', userSample()],
    ['PATCH', { name: 'no' }],
    ['PUT', made.body],
    ['DELETE', undefined],
  ] as const) {
    const reply = await service.request(method, method === 'POST' ? '/users' : path, { body, headers: bearer(READ) });
    assert.is(reply.status, 403, method);
    assert.match(reply.headers.get('www-authenticate') ?? '', /error="insufficient_scope"/);
  }
  assert.equal((await service.request('GET', path, { headers: bearer(READ) })).body, made.body);
});

// SQLite only: it closes the SQLite handle under the service, so that requests fail and log errors.
(BACKEND === 'sqlite' ? auth : auth.skip)(
  'tokens never appear in logs, even of requests on a closed SQLite database (SQLite only)',
  async ({ service }) => {
    service.database.sqlite.close();
    await service.request('GET', '/users', { headers: bearer(FULL) });
    await service.request('GET', '/users', { headers: bearer(READ) });
    assert.ok(service.logs.length > 0);
    const logged = JSON.stringify(service.logs);
    assert.not.ok(logged.includes(FULL) || logged.includes(READ));
  },
);

auth.run();

// 5. CORS
const noCors = withService('CORS unset');

noCors('no CORS headers at all when CORS_ORIGINS is unset', async ({ service }) => {
  const reply = await service.request('GET', '/users', { headers: { origin: 'https://app.example.com' } });
  assert.is(reply.status, 200);
  for (const [name] of reply.headers) assert.not.match(name, /^access-control-/);
});

noCors.run();

const anyOrigin = withService('CORS_ORIGINS=*', { CORS_ORIGINS: '*', AUTH_TOKEN: FULL });

anyOrigin('responses allow any origin and expose the API headers, errors included', async ({ service }) => {
  for (const headers of [{ origin: 'https://a.example' }, { origin: 'https://a.example', ...bearer(FULL) }]) {
    const reply = await service.request('GET', '/users', { headers });
    assert.is(reply.headers.get('access-control-allow-origin'), '*');
    const exposed = (reply.headers.get('access-control-expose-headers') ?? '').split(',');
    for (const name of ['Location', 'ETag', 'Link', 'X-Total-Count']) assert.ok(exposed.includes(name), name);
  }
});

anyOrigin('a preflight is answered without a token', async ({ service }) => {
  const reply = await service.request('OPTIONS', '/users/1', {
    headers: {
      origin: 'https://a.example',
      'access-control-request-method': 'PATCH',
      'access-control-request-headers': 'authorization, content-type, if-match',
    },
  });
  assert.is(reply.status, 204);
  assert.is(reply.headers.get('access-control-allow-origin'), '*');
  assert.match(reply.headers.get('access-control-allow-methods') ?? '', /PATCH/);
  assert.is(reply.headers.get('access-control-allow-headers'), 'authorization, content-type, if-match');
  assert.is(reply.headers.get('access-control-max-age'), '600');
});

anyOrigin('with a token required, every preflight allows every method, so none tells which paths exist', async ({ service }) => {
  for (const path of ['/users', '/users/1', '/users/abc', '/nothing/here', '/_changes']) {
    const reply = await service.request('OPTIONS', path, {
      headers: { origin: 'https://a.example', 'access-control-request-method': 'GET' },
    });
    assert.is(reply.status, 204, `${path}: ${reply.text}`);
    assert.is(reply.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS', path);
  }
  // The request itself still needs the token.
  assert.is((await service.request('GET', '/nothing/here', { headers: { origin: 'https://a.example' } })).status, 401);
});

anyOrigin.run();

const listedOrigins = withService('CORS_ORIGINS=list', { CORS_ORIGINS: 'https://app.example.com, http://localhost:5173' });

listedOrigins('only listed origins are allowed, and responses vary by Origin', async ({ service }) => {
  const allowed = await service.request('GET', '/users', { headers: { origin: 'http://localhost:5173' } });
  assert.is(allowed.headers.get('access-control-allow-origin'), 'http://localhost:5173');
  assert.match(allowed.headers.get('vary') ?? '', /Origin/);
  const denied = await service.request('GET', '/users', { headers: { origin: 'https://evil.example' } });
  assert.is(denied.headers.get('access-control-allow-origin'), null);
});

listedOrigins.run();

// 6. Hardening
const hardening = withService('hardening', { HEADERS_TIMEOUT_MS: '300', REQUEST_TIMEOUT_MS: '1000' });

hardening('request ids: echoed when sane, generated when absent or not', async ({ service }) => {
  assert.is((await service.request('GET', '/healthz', { headers: { 'x-request-id': 'abc-123' } })).headers.get('x-request-id'), 'abc-123');
  const generated = (await service.request('GET', '/healthz')).headers.get('x-request-id');
  assert.match(generated ?? '', /^[0-9a-f-]{36}$/);
  const replaced = (await service.request('GET', '/healthz', { headers: { 'x-request-id': 'x'.repeat(300) } })).headers.get('x-request-id');
  assert.match(replaced ?? '', /^[0-9a-f-]{36}$/);
});

hardening('security headers suit a JSON API; no X-Powered-By', async ({ service }) => {
  for (const path of ['/users', '/nope', '/users/abc']) {
    const reply = await service.request('GET', path);
    assert.is(reply.headers.get('x-content-type-options'), 'nosniff');
    assert.is(reply.headers.get('x-frame-options'), 'DENY');
    assert.is(reply.headers.get('x-powered-by'), null);
  }
});

hardening('an endless upload is refused at the limit, not buffered', async ({ service }) => {
  const limit = service.config.maxBodyBytes;
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const { status, written } = await new Promise<{ status: number; written: number }>((resolve, reject) => {
    let written = 0;
    const req = httpRequest(`${service.url}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, written });
      req.destroy();
    });
    req.on('error', (error) => (written > limit ? resolve({ status: 0, written }) : reject(error)));
    const pump = () => {
      while (written < 1024 ** 3) {
        written += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
  assert.is(status, 413);
  assert.ok(written < 64 * limit, `the server read ${written} bytes before refusing`);
});

/** Writes raw bytes on a new connection and returns all the server sent until it closed it. */
function rawExchange(service: Service, data: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(service.url).port), '127.0.0.1', () => socket.write(data));
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    socket.on('close', () => resolve(received));
  });
}

hardening('a client that never finishes its headers is cut off (408)', async ({ service }) => {
  assert.match(await rawExchange(service, 'GET /users HTTP/1.1\r\nHost: x\r\nX-Slow: '), /^HTTP\/1\.1 408 /);
});

hardening('malformed HTTP gets a 400 problem, not a dropped socket', async ({ service }) => {
  const received = await rawExchange(service, 'THIS IS NOT HTTP\r\n\r\n');
  assert.match(received, /^HTTP\/1\.1 400 /);
  assert.match(received, /application\/problem\+json/);
});

hardening('a request pipelined before malformed bytes gets its own answer first, then the 400', async ({ service }) => {
  const body = JSON.stringify(userSample());
  const post = `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const received = await rawExchange(service, `${post}FOO / HTTP/1.1\r\nHost: x\r\n\r\n`);
  assert.match(received, /^HTTP\/1\.1 201 /);
  assert.match(received, /\r\n\r\n\{[\s\S]*HTTP\/1\.1 400 /);
  // A request that closes the connection is answered alone: what follows it is not read.
  const closing = post
    .replace('Host: x\r\n', 'Host: x\r\nConnection: close\r\n')
    .replace(/"email":"[^"]+"/, `"email":"${userSample().email}"`);
  const alone = await rawExchange(service, `${closing}garbage\r\n\r\n`);
  assert.match(alone, /^HTTP\/1\.1 201 /);
  assert.not.match(alone, /HTTP\/1\.1 400/);
});

hardening('requests pipelined on one connection run in order, and none after an answer that closes it', async ({ service }) => {
  const user = (await service.request('POST', '/users', { body: userSample() })).body;
  const patch = '{"name":"Renamed"}';
  const ordered = await rawExchange(
    service,
    `PATCH /users/${user.id} HTTP/1.1\r\nHost: x\r\nContent-Type: application/merge-patch+json\r\nContent-Length: ${patch.length}\r\n\r\n${patch}` +
      `DELETE /users/${user.id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
  );
  assert.equal(
    [...ordered.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]),
    ['200', '204'],
  );
  // A 415 closes the connection (its body is not read): the POST sent behind it is neither answered nor run.
  const body = JSON.stringify(userSample());
  const refused = await rawExchange(
    service,
    'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}' +
      `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  assert.equal(
    [...refused.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]),
    ['415'],
  );
  const email = encodeURIComponent(JSON.parse(body).email);
  assert.equal((await service.request('GET', `/users?email=${email}`)).body, []);
  // Whatever follows an answer that closes the connection gets no answer of its own (not even a 400).
  for (const first of [
    `GET /users/${user.id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    `GET /users/${user.id} HTTP/1.0\r\n\r\n`,
    'GET /users HTTP/2.0\r\nHost: x\r\n\r\n',
  ]) {
    for (const after of [`GET /users/${user.id} HTTP/1.1\r\nHost: x\r\n\r\n`, 'junk\r\n\r\n']) {
      const answers = [...(await rawExchange(service, first + after)).matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => m[1]);
      assert.is(answers.length, 1, `${JSON.stringify(first + after)}: ${answers.join(', ')}`);
    }
  }
});

hardening('a client that pipelines without reading its answers is read no further, or dropped (bounded memory)', async ({ service }) => {
  const { hostname, port } = new URL(service.url);
  const socket = connect(Number(port), hostname);
  socket.pause(); // reads no answer
  // Dropped (256 requests waiting) or no longer read: either way the writes stop.
  const dropped = new Promise<void>((resolve) => socket.on('error', () => resolve()).on('close', () => resolve()));
  const burst = Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(1000));
  let accepted = 0;
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (accepted < 1200 * burst.length) {
        accepted += burst.length;
        if (!socket.write(burst)) return void socket.once('drain', pump);
      }
      resolve();
    };
    socket.on('connect', pump);
    // Stopped being read: the kernel's buffers fill, and writes wait for a drain that does not come.
    setTimeout(resolve, 3000);
    dropped.then(resolve);
  });
  socket.destroy();
  // Without the bound it reads all 43 MB (gigabytes of memory); with it, what the kernel's buffers hold.
  assert.ok(accepted < 16 * 1024 * 1024, `the service read ${accepted} bytes of pipelined requests nobody reads the answers to`);
  // And it serves others meanwhile.
  assert.is((await service.request('GET', '/healthz')).status, 200);
});

hardening.run();

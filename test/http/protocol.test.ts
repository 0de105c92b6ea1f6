// HTTP/1.x edges and load bounds (docs/http-api.md, docs/security.md): slow clients are freed, odd request
// targets and versions pass every guard or get a problem body, work in flight and per-client rates are bounded.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createHttpServer } from '../../src/http/server.js';
import { type Service, spawnService, startService, withTempDir } from '../support/helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const portOf = (url: string) => Number(new URL(url).port);

interface RawReply {
  status: number;
  head: string;
  body: string;
}

/** Sends raw bytes on a new connection and parses the first response (read until the server closes or the body is complete). */
function raw(url: string, data: string): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(portOf(url), '127.0.0.1', () => socket.write(data));
    let received = '';
    const done = () => {
      const [head = '', body = ''] = received.split('\r\n\r\n', 2);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0), head, body });
      socket.destroy();
    };
    socket.on('data', (chunk) => {
      received += chunk;
      const length = /\r\ncontent-length: (\d+)/i.exec(received)?.[1];
      const split = received.indexOf('\r\n\r\n');
      if (split >= 0 && (length === undefined ? /^HTTP\/1\.[01] (204|304)/.test(received) : received.length >= split + 4 + Number(length)))
        done();
    });
    socket.on('end', done);
    socket.on('error', reject);
  });
}

const header = (reply: RawReply, name: string) => new RegExp(`\\r\\n${name}: ([^\\r]*)`, 'i').exec(`\r\n${reply.head}`)?.[1];

/** Starts a request whose body is announced but not sent, so it stays in flight until `finish` is called. */
function pendingPost(
  url: string,
  path: string,
  length: number,
  sent = 0,
): { response: Promise<IncomingMessage>; finish: () => void; abort: () => void } {
  const body = `{"name":"${'x'.repeat(Math.max(0, length - 11))}"}`.slice(0, length);
  const req = httpRequest(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': length } });
  if (sent > 0) req.write(body.slice(0, sent));
  else req.flushHeaders();
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      resolve(res);
    });
    req.on('error', reject);
  });
  return { response, finish: () => req.end(body.slice(sent)), abort: () => req.destroy() };
}

/** Polls `read` until it returns true or `bound` ms pass; returns the last value (no timing is asserted). */
async function eventually(read: () => Promise<boolean>, bound = 10_000): Promise<boolean> {
  const until = Date.now() + bound;
  while (Date.now() < until) {
    if (await read()) return true;
    await sleep(50);
  }
  return read();
}

const withService = (name: string, env: Record<string, string> = {}) => {
  const test = suite<{ service: Service }>(name);
  test.before(async (context) => {
    context.service = await startService({ env });
  });
  test.after(async ({ service }) => service.close());
  return test;
};

// 9. Slow clients
const slow = suite('slow clients');

slow('after a 408 the socket is destroyed, even when the client keeps its side open', async () => {
  const server = createHttpServer((_req, res) => res.end('ok'), { headersTimeoutMs: 200, requestTimeoutMs: 400 });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const sockets: Socket[] = [];
  try {
    const answers = await Promise.all(
      Array.from(
        { length: 40 },
        () =>
          new Promise<string>((resolve) => {
            // allowHalfOpen: this client never closes its side, as a hostile one would not.
            const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () =>
              socket.write('GET / HTTP/1.1\r\nHost: x\r\nX-Slow: '),
            );
            sockets.push(socket);
            let received = '';
            socket.on('data', (chunk) => (received += chunk));
            socket.on('end', () => resolve(received));
          }),
      ),
    );
    for (const answer of answers) assert.match(answer, /^HTTP\/1\.1 408 .*application\/problem\+json/s);
    const connections = () => new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
    assert.ok(await eventually(async () => (await connections()) === 0), `${await connections()} sockets are still held open`);
    // And the server still accepts and answers anyone else.
    const fresh = await raw(`http://127.0.0.1:${port}`, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.is(fresh.body, 'ok');
  } finally {
    for (const socket of sockets) socket.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

slow.run();

// 10. Request targets and protocol
const protocol = withService('request targets and protocol');

protocol('an absolute-form target is routed by its path and passes every guard', async ({ service }) => {
  const reply = await raw(
    service.url,
    'GET http://someone:SECRET@example.com/users?limit=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
  );
  assert.is(reply.status, 200);
  assert.ok(header(reply, 'x-request-id'), 'no request id');
  assert.is(header(reply, 'x-content-type-options'), 'nosniff');
  const requestId = header(reply, 'x-request-id');
  // Logged by its path: the user info of the target never reaches the log.
  assert.ok(
    service.logs.some((line) => line.requestId === requestId && line.req?.path === '/users' && line.res?.status === 200),
    'no log line',
  );
  assert.not.ok(service.logs.some((line) => JSON.stringify(line).includes('SECRET')));
  const element = await raw(service.url, 'GET http://example.com/users/999 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(element.status, 404);
  // Its authority stands for Host: an empty or malformed one is a 400 (RFC 9110 §4.2.1), as such a Host is.
  for (const target of ['http:///users/1', 'http://:80/users/1', 'http://a@/users/1', 'http://[::1/users']) {
    const refused = await raw(service.url, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.is(refused.status, 400, target);
    assert.is(JSON.parse(refused.body).detail, "The request-target's authority is not a valid host[:port].", target);
  }
  const ported = await raw(service.url, 'GET http://[::1]:8080/users?limit=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(ported.status, 200);
});

protocol(
  'a target of no served form (another scheme, a fragment, * with a query) is a 400 that passes every guard',
  async ({ service }) => {
    for (const target of ['ftp://example.com/users', 'http://example.com/users#top', '*?a=1', 'users']) {
      const reply = await raw(service.url, `OPTIONS ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.is(reply.status, 400, target);
      assert.ok(header(reply, 'x-request-id'), `${target}: no request id`);
      assert.is(header(reply, 'x-content-type-options'), 'nosniff', target);
      assert.not.match(reply.body, /ftp:|#top/, `${target}: the target is echoed`);
    }
  },
);

protocol('OPTIONS refuses query parameters like every other method', async ({ service }) => {
  for (const path of ['/users?zz=1', '/healthz?zz=1', '/docs?zz=1', '/users?%ZZ']) {
    assert.is((await service.request('OPTIONS', path)).status, 400, path);
  }
});

protocol('a Host that is no authority, two Content-Types or a transfer coding other than chunked are refused', async ({ service }) => {
  const badHost = await raw(service.url, 'GET /users HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n');
  assert.is(badHost.status, 400);
  // Behind 2,500 short header fields (within the size bound) a second Host or an unknown Expect is still seen.
  const many = Array.from({ length: 2500 }, (_, i) => `X${i}: y\r\n`).join('');
  const hidden = await raw(service.url, `GET /users HTTP/1.1\r\nHost: x\r\n${many}Host: y\r\nConnection: close\r\n\r\n`);
  assert.is(hidden.status, 400);
  const expect = await raw(service.url, `GET /users HTTP/1.1\r\nHost: x\r\n${many}Expect: nonsense\r\nConnection: close\r\n\r\n`);
  assert.is(expect.status, 417);
  const body = '{"name":"Ada","email":"two-types@example.com"}';
  const twoTypes = await raw(
    service.url,
    `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
  assert.is(twoTypes.status, 400);
  const gzip = await raw(
    service.url,
    'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
  );
  assert.is(gzip.status, 501);
  assert.match(gzip.head, /application\/problem\+json/);
  assert.is((await service.request('GET', '/users?email=two-types@example.com')).body.length, 0, 'nothing was created');
});

protocol('the HTTP/2 preface in clear text is a 505 with a request id', async ({ service }) => {
  const reply = await raw(service.url, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  assert.is(reply.status, 505);
  assert.ok(header(reply, 'x-request-id'));
  // Written on the raw socket, it carries a Date as Node's own answers do (RFC 9110 §6.6.1).
  assert.ok(Date.parse(header(reply, 'date') ?? '') > Date.now() - 60_000, header(reply, 'date'));
});

protocol('OPTIONS * lists every method the service defines; other methods with * are a 400', async ({ service }) => {
  const reply = await raw(service.url, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(reply.status, 204);
  assert.is(header(reply, 'allow'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
  assert.ok(header(reply, 'x-request-id'));
  const get = await raw(service.url, 'GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(get.status, 400);
  assert.match(get.head, /application\/problem\+json/);
});

protocol('the version refused is the failing request line’s, also behind a pipelined request', async ({ service }) => {
  const answers = (data: string) =>
    new Promise<string[]>((resolve) => {
      const socket = connect(portOf(service.url), '127.0.0.1', () => socket.write(data));
      let received = '';
      socket.on('data', (chunk) => {
        received += chunk;
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve([...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1] as string)));
    });
  const first = 'GET /users?limit=1 HTTP/1.1\r\nHost: x\r\n\r\n';
  assert.equal(await answers(`${first}GET /users HTTP/1.10\r\nHost: x\r\n\r\n`), ['200', '400']);
  assert.equal(await answers(`${first}GET /users HTTP/3.0\r\nHost: x\r\n\r\n`), ['200', '505']);
  // Behind several: each is answered, in order, before the refusal (a DELETE's 204 among them).
  const user = await service.request('POST', '/users', { body: { name: 'Piped', email: 'piped@example.com' } });
  const remove = `DELETE ${user.headers.get('location')} HTTP/1.1\r\nHost: x\r\n\r\n`;
  assert.equal(await answers(`${first}${remove}${first}GET /users HTTP/01.1\r\nHost: x\r\n\r\n`), ['200', '204', '200', '400']);
});

protocol('a malformed request line is a 400, not a 505: a bare LF, a trailing space, a version of two digits', async ({ service }) => {
  for (const line of [
    'GET /users HTTP/1.1\nHost: x\n\n',
    'GET /users HTTP/1.1 \r\nHost: x\r\n\r\n',
    'GET /users HTTP/1.10\r\nHost: x\r\n\r\n',
    'GET /users HTTP/01.1\r\nHost: x\r\n\r\n',
  ]) {
    const reply = await raw(service.url, line);
    assert.is(reply.status, 400, JSON.stringify(line));
    assert.is(JSON.parse(reply.body).detail, 'The request could not be read as HTTP/1.1.');
  }
});

protocol('HTTP/1.0 is served; other versions get a 505 problem', async ({ service }) => {
  const old = await raw(service.url, 'GET /users HTTP/1.0\r\n\r\n');
  assert.is(old.status, 200);
  for (const version of ['HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'HTTP/3.0']) {
    const reply = await raw(service.url, `GET /users ${version}\r\nHost: x\r\n\r\n`);
    assert.is(reply.status, 505, version);
    assert.is(JSON.parse(reply.body).status, 505, version);
  }
});

protocol('a missing or repeated Host is a 400 problem', async ({ service }) => {
  for (const hosts of ['', 'Host: a\r\nHost: b\r\n']) {
    const reply = await raw(service.url, `GET /users HTTP/1.1\r\n${hosts}\r\n`);
    assert.is(reply.status, 400);
    assert.match(JSON.parse(reply.body).detail, /Host/);
    assert.ok(header(reply, 'x-request-id'));
  }
});

protocol('an Expect other than 100-continue is a 417 problem; 100-continue works', async ({ service }) => {
  const reply = await raw(service.url, 'GET /users HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n');
  assert.is(reply.status, 417);
  assert.match(reply.head, /application\/problem\+json/);
  const body = JSON.stringify({ name: 'Ada', email: 'expect@example.com' });
  const continued = await raw(
    service.url,
    `POST /users HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
  assert.match(continued.head, /^HTTP\/1\.1 100 Continue/);
  // A request that announces no body has none to wait for: no 100, and the connection stays open.
  const bodiless = await raw(service.url, 'GET /users?limit=1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n');
  assert.is(bodiless.status, 200);
  assert.not.match(bodiless.head, /100 Continue/);
  assert.match(bodiless.head, /\r\nConnection: keep-alive\r\n/i);
});

protocol("CONNECT gets a problem answer with the client's request id, not a dropped socket", async ({ service }) => {
  const reply = await raw(service.url, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nX-Request-Id: tunnel-7\r\n\r\n');
  assert.is(reply.status, 405);
  assert.match(reply.head, /application\/problem\+json/);
  // Every 405 carries Allow (RFC 9110 §15.5.6): empty, since a host and port allow no method here.
  assert.match(reply.head, /\r\nAllow: \r\n/i);
  const id = header(reply, 'x-request-id');
  assert.is(id, 'tunnel-7');
  assert.ok(
    service.logs.some((line) => line.requestId === id && line.res?.status === 405),
    'no log line',
  );
});

protocol('a request the parser cannot read (an unknown method) is a 400 with the security headers of every answer', async ({ service }) => {
  for (const request of ['FOO /users HTTP/1.1\r\nHost: x\r\n\r\n', 'get /users HTTP/1.1\r\nHost: x\r\n\r\n']) {
    const reply = await raw(service.url, request);
    assert.is(reply.status, 400, request);
    assert.ok(header(reply, 'x-request-id'), 'no request id');
    assert.is(header(reply, 'x-content-type-options'), 'nosniff');
    assert.is(header(reply, 'x-frame-options'), 'DENY');
    assert.is(header(reply, 'referrer-policy'), 'no-referrer');
    assert.is(header(reply, 'content-security-policy'), "default-src 'none'; frame-ancestors 'none'");
  }
});

protocol('an OPTIONS without Origin is no CORS preflight: routed, 404 on unknown paths', async ({ service }) => {
  const unknown = await service.request('OPTIONS', '/nothing-here', { headers: { 'access-control-request-method': 'POST' } });
  assert.is(unknown.status, 404);
  const known = await service.request('OPTIONS', '/users', { headers: { 'access-control-request-method': 'POST' } });
  assert.is(known.status, 204);
  assert.is(known.headers.get('allow'), 'GET, HEAD, POST, OPTIONS');
});

protocol('the docs files take GET and HEAD only: other methods get 405 with Allow, unknown files 404', async ({ service }) => {
  for (const path of ['/docs/assets/swagger-ui.css', '/docs/init.js']) {
    assert.is((await service.request('GET', path)).status, 200, path);
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const reply = await service.request(method, path, { raw: 'x', headers: { 'content-type': 'text/plain' } });
      assert.is(reply.status, 405, `${method} ${path}`);
      assert.is(reply.headers.get('allow'), 'GET, HEAD, OPTIONS');
      assert.is(reply.body.status, 405);
    }
    const options = await service.request('OPTIONS', path);
    assert.is(options.status, 204);
  }
  const query = await service.request('GET', '/docs/assets/swagger-ui.css?v=2');
  assert.is(query.status, 400, 'a query parameter on a static file is refused, not ignored');
  assert.is(query.body.errors[0].path, 'v');
  assert.is((await service.request('POST', '/docs/assets/nope.css')).status, 404);
  const put = await service.request('PUT', '/docs/assets/swagger-ui.css');
  assert.is(put.body.instance, '/docs/assets/swagger-ui.css');
  // Only the files the page loads: the package's stock demo page (pointed at another API) is not served.
  for (const stock of ['/docs/assets/index.html', '/docs/assets/swagger-initializer.js']) {
    assert.is((await service.request('GET', stock)).status, 404, stock);
  }
  assert.is((await service.request('GET', '/docs/assets/nope.css')).status, 404);
});

protocol('a compressed request body is refused with 415 and Accept-Encoding', async ({ service }) => {
  for (const encoding of ['gzip', 'br', 'identity, gzip']) {
    const reply = await service.request('POST', '/users', {
      raw: JSON.stringify({ name: 'Ada', email: `enc-${encoding.length}@example.com` }),
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
    });
    assert.is(reply.status, 415, encoding);
    assert.is(reply.headers.get('accept-encoding'), 'identity');
  }
  const identity = await service.request('POST', '/users', {
    body: { name: 'Ada', email: 'identity@example.com' },
    headers: { 'content-encoding': 'identity' },
  });
  assert.is(identity.status, 201);
});

/**
 * Sends `head` announcing a body of `announced` bytes, then writes the body in 64 KiB chunks while the
 * server keeps the connection open, up to `most` bytes; resolves with the response text and the bytes written.
 */
function bodyNobodyReads(url: string, head: string, announced: number, most: number): Promise<{ received: string; written: number }> {
  return new Promise((resolve) => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let received = '';
    let written = 0;
    let closed = false;
    const socket = connect(portOf(url), '127.0.0.1', () => {
      socket.write(`${head}Content-Length: ${announced}\r\n\r\n`);
      const pump = () => {
        while (!closed && written < most) {
          written += chunk.length;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
        if (!closed) socket.end();
      };
      pump();
    });
    socket.on('data', (data) => {
      received += data;
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closed = true;
      resolve({ received, written });
    });
  });
}

protocol(
  'a body on a request that reads none (GET, DELETE, OPTIONS) is not read: the answer closes the connection',
  async ({ service }) => {
    const created = await service.request('POST', '/users', { body: { name: 'Bodied', email: 'bodied@example.com' } });
    const path = created.headers.get('location') as string;
    for (const method of ['GET', 'OPTIONS', 'DELETE']) {
      const announced = 500 * 1024 * 1024;
      const { received, written } = await bodyNobodyReads(
        service.url,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n`,
        announced,
        64 * 1024 * 1024,
      );
      assert.match(received, /^HTTP\/1\.1 (200|204) /, method);
      assert.match(received, /\r\nConnection: close\r\n/i, method);
      assert.ok(written < 64 * 1024 * 1024, `${method}: the server read ${written} bytes of a body it does not use`);
    }
    assert.is((await service.request('GET', path)).status, 404, 'the DELETE was done');
  },
);

protocol('status lines carry RFC 9110 reason phrases, as the problem titles do', async ({ service }) => {
  const body = '{"name":1}';
  const invalid = await raw(
    service.url,
    `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
  );
  assert.match(invalid.head, /^HTTP\/1\.1 422 Unprocessable Content\r\n/);
  assert.is(JSON.parse(invalid.body).title, 'Unprocessable Content');
  const large = await raw(
    service.url,
    `POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\nConnection: close\r\n\r\n`,
  );
  assert.match(large.head, /^HTTP\/1\.1 413 Content Too Large\r\n/);
  assert.is(JSON.parse(large.body).title, 'Content Too Large');
});

protocol.run();

const authenticated = withService('request targets with authentication', { AUTH_TOKEN: 'a'.repeat(32) });

authenticated('absolute-form and * targets need the token like any other', async ({ service }) => {
  // A target of no served form is a protocol error, answered (like a bad version or Host) before authentication.
  const other = await raw(service.url, 'GET ftp://example.com/users HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(other.status, 400);
  const absolute = await raw(service.url, 'GET http://example.com/users HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(absolute.status, 401);
  const star = await raw(service.url, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.is(star.status, 401);
  const allowed = await raw(
    service.url,
    `OPTIONS * HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(32)}\r\nConnection: close\r\n\r\n`,
  );
  assert.is(allowed.status, 204);
});

/** Sends `head` on a new connection, then `body` once `100 Continue` arrives (if it does); returns all the server sent until it closed. */
function expectingContinue(url: string, head: string, body: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(portOf(url), '127.0.0.1', () => socket.write(head));
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
      if (received.startsWith('HTTP/1.1 100 Continue\r\n\r\n') && !socket.writableEnded) socket.end(body);
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(received));
  });
}

authenticated('a body is neither asked for (100 Continue) nor read when the request is refused on its headers', async ({ service }) => {
  const body = JSON.stringify({ name: 'Expecting', email: 'expecting@example.com' });
  const head = (auth: string) =>
    `POST /users HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
    'Expect: 100-continue\r\nConnection: close\r\n\r\n';
  const refused = await expectingContinue(service.url, head(''), body);
  assert.match(refused, /^HTTP\/1\.1 401 /);
  assert.not.match(refused, /100 Continue/);
  const accepted = await expectingContinue(service.url, head(`Authorization: Bearer ${'a'.repeat(32)}\r\n`), body);
  assert.match(accepted, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);
  // Without Expect: a refusal on the headers closes the connection instead of reading a huge body to its end.
  const huge = pendingPost(service.url, '/users', 50 * 1024 * 1024, 1024);
  const answer = await huge.response;
  assert.is(answer.statusCode, 401);
  assert.is(answer.headers.connection, 'close');
  huge.abort();
});

authenticated.run();

// 11. Work in flight
const inFlight = withService('work in flight', { MAX_IN_FLIGHT: '2', MAX_BODY_BYTES: '1000', MAX_BODY_BYTES_IN_FLIGHT: '1500' });

inFlight('past MAX_IN_FLIGHT requests a request is shed with 503 and Retry-After, and served again after', async ({ service }) => {
  const held = [pendingPost(service.url, '/users', 60), pendingPost(service.url, '/users', 60)];
  // Once both are admitted (their headers may take a moment to arrive), the next request is shed.
  assert.ok(await eventually(async () => (await service.request('GET', '/users')).status === 503), 'nothing was shed');
  const shed = await service.request('GET', '/users');
  assert.is(shed.status, 503);
  assert.is(shed.headers.get('retry-after'), '1');
  assert.is(shed.body.status, 503);
  assert.is((await service.request('GET', '/healthz')).status, 200, 'a probe is never shed');
  assert.is((await service.request('GET', '/readyz')).status, 200, 'a probe is never shed');
  for (const request of held) request.finish();
  await Promise.all(held.map((request) => request.response));
  assert.ok(
    await eventually(async () => (await service.request('GET', '/users')).status === 200),
    'requests are still shed after the held ones finished',
  );
});

inFlight(
  'past MAX_BODY_BYTES_IN_FLIGHT of bodies being read, another body is refused with 503; bodiless requests pass',
  async ({ service }) => {
    // 900 of its 1000 bytes have arrived: they hold 900 of the 1500-byte budget.
    const held = pendingPost(service.url, '/users', 1000, 900);
    let n = 0;
    const big = () => service.request('POST', '/users', { body: { name: 'x'.repeat(700), email: `big${++n}@example.com` } });
    assert.ok(await eventually(async () => (await big()).status === 503), 'the second body was never refused');
    const refused = await big();
    assert.is(refused.status, 503);
    assert.is(refused.headers.get('retry-after'), '1');
    assert.is((await service.request('GET', '/healthz')).status, 200);
    assert.is((await service.request('POST', '/users', { body: { name: 'small', email: 'small@example.com' } })).status, 201);
    held.finish();
    await held.response;
    assert.ok(await eventually(async () => (await big()).status === 201));
  },
);

inFlight('a body announced but not sent holds nothing: idle uploads cannot shut out writes', async ({ service }) => {
  const idle = [pendingPost(service.url, '/users', 1000)];
  try {
    // MAX_IN_FLIGHT is 2: one idle upload leaves room for one more request, whose 900-byte body is read.
    assert.ok(await eventually(async () => (await service.request('GET', '/users')).status === 200));
    const write = await service.request('POST', '/users', { body: { name: 'x'.repeat(900), email: 'despite-idle@example.com' } });
    assert.is(write.status, 201);
  } finally {
    for (const request of idle) {
      request.response.catch(() => {});
      request.abort();
    }
  }
});

inFlight('requests pipelined behind an endless stream take no share, and leave none behind', async ({ service }) => {
  const socket = connect(portOf(service.url), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.on('error', () => {});
  socket.write(
    `GET /_changes HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n${'GET /users HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(10)}`,
  );
  await sleep(300);
  assert.is((await service.request('GET', '/users')).status, 200, 'the queued requests hold shares');
  socket.destroy();
  await sleep(300);
  assert.ok(await eventually(async () => (await service.request('GET', '/users')).status === 200));
});

inFlight('a request whose client goes away gives its share back', async ({ service }) => {
  for (let round = 0; round < 5; round++) {
    const held = [pendingPost(service.url, '/users', 700, 650), pendingPost(service.url, '/users', 60)];
    // Both are admitted before the first probe: on PostgreSQL a GET is in flight while it waits for the
    // database, and one arriving between them would take the second share (that request gets the 503).
    await sleep(200);
    assert.ok(await eventually(async () => (await service.request('GET', '/users')).status === 503));
    for (const request of held) {
      request.response.catch(() => {});
      request.abort();
    }
    assert.ok(
      await eventually(async () => (await service.request('GET', '/users')).status === 200),
      `round ${round}: aborted requests still hold their share`,
    );
  }
  assert.is((await service.request('POST', '/users', { body: { name: 'x'.repeat(600), email: 'after@example.com' } })).status, 201);
});

inFlight.run();

// 12. Rate limits
const limited = withService('rate limit', { RATE_LIMIT: '3', RATE_LIMIT_WINDOW_S: '60' });

limited('past RATE_LIMIT requests in the window a client gets 429 with Retry-After and RateLimit fields', async ({ service }) => {
  const allowed = [];
  for (let i = 0; i < 3; i++) allowed.push(await service.request('GET', '/users'));
  assert.equal(
    allowed.map((r) => r.status),
    [200, 200, 200],
  );
  assert.is(allowed[0]?.headers.get('ratelimit-policy'), '"per-client";q=3;w=60');
  assert.match(allowed[0]?.headers.get('ratelimit') ?? '', /^"per-client";r=2;t=\d+$/);
  assert.match(allowed[2]?.headers.get('ratelimit') ?? '', /^"per-client";r=0;t=\d+$/);
  const refused = await service.request('GET', '/users');
  assert.is(refused.status, 429);
  assert.is(refused.body.status, 429);
  assert.ok(Number(refused.headers.get('retry-after')) >= 1);
  assert.match(refused.headers.get('ratelimit') ?? '', /^"per-client";r=0;t=\d+$/);
});

limited.run();

const limitedWithAuth = withService('rate limit with authentication', {
  RATE_LIMIT: '2',
  AUTH_TOKEN: 'f'.repeat(32),
  AUTH_READ_TOKEN: 'r'.repeat(32),
});

limitedWithAuth('each token has its own count; requests without a valid token count against the address', async ({ service }) => {
  const as = (token?: string) => (token ? { headers: { authorization: `Bearer ${token}` } } : {});
  const statuses = async (token: string | undefined, n: number) => {
    const out = [];
    for (let i = 0; i < n; i++) out.push((await service.request('GET', '/users', as(token))).status);
    return out;
  };
  assert.equal(await statuses('f'.repeat(32), 3), [200, 200, 429]);
  assert.equal(await statuses('r'.repeat(32), 3), [200, 200, 429]);
  assert.equal(await statuses('wrong-token-wrong-token', 3), [401, 401, 429]);
  assert.equal(await statuses(undefined, 1), [429]);
});

limitedWithAuth.run();

const cluster = suite('rate limit across WORKERS');

cluster('with WORKERS=2 the workers share one count', async () => {
  await withTempDir(async (dir) => {
    const service = await spawnService({ DATABASE_PATH: join(dir, 'app.db'), WORKERS: '2', RATE_LIMIT: '6', LOG_LEVEL: 'info' });
    try {
      // Both workers listen before the requests go out, so the cluster spreads them over both.
      assert.ok(await eventually(async () => (service.output().match(/listening on/g) ?? []).length >= 2), service.output());
      const statuses = [];
      for (let i = 0; i < 10; i++) {
        // A new connection each time (round-robin over the workers).
        statuses.push((await fetch(`${service.url}/users`, { headers: { connection: 'close' } })).status);
      }
      assert.equal(statuses, [200, 200, 200, 200, 200, 200, 429, 429, 429, 429]);
      assert.is((await fetch(`${service.url}/healthz`)).status, 200, 'probes are never rate-limited');
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });
});

cluster.run();

const crossOrigin = withService('CORS edges', { CORS_ORIGINS: 'https://app.example.com' });

crossOrigin('a preflight names the methods of its path; on an unrouted path it is no preflight (404)', async ({ service }) => {
  const preflight = (path: string) =>
    service.request('OPTIONS', path, {
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PUT' },
    });
  const collection = await preflight('/users');
  assert.is(collection.status, 204);
  assert.is(collection.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, OPTIONS');
  const element = await preflight('/users/1');
  assert.is(element.headers.get('access-control-allow-methods'), 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  // Answered by the route, not the element: the request that follows gets a 404 the page can read.
  const missing = await preflight('/users/99999999');
  assert.is(missing.status, 204);
  assert.is(missing.headers.get('access-control-allow-methods'), 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  const followed = await service.request('PUT', '/users/99999999', { headers: { origin: 'https://app.example.com' }, body: {} });
  assert.is(followed.status, 404);
  assert.is(followed.headers.get('access-control-allow-origin'), 'https://app.example.com');
  const nowhere = await preflight('/nothing/here');
  assert.is(nowhere.status, 404);
  assert.is(nowhere.headers.get('access-control-allow-origin'), 'https://app.example.com');
});

crossOrigin('an OPTIONS with Origin but no Access-Control-Request-Method is routed and carries the CORS headers', async ({ service }) => {
  const reply = await service.request('OPTIONS', '/users', { headers: { origin: 'https://app.example.com' } });
  assert.is(reply.status, 204);
  assert.is(reply.headers.get('allow'), 'GET, HEAD, POST, OPTIONS');
  assert.is(reply.headers.get('access-control-allow-origin'), 'https://app.example.com');
});

crossOrigin("the guards' own refusals (417, and 400 for a missing Host) carry the CORS headers too", async ({ service }) => {
  const exchange = (head: string) =>
    new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(service.url).port), '127.0.0.1', () =>
        socket.write(`${head}Origin: https://app.example.com\r\nConnection: close\r\n\r\n`),
      );
      let text = '';
      socket.on('data', (chunk) => (text += chunk));
      socket.on('close', () => resolve(text));
    });
  for (const [head, status] of [
    ['GET /users HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n', 417],
    ['GET /users HTTP/1.1\r\n', 400],
  ] as const) {
    const received = await exchange(head);
    assert.match(received, new RegExp(`^HTTP/1\\.1 ${status} `));
    assert.match(received, /\r\naccess-control-allow-origin: https:\/\/app\.example\.com\r\n/i);
  }
});

crossOrigin('an answer that varies on Accept too (the change feed) keeps Vary: Origin', async ({ service }) => {
  const origin = { origin: 'https://app.example.com' };
  for (const accept of ['application/json', 'text/event-stream']) {
    const reply = await service.request('HEAD', '/_changes', { headers: { ...origin, accept } });
    assert.is(reply.status, 200, accept);
    const vary = (reply.headers.get('vary') ?? '').split(',').map((f) => f.trim().toLowerCase());
    assert.ok(vary.includes('origin') && vary.includes('accept'), `${accept}: Vary ${reply.headers.get('vary')}`);
    assert.is(reply.headers.get('access-control-allow-origin'), 'https://app.example.com');
  }
});

crossOrigin('a docs file is served whole whatever Range asks (no bodiless 416)', async ({ service }) => {
  const reply = await service.request('GET', '/docs/assets/favicon-32x32.png', { headers: { range: 'bytes=99999-' } });
  assert.is(reply.status, 200);
  // A 304 carries the validators and caching a 200 would (RFC 9110 §15.4.5).
  const etag = reply.headers.get('etag') as string;
  assert.match(etag, /^W\/"/);
  const again = await service.request('GET', '/docs/assets/favicon-32x32.png', { headers: { 'if-none-match': etag } });
  assert.is(again.status, 304);
  assert.is(again.headers.get('etag'), etag);
  assert.is(again.headers.get('cache-control'), reply.headers.get('cache-control'));
  assert.ok(reply.headers.get('cache-control'));
  // If-Match compares strongly: the weak tag, with or without its W/, never matches; the 412 names the tag as sent.
  for (const ifMatch of [etag, etag.slice(2)]) {
    const refused = await service.request('GET', '/docs/assets/favicon-32x32.png', { headers: { 'if-match': ifMatch } });
    assert.is(refused.status, 412, ifMatch);
    assert.is(refused.headers.get('etag'), etag);
  }
  assert.is((await service.request('GET', '/docs/assets/favicon-32x32.png', { headers: { 'if-match': '*' } })).status, 200);
  // Logged by the path it was asked by, not the file's place in the package.
  const requestId = reply.headers.get('x-request-id');
  const logged = () => service.logs.find((line) => line.requestId === requestId);
  assert.ok(await eventually(async () => logged() !== undefined), 'no log line');
  assert.is(logged()?.req?.path, '/docs/assets/favicon-32x32.png');
});

crossOrigin.run();

// Hostile request bodies (docs/security.md): deep nesting, amplification, lone surrogates
// and prototype keys, over real HTTP on every method that takes a body; and the merge patch alone.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError, MAX_ECHOED_LENGTH, MAX_REPORTED_ERRORS } from '../../src/errors.js';
import { fingerprintOf } from '../../src/request/idempotency.js';
import { applyMergePatch, checkJsonText, MAX_JSON_DEPTH, MAX_OBJECT_MEMBERS } from '../../src/request/validation.js';
import { userSample } from '../support/fixtures.js';
import { type Reply, type Service, startService } from '../support/helpers.js';

type Ctx = { service: Service; user: Record<string, any>; path: string };

/** A suite over one service with one user (at `path`) to PUT and PATCH. */
function withService(name: string) {
  const test = suite<Ctx>(name);
  test.before(async (ctx) => {
    ctx.service = await startService();
    const made = await ctx.service.request('POST', '/users', { body: userSample() });
    assert.is(made.status, 201, made.text);
    ctx.user = made.body;
    ctx.path = made.headers.get('location') as string;
  });
  test.after(async ({ service }) => service.close());
  return test;
}

/** Every way a body reaches the service: each method, both PATCH media types, related POST, Idempotency-Key. */
function writes(ctx: Ctx): { label: string; method: string; path: string; headers: Record<string, string> }[] {
  const json = { 'content-type': 'application/json' };
  let key = 0;
  const idempotent = () => ({ ...json, 'idempotency-key': `bodies-${Date.now()}-${++key}` });
  return [
    { label: 'POST', method: 'POST', path: '/users', headers: json },
    { label: 'POST + Idempotency-Key', method: 'POST', path: '/users', headers: idempotent() },
    { label: 'PUT', method: 'PUT', path: ctx.path, headers: json },
    { label: 'PATCH (json)', method: 'PATCH', path: ctx.path, headers: json },
    { label: 'PATCH (merge-patch)', method: 'PATCH', path: ctx.path, headers: { 'content-type': 'application/merge-patch+json' } },
    { label: 'related POST', method: 'POST', path: `${ctx.path}/pets`, headers: json },
    { label: 'related POST + Idempotency-Key', method: 'POST', path: `${ctx.path}/pets`, headers: idempotent() },
  ];
}

function assertProblem(reply: Reply, status: number, label: string): void {
  assert.is(reply.status, status, `${label}: ${reply.text.slice(0, 300)}`);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/, label);
  assert.is(reply.body.status, status, label);
}

/** What a refused body must leave as it was: the element, and every user and pet. */
async function state({ service, path }: Ctx): Promise<unknown[]> {
  return Promise.all(['/users?limit=1000', '/pets?limit=1000', path].map(async (p) => (await service.request('GET', p)).body));
}

// 1. Deep nesting
const nesting = withService('bodies: nesting depth');

const deepArray = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

nesting('a body nested thousands deep is a 400 on every write, at top level and as a field value', async (ctx) => {
  const before = await state(ctx);
  const shapes = {
    'deep array': deepArray(5000),
    'deep object': deepObject(3000),
    'deep array as a field': `{"name":${deepArray(5000)}}`,
    'deep object as a field': `{"name":${deepObject(3000)}}`,
    'deep object as an unknown field': `{"a":${deepObject(3000)}}`,
    'deep object as a read-only field': `{"id":${deepObject(3000)}}`,
    'deep object as the path key': `{"ownerId":${deepObject(3000)}}`,
  };
  for (const write of writes(ctx)) {
    for (const [shape, raw] of Object.entries(shapes)) {
      const label = `${write.label}, ${shape}`;
      const reply = await ctx.service.request(write.method, write.path, { raw, headers: write.headers });
      assertProblem(reply, 400, label);
      assert.ok(reply.body.detail.includes(`deeper than ${MAX_JSON_DEPTH} levels`), label);
    }
  }
  assert.equal(await state(ctx), before);
});

nesting(`${MAX_JSON_DEPTH} levels are read (and judged by the schema); one more is a 400`, async (ctx) => {
  const before = await state(ctx);
  // The top-level object is level 1, so the field holds MAX_JSON_DEPTH - 1 more levels.
  const allowed = `{"name":${deepArray(MAX_JSON_DEPTH - 1)}}`;
  const tooDeep = `{"name":${deepArray(MAX_JSON_DEPTH)}}`;
  for (const write of writes(ctx)) {
    const read = await ctx.service.request(write.method, write.path, { raw: allowed, headers: write.headers });
    assertProblem(read, 422, write.label);
    assert.ok(
      read.body.errors.some((e: { path: string }) => e.path === 'name'),
      write.label,
    );
    assertProblem(await ctx.service.request(write.method, write.path, { raw: tooDeep, headers: write.headers }), 400, write.label);
  }
  assert.equal(await state(ctx), before);
});

nesting('the Idempotency-Key fingerprint tells apart bodies that differ only at the deepest allowed level', () => {
  const deep = (leaf: number) => JSON.parse(`${'{"a":'.repeat(MAX_JSON_DEPTH - 1)}{"b":${leaf}}${'}'.repeat(MAX_JSON_DEPTH - 1)}`);
  assert.is.not(fingerprintOf('POST', '/users', deep(1)), fingerprintOf('POST', '/users', deep(2)));
  assert.is(fingerprintOf('POST', '/users', deep(1)), fingerprintOf('POST', '/users', deep(1)));
});

nesting.run();

// 4. Amplification
const amplification = withService('bodies: bounded errors');

const manyKeys = (count: number, value: (i: number) => unknown = (i) => i) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`unknown${i}`, value(i)]));

amplification(`1,990 unknown keys get a 422 listing ${MAX_REPORTED_ERRORS} errors and saying how many more`, async (ctx) => {
  const before = await state(ctx);
  const keys = MAX_OBJECT_MEMBERS - 10;
  const body = manyKeys(keys);
  for (const write of writes(ctx)) {
    const reply = await ctx.service.request(write.method, write.path, { body, headers: write.headers });
    assertProblem(reply, 422, write.label);
    assert.is(reply.body.errors.length, MAX_REPORTED_ERRORS, write.label);
    const kind = write.path.endsWith('/pets') ? 'pets' : 'users';
    assert.ok(
      reply.body.errors.some((e: { path: string; message: string }) => e.path === 'unknown0' && e.message === `is not a field of ${kind}`),
    );
    const total = write.method === 'PATCH' ? keys : keys + 2; // POST and PUT also miss two required fields
    assert.ok(reply.body.detail.includes(`The first ${MAX_REPORTED_ERRORS} of `), `${write.label}: ${reply.body.detail}`);
    assert.ok(reply.body.detail.includes(`; ${total - MAX_REPORTED_ERRORS} more are not.`), `${write.label}: ${reply.body.detail}`);
    assert.ok(reply.text.length < 10_000, `${write.label}: ${reply.text.length} bytes`);
  }
  assert.equal(await state(ctx), before);
});

amplification('errors about the fields come before the unknown keys, wrong-typed values included', async (ctx) => {
  const before = await state(ctx);
  const body = { ...manyKeys(1_500, (i) => [i, { nested: `${i}` }]), name: 1, email: false };
  const reply = await ctx.service.request('PUT', ctx.path, { body });
  assertProblem(reply, 422, 'PUT');
  assert.is(reply.body.errors.length, MAX_REPORTED_ERRORS);
  assert.equal(
    reply.body.errors.slice(0, 3).map((e: { path: string }) => e.path),
    ['name', 'email', 'unknown0'],
  );
  assert.ok(
    reply.body.detail.endsWith(`The first ${MAX_REPORTED_ERRORS} of 1502 errors are listed; 1452 more are not.`),
    reply.body.detail,
  );
  assert.equal(await state(ctx), before);
});

amplification(`an object of more than ${MAX_OBJECT_MEMBERS} members is refused before it is parsed, anywhere in the body`, async (ctx) => {
  const before = await state(ctx);
  for (const body of [manyKeys(50_000), { name: 'x', nested: manyKeys(MAX_OBJECT_MEMBERS + 1) }, [manyKeys(MAX_OBJECT_MEMBERS + 1)]]) {
    for (const write of writes(ctx)) {
      const reply = await ctx.service.request(write.method, write.path, { body, headers: write.headers });
      assertProblem(reply, 400, write.label);
      assert.match(reply.body.detail, `more than ${MAX_OBJECT_MEMBERS} members`);
    }
  }
  // Exactly the limit is parsed and judged by the schema (a 422 naming the unknown keys).
  const limit = await ctx.service.request('PUT', ctx.path, { body: manyKeys(MAX_OBJECT_MEMBERS) });
  assertProblem(limit, 422, 'PUT');
  assert.equal(await state(ctx), before);
});

amplification('a key a megabyte long is not echoed back whole', async (ctx) => {
  const before = await state(ctx);
  const name = 'k'.repeat(1_000_000);
  for (const write of writes(ctx)) {
    const reply = await ctx.service.request(write.method, write.path, { body: { [name]: 1 }, headers: write.headers });
    assertProblem(reply, 422, write.label);
    const path = reply.body.errors.find((e: { path: string }) => e.path.startsWith('kkk')).path;
    assert.is(path, `${'k'.repeat(MAX_ECHOED_LENGTH)}…`, write.label);
    assert.ok(reply.text.length < 2_000, `${write.label}: ${reply.text.length} bytes`);
  }
  assert.equal(await state(ctx), before);
});

amplification('a long path or id is not echoed back whole: neither in the detail nor in the instance', async (ctx) => {
  const id = '9'.repeat(5_000);
  for (const path of [`/users/${id}`, `/${'n'.repeat(5_000)}`]) {
    const reply = await ctx.service.request('GET', path);
    assertProblem(reply, 404, path.slice(0, 12));
    assert.is(reply.body.instance, `${path.slice(0, MAX_ECHOED_LENGTH)}…`);
    assert.ok(reply.text.length < 1_000, `${reply.text.length} bytes`);
  }
});

amplification('echoed text is cut between characters: never inside a surrogate pair or a percent-escape', async (ctx) => {
  // 63 ASCII letters, then emoji (two UTF-16 units each): the cut keeps the first emoji whole, as the 64th character.
  const name = `${'a'.repeat(63)}😀😀😀`;
  const reply = await ctx.service.request('POST', '/users', { body: { [name]: 1, name: 'x', email: 'cut@example.com' } });
  assertProblem(reply, 422, 'POST');
  assert.ok(
    reply.body.errors.some((e: { path: string }) => e.path === `${'a'.repeat(63)}😀…`),
    JSON.stringify(reply.body.errors),
  );
  assert.not.ok(reply.text.includes('\ufffd'), reply.text);
  const emoji = '%F0%9F%98%80'.repeat(10);
  const path = `/nothing/${'a'.repeat(50)}${emoji}`;
  const missing = await ctx.service.request('GET', path);
  assertProblem(missing, 404, 'GET');
  // 64 characters end inside the second percent-escape (`%9`): it is left out whole.
  assert.is(missing.body.instance, `/nothing/${'a'.repeat(50)}%F0…`);
});

amplification('a body of only white space past MAX_BODY_BYTES is a 413, not an empty body', async (ctx) => {
  const headers = { 'content-type': 'application/json' };
  const reply = await ctx.service.request('POST', '/users', { raw: ' '.repeat(1024 * 1024 + 1), headers });
  assertProblem(reply, 413, 'POST');
  assertProblem(await ctx.service.request('POST', '/users', { raw: '   ', headers }), 400, 'POST');
});

amplification('a few errors are listed whole, with no count in the detail', async (ctx) => {
  const reply = await ctx.service.request('POST', '/users', { body: { name: 1, nope: 2 } });
  assertProblem(reply, 422, 'POST');
  assert.equal(reply.body.errors, [
    { path: 'name', message: reply.body.errors[0].message },
    { path: 'email', message: 'is required' },
    { path: 'nope', message: 'is not a field of users' },
  ]);
  assert.is(reply.body.detail, 'The body is not a valid users representation.');
});

amplification.run();

// 5. Unicode
const unicode = withService('bodies: lone surrogates');

unicode('a lone surrogate in a value is a 422 naming the field, on every write', async (ctx) => {
  const before = await state(ctx);
  for (const write of writes(ctx)) {
    for (const text of ['\\ud800', 'a\\udfffb', '\\udc00\\ud800', 'x\\ud83d']) {
      const label = `${write.label}, "${text}"`;
      const raw = `{"name":"${text}","email":"lone-${Date.now()}@example.com","species":"dog"}`;
      const reply = await ctx.service.request(write.method, write.path, { raw, headers: write.headers });
      assertProblem(reply, 422, label);
      assert.equal(reply.body.errors, [{ path: 'name', message: 'contains a lone UTF-16 surrogate, which is not Unicode text' }], label);
    }
  }
  assert.equal(await state(ctx), before);
});

unicode('lone surrogates in keys and nested values are named by their path', async (ctx) => {
  const before = await state(ctx);
  const raw = '{"ok":["fine","\\ud800"],"n\\udc00me":1,"deep":{"x":{"\\ud801":"\\udc01"}}}';
  const reply = await ctx.service.request('PATCH', ctx.path, { raw, headers: { 'content-type': 'application/merge-patch+json' } });
  assertProblem(reply, 422, 'PATCH');
  assert.equal(
    reply.body.errors.map((e: { path: string; message: string }) => [e.path, e.message.split(' a lone')[0]]),
    [
      ['ok.1', 'contains'],
      ['n\ufffdme', 'is a name with'],
      ['deep.x.\ufffd', 'is a name with'],
      ['deep.x.\ufffd', 'contains'],
    ],
  );
  assert.equal(await state(ctx), before);
});

unicode('two values differing only in a lone surrogate do not become one stored value', async ({ service }) => {
  const first = await service.request('POST', '/users', {
    raw: '{"name":"A","email":"a\\ud800@example.com"}',
    headers: { 'content-type': 'application/json' },
  });
  const second = await service.request('POST', '/users', {
    raw: '{"name":"A","email":"a\\udc00@example.com"}',
    headers: { 'content-type': 'application/json' },
  });
  assertProblem(first, 422, 'first');
  assertProblem(second, 422, 'second');
});

unicode('a member named twice counts once, with its last value; the earlier one is never checked', async ({ service }) => {
  const made = await service.request('POST', '/users', {
    raw: '{"name":"a\\ud800","email":"twice@example.com","name":"Last"}',
    headers: { 'content-type': 'application/json' },
  });
  assert.is(made.status, 201, made.text);
  assert.is(made.body.name, 'Last');
  assert.is((await service.request('GET', made.headers.get('location') as string)).body.name, 'Last');
});

unicode('surrogate pairs (astral characters) are stored and round-trip exactly', async ({ service }) => {
  const made = await service.request('POST', '/users', {
    raw: '{"name":"\\ud83d\\ude00 😀","email":"astral@example.com"}',
    headers: { 'content-type': 'application/json' },
  });
  assert.is(made.status, 201, made.text);
  assert.is(made.body.name, '😀 😀');
  const path = made.headers.get('location') as string;
  const fetched = await service.request('GET', path);
  const put = await service.request('PUT', path, { body: fetched.body });
  assert.is(put.status, 200, put.text);
  assert.is(put.body.name, '😀 😀');
});

unicode('a body that is not UTF-8 is a 400, not silently turned into U+FFFD', async (ctx) => {
  const before = await state(ctx);
  // ED A0 80 is a surrogate encoded as UTF-8 ("CESU"); C3 28 is a broken two-byte sequence.
  for (const bytes of [
    [0xed, 0xa0, 0x80],
    [0xc3, 0x28],
  ]) {
    const body = Buffer.concat([Buffer.from('{"name":"'), Buffer.from(bytes), Buffer.from('"}')]);
    const response = await fetch(`${ctx.service.url}${ctx.path}`, {
      method: 'PATCH',
      body,
      headers: { 'content-type': 'application/json' },
    });
    const problem = await response.json();
    assert.is(response.status, 400);
    assert.is(problem.detail, 'The request body is not valid UTF-8.');
  }
  assert.equal(await state(ctx), before);
});

unicode('query values and path segments cannot carry a lone surrogate into the service', async ({ service }) => {
  // Percent-encoded bytes decode as UTF-8, never to a lone surrogate; the query parser may refuse them.
  const expected: [string, number][] = [
    ['/users?name=%ED%A0%80', 400],
    ['/users/%ED%A0%80', 404],
    ['/users?%ED%A0%80=1', 400],
    ['/users?name=%uD800', 400],
  ];
  for (const [path, status] of expected) {
    const reply = await service.request('GET', path);
    assert.is(reply.status, status, `${path}: ${reply.text}`);
    assert.not.match(reply.text, /\\ud[89a-f][0-9a-f]{2}/i, path);
  }
});

unicode.run();

// 6. Prototype keys
const prototypes = withService('bodies: prototype keys');

prototypes('PATCH with "__proto__" is a 422 naming "__proto__", in both media types', async (ctx) => {
  const before = await state(ctx);
  for (const type of ['application/merge-patch+json', 'application/json']) {
    for (const raw of [
      '{"__proto__":{"x":1}}',
      '{"__proto__":{"name":"Mallory"},"name":null}',
      '{"__proto__":{"email":"m@example.com"}}',
    ]) {
      const reply = await ctx.service.request('PATCH', ctx.path, { raw, headers: { 'content-type': type } });
      assertProblem(reply, 422, `${type} ${raw}`);
      assert.ok(
        reply.body.errors.some((e: { path: string; message: string }) => e.path === '__proto__' && e.message === 'is not a field of users'),
        `${type} ${raw}: ${reply.text}`,
      );
    }
  }
  assert.equal(await state(ctx), before);
});

prototypes('"constructor", "prototype" and other inherited names are unknown fields, even with null', async (ctx) => {
  const before = await state(ctx);
  for (const key of ['constructor', 'prototype', 'toString', 'hasOwnProperty', '__proto__', '__defineGetter__']) {
    for (const value of ['null', '1', '{"a":1}']) {
      const reply = await ctx.service.request('PATCH', ctx.path, {
        raw: `{"${key}":${value}}`,
        headers: { 'content-type': 'application/json' },
      });
      assertProblem(reply, 422, `${key}: ${value}`);
      assert.equal(reply.body.errors, [{ path: key, message: 'is not a field of users' }], `${key}: ${value}`);
    }
  }
  assert.equal(await state(ctx), before);
});

prototypes('"__proto__" is refused on POST, PUT and related POST too, and nested it is a wrong type', async (ctx) => {
  const before = await state(ctx);
  for (const write of writes(ctx)) {
    const raw = `{"__proto__":{"name":"M"},"name":"N","email":"p-${Date.now()}@example.com","species":"dog"}`;
    const reply = await ctx.service.request(write.method, write.path, { raw, headers: write.headers });
    assertProblem(reply, 422, write.label);
    assert.ok(
      reply.body.errors.some((e: { path: string }) => e.path === '__proto__'),
      write.label,
    );
    const nested = await ctx.service.request(write.method, write.path, {
      raw: '{"name":{"__proto__":{"length":1}}}',
      headers: write.headers,
    });
    assertProblem(nested, 422, write.label);
    assert.ok(
      nested.body.errors.some((e: { path: string }) => e.path === 'name'),
      write.label,
    );
  }
  assert.equal(await state(ctx), before);
  assert.is(({} as Record<string, unknown>).x, undefined);
  assert.is(({} as Record<string, unknown>).name, undefined);
});

prototypes.run();

// The merge patch on its own (RFC 7396)
const mergePatch = suite('bodies: applyMergePatch');

mergePatch('follows the examples of RFC 7396 appendix A', () => {
  const cases: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [
      ['a', 'b'],
      ['c', 'd'],
      ['c', 'd'],
    ],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [target, patch, expected] of cases) {
    // JSON round trip: the result's objects have no prototype, which assert.equal would notice.
    assert.equal(JSON.parse(JSON.stringify(applyMergePatch(target, patch))), expected, JSON.stringify([target, patch]));
  }
});

mergePatch('does not change its target', () => {
  const target = { a: { b: 1 } };
  applyMergePatch(target, { a: { b: 2, c: 3 } });
  assert.equal(target, { a: { b: 1 } });
});

mergePatch('treats "__proto__" and "constructor" as member names, never as the prototype', () => {
  const result = applyMergePatch({ name: 'Ada' }, JSON.parse('{"__proto__":{"admin":true},"constructor":{"x":1},"name":null}')) as Record<
    string,
    unknown
  >;
  assert.is(Object.getPrototypeOf(result), null);
  assert.equal(Object.keys(result), ['__proto__', 'constructor']);
  assert.is(result.admin, undefined);
  assert.is(result.name, undefined);
  assert.is(({} as Record<string, unknown>).admin, undefined);
});

mergePatch('merges a patch nested far deeper than any stack allows', () => {
  const levels = 200_000;
  const patch: Record<string, unknown> = {};
  let at = patch;
  for (let i = 0; i < levels; i++) {
    const next = {};
    at.a = next;
    at = next;
  }
  at.leaf = 1;
  let result = applyMergePatch({ a: 1 }, patch) as Record<string, unknown>;
  for (let i = 0; i < levels; i++) result = result.a as Record<string, unknown>;
  assert.is(result.leaf, 1);
});

mergePatch.run();

const jsonText = suite('bodies: checkJsonText');

jsonText('counts the nesting of arrays and objects, not brackets inside strings or after escapes', () => {
  checkJsonText(deepArray(MAX_JSON_DEPTH));
  checkJsonText(deepObject(MAX_JSON_DEPTH));
  checkJsonText(JSON.stringify({ a: '['.repeat(1000), b: '\\"[[[['.repeat(100), c: ['{'.repeat(500)] }));
  for (const deep of [deepArray(MAX_JSON_DEPTH + 1), deepObject(MAX_JSON_DEPTH + 1), `{"x":"\\"",${deepArray(MAX_JSON_DEPTH)}}`]) {
    try {
      checkJsonText(deep);
      assert.unreachable('a body past the depth limit passed');
    } catch (error) {
      assert.instance(error, ApiError);
      assert.is((error as ApiError).code, 'badRequest');
    }
  }
});

jsonText.run();

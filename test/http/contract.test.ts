// The shared contract suite of API.md §3–§4, run against every resource kind and every related
// path of the tests' pet shop (a copy of the shipped schema): statuses, headers and problem bodies
// for each (path, method) pair.

import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRegistry } from '../../src/model/registry.js';
import * as schema from '../pet-shop/schema.js';
import { FIXTURES, type KindFixture } from '../support/fixtures.js';
import { type Reply, type Service, startService } from '../support/helpers.js';

const COLLECTION_ALLOW = 'GET, HEAD, POST, OPTIONS';
const ELEMENT_ALLOW = 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS';

function assertProblem(reply: Reply, status: number): void {
  assert.is(reply.status, status, reply.text);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.body.status, status);
  assert.type(reply.body.title, 'string');
  assert.type(reply.body.detail, 'string');
  assert.type(reply.body.type, 'string');
  assert.type(reply.body.instance, 'string');
  assert.not.match(reply.text, /SELECT|INSERT|UPDATE |node_modules|\/work\/|at .*\(.*:\d+:\d+\)/);
}

function errorPaths(reply: Reply): string[] {
  return (reply.body.errors ?? []).map((e: { path: string }) => e.path).sort();
}

function contractFor(fixture: KindFixture) {
  const test = suite<{ service: Service }>(`contract: /${fixture.name}`);
  const base = `/${fixture.name}`;
  const make = async (service: Service) => {
    const reply = await service.request('POST', base, { body: await fixture.sample(service) });
    assert.is(reply.status, 201, reply.text);
    return reply;
  };

  test.before(async (ctx) => {
    ctx.service = await startService();
  });
  test.after(async ({ service }) => service.close());

  test('POST creates an element: 201, Location, the stored representation', async ({ service }) => {
    const sample = await fixture.sample(service);
    const reply = await service.request('POST', base, { body: sample });
    assert.is(reply.status, 201);
    assert.is(reply.headers.get('location'), `${base}/${reply.body.id}`);
    assert.match(reply.headers.get('content-type') ?? '', /^application\/json/);
    for (const [key, value] of Object.entries(sample)) assert.equal(reply.body[key], value, key);
    assert.match(reply.body.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.is(reply.body.updatedAt, reply.body.createdAt);
    const fetched = await service.request('GET', reply.headers.get('location') as string);
    assert.is(fetched.status, 200);
    assert.equal(fetched.body, reply.body);
  });

  test('GET on the collection lists elements as a JSON array', async ({ service }) => {
    const made = await make(service);
    const reply = await service.request('GET', base);
    assert.is(reply.status, 200);
    assert.ok(Array.isArray(reply.body));
    assert.ok(reply.body.some((row: { id: number }) => row.id === made.body.id));
  });

  test('HEAD answers like GET without a body', async ({ service }) => {
    const made = await make(service);
    for (const path of [base, `${base}/${made.body.id}`]) {
      const get = await service.request('GET', path);
      const head = await service.request('HEAD', path);
      assert.is(head.status, 200);
      assert.is(head.text, '');
      assert.is(head.headers.get('content-length'), get.headers.get('content-length'));
      assert.is(head.headers.get('content-type'), get.headers.get('content-type'));
    }
  });

  test('OPTIONS answers 204 with the exact Allow of each path', async ({ service }) => {
    const made = await make(service);
    const collection = await service.request('OPTIONS', base);
    assert.is(collection.status, 204);
    assert.is(collection.headers.get('allow'), COLLECTION_ALLOW);
    const element = await service.request('OPTIONS', `${base}/${made.body.id}`);
    assert.is(element.status, 204);
    assert.is(element.headers.get('allow'), ELEMENT_ALLOW);
  });

  test('returns 405 with Allow for methods a path does not define', async ({ service }) => {
    const made = await make(service);
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const reply = await service.request(method, base, { body: {} });
      assertProblem(reply, 405);
      assert.is(reply.headers.get('allow'), COLLECTION_ALLOW);
    }
    const reply = await service.request('POST', `${base}/${made.body.id}`, { body: {} });
    assertProblem(reply, 405);
    assert.is(reply.headers.get('allow'), ELEMENT_ALLOW);
  });

  test('a trailing slash names the same path', async ({ service }) => {
    const made = await make(service);
    assert.is((await service.request('GET', `${base}/`)).status, 200);
    const element = await service.request('GET', `${base}/${made.body.id}/`);
    assert.equal(element.body, made.body);
  });

  test('returns 404 for a missing or malformed id on every method', async ({ service }) => {
    const sample = await fixture.sample(service);
    for (const id of ['999999', 'abc', '1.5', '01', '-']) {
      for (const method of ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'POST', 'OPTIONS']) {
        const reply = await service.request(method, `${base}/${id}`, method === 'GET' || method === 'HEAD' ? {} : { body: sample });
        assert.is(reply.status, 404, `${method} ${base}/${id}`);
        if (method !== 'HEAD') assertProblem(reply, 404);
      }
    }
  });

  test('PUT accepts the fetched representation back and replaces the element', async ({ service }) => {
    const made = await make(service);
    const path = `${base}/${made.body.id}`;
    const echoed = await service.request('PUT', path, { body: made.body });
    assert.is(echoed.status, 200, echoed.text);
    const changed = { ...echoed.body, [fixture.change.field]: fixture.change.value };
    const reply = await service.request('PUT', path, { body: changed });
    assert.is(reply.status, 200);
    assert.is(reply.body[fixture.change.field], fixture.change.value);
    assert.is(reply.body.createdAt, made.body.createdAt);
    assert.equal((await service.request('GET', path)).body, reply.body);
  });

  test('PUT without a required field is a 422 naming it', async ({ service }) => {
    const made = await make(service);
    const { [fixture.required]: _, ...rest } = made.body;
    const reply = await service.request('PUT', `${base}/${made.body.id}`, { body: rest });
    assertProblem(reply, 422);
    assert.equal(errorPaths(reply), [fixture.required]);
  });

  test('PATCH merges (application/json and application/merge-patch+json)', async ({ service }) => {
    const made = await make(service);
    const path = `${base}/${made.body.id}`;
    for (const type of ['application/merge-patch+json', 'application/json']) {
      const reply = await service.request('PATCH', path, {
        body: { [fixture.change.field]: fixture.change.value },
        headers: { 'content-type': type },
      });
      assert.is(reply.status, 200, reply.text);
      assert.equal(reply.body, { ...made.body, [fixture.change.field]: fixture.change.value, updatedAt: reply.body.updatedAt });
    }
  });

  test('PATCH that removes a required field is a 422, and nothing changes', async ({ service }) => {
    const made = await make(service);
    const path = `${base}/${made.body.id}`;
    const reply = await service.request('PATCH', path, { body: { [fixture.required]: null } });
    assertProblem(reply, 422);
    assert.equal(errorPaths(reply), [fixture.required]);
    assert.equal((await service.request('GET', path)).body, made.body);
  });

  test('unknown fields and changed read-only fields are 422 with field errors', async ({ service }) => {
    const made = await make(service);
    const sample = await fixture.sample(service);
    const create = await service.request('POST', base, { body: { ...sample, id: 7, nonsense: 1 } });
    assertProblem(create, 422);
    assert.equal(errorPaths(create), ['id', 'nonsense']);
    const put = await service.request('PUT', `${base}/${made.body.id}`, { body: { ...made.body, createdAt: '2000-01-01T00:00:00.000Z' } });
    assertProblem(put, 422);
    assert.equal(errorPaths(put), ['createdAt']);
    // The same instant written otherwise is the value held (a client's date library may re-spell it).
    const respelled = made.body.createdAt.replace(/(\.\d{3})Z$/, '$1000+00:00');
    assert.is.not(respelled, made.body.createdAt);
    const same = await service.request('PUT', `${base}/${made.body.id}`, { body: { ...made.body, createdAt: respelled } });
    assert.is(same.status, 200, same.text);
    assert.is(same.body.createdAt, made.body.createdAt);
    const patch = await service.request('PATCH', `${base}/${made.body.id}`, { body: { id: made.body.id + 1 } });
    assertProblem(patch, 422);
    assert.equal(errorPaths(patch), ['id']);
  });

  test('a body of the wrong type is 422; a body neither an object nor an array of them is 422', async ({ service }) => {
    const sample = await fixture.sample(service);
    const reply = await service.request('POST', base, { body: { ...sample, [fixture.change.field]: { nested: true } } });
    assertProblem(reply, 422);
    assert.equal(errorPaths(reply), [fixture.change.field]);
    // An array is a bulk create (API.md §7): its elements must be objects.
    for (const body of ['text', 42, true, [sample, 'text']]) assertProblem(await service.request('POST', base, { body }), 422);
  });

  test('malformed JSON is 400, a non-JSON media type 415, an empty body 400', async ({ service }) => {
    const made = await make(service);
    assertProblem(await service.request('POST', base, { raw: '{"name": ', headers: { 'content-type': 'application/json' } }), 400);
    assertProblem(await service.request('POST', base, { raw: '', headers: { 'content-type': 'application/json' } }), 400);
    const text = await service.request('POST', base, { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assertProblem(text, 415);
    assert.is(text.headers.get('accept-post'), 'application/json');
    const patch = await service.request('PATCH', `${base}/${made.body.id}`, { raw: '{}', headers: { 'content-type': 'text/plain' } });
    assertProblem(patch, 415);
    assert.is(patch.headers.get('accept-patch'), 'application/merge-patch+json, application/json');
    assertProblem(await service.request('PUT', `${base}/${made.body.id}`, { raw: '{}' }), 415);
    // Empty parameters are allowed (RFC 9110 §5.6.6): `application/json;` is application/json.
    const sample = await fixture.sample(service);
    const bare = await service.request('POST', base, { raw: JSON.stringify(sample), headers: { 'content-type': 'application/json;' } });
    assert.is(bare.status, 201, bare.text);
    const empty = await service.request('PATCH', `${base}/${made.body.id}`, {
      raw: '{}',
      headers: { 'content-type': 'application/merge-patch+json; ;charset=utf-8' },
    });
    assert.is(empty.status, 200, empty.text);
  });

  test('a body over the limit is 413', async ({ service }) => {
    const sample = await fixture.sample(service);
    const huge = { ...sample, [fixture.change.field]: 'x'.repeat(service.config.maxBodyBytes) };
    assertProblem(await service.request('POST', base, { body: huge }), 413);
  });

  test('DELETE answers 204, then the element is gone (404)', async ({ service }) => {
    const made = await make(service);
    const path = `${base}/${made.body.id}`;
    const reply = await service.request('DELETE', path);
    assert.is(reply.status, 204);
    assert.is(reply.text, '');
    assertProblem(await service.request('GET', path), 404);
    assertProblem(await service.request('DELETE', path), 404);
  });

  test('an unknown query parameter on an element is 400 naming it', async ({ service }) => {
    const made = await make(service);
    const reply = await service.request('GET', `${base}/${made.body.id}?expand=all`);
    assertProblem(reply, 400);
    assert.equal(errorPaths(reply), ['expand']);
  });

  return test;
}

function relatedContract() {
  const test = suite<{ service: Service }>('contract: related paths');
  const registry = createRegistry(schema);
  const fixture = (name: string) => FIXTURES.find((f) => f.name === name) as KindFixture;

  test.before(async (ctx) => {
    ctx.service = await startService();
  });
  test.after(async ({ service }) => service.close());

  for (const relation of registry.relations) {
    const { parent, child, field, name } = relation;
    const parentOf = async (service: Service) => {
      const reply = await service.request('POST', `/${parent.name}`, { body: await fixture(parent.name).sample(service) });
      return reply.body.id as number;
    };
    const childBody = async (service: Service) => {
      const { [field]: _, ...rest } = await fixture(child.name).sample(service);
      return rest;
    };

    test(`/${parent.name}/{id}/${name}: POST creates a child bound to the parent, GET lists only those`, async ({ service }) => {
      const id = await parentOf(service);
      const other = await service.request('POST', `/${child.name}`, { body: await fixture(child.name).sample(service) });
      assert.is(other.status, 201);
      const empty = await service.request('GET', `/${parent.name}/${id}/${name}`);
      assert.is(empty.status, 200);
      assert.equal(empty.body, []);
      const made = await service.request('POST', `/${parent.name}/${id}/${name}`, { body: await childBody(service) });
      assert.is(made.status, 201, made.text);
      assert.is(made.body[field], id);
      assert.is(made.headers.get('location'), `/${child.name}/${made.body.id}`);
      const listed = await service.request('GET', `/${parent.name}/${id}/${name}/`);
      assert.equal(listed.body, [made.body]);
      const echoed = await service.request('POST', `/${parent.name}/${id}/${name}`, {
        body: { ...(await childBody(service)), [field]: id },
      });
      assert.is(echoed.status, 201);
    });

    test(`/${parent.name}/{id}/${name}: a different ${field} in the body is 422`, async ({ service }) => {
      const id = await parentOf(service);
      const reply = await service.request('POST', `/${parent.name}/${id}/${name}`, {
        body: { ...(await childBody(service)), [field]: id + 1000 },
      });
      assertProblem(reply, 422);
      assert.equal(errorPaths(reply), [field]);
    });

    test(`/${parent.name}/{id}/${name}: 404 when the parent does not exist, on any method`, async ({ service }) => {
      for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS']) {
        const reply = await service.request(
          method,
          `/${parent.name}/999999/${name}`,
          method === 'GET' ? {} : { body: await childBody(service) },
        );
        assertProblem(reply, 404);
      }
      assertProblem(await service.request('GET', `/${parent.name}/abc/${name}`), 404);
    });

    test(`/${parent.name}/{id}/${name}: OPTIONS 204 and 405 with the exact Allow`, async ({ service }) => {
      const id = await parentOf(service);
      const options = await service.request('OPTIONS', `/${parent.name}/${id}/${name}`);
      assert.is(options.status, 204);
      assert.is(options.headers.get('allow'), COLLECTION_ALLOW);
      for (const method of ['PUT', 'PATCH', 'DELETE']) {
        const reply = await service.request(method, `/${parent.name}/${id}/${name}`, { body: {} });
        assertProblem(reply, 405);
        assert.is(reply.headers.get('allow'), COLLECTION_ALLOW);
      }
    });
  }
  return test;
}

for (const fixture of FIXTURES) contractFor(fixture).run();
relatedContract().run();

// The OpenAPI document: valid per a standard OpenAPI 3.1 validator, the same (path, method) set as
// the router serves, and per resource kind the schemas, parameters, headers and statuses.
import { compileErrors, validate } from '@readme/openapi-parser';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { userSample } from './fixtures.js';
import { type Service, startService } from './helpers.js';

type Doc = { paths: Record<string, Record<string, any>>; components: Record<string, any>; [key: string]: any };
const test = suite<{ service: Service; doc: Doc }>('OpenAPI document');

test.before(async (ctx) => {
  ctx.service = await startService();
  ctx.doc = (await ctx.service.request('GET', '/openapi.json')).body;
});
test.after(async ({ service }) => service.close());

test('is OpenAPI 3.1 and passes a standard validator', async ({ doc }) => {
  assert.is(doc.openapi, '3.1.0');
  const result = await validate(structuredClone(doc) as never);
  assert.ok(result.valid, result.valid ? '' : compileErrors(result));
});

test('documents exactly the (path, method) pairs the router serves', ({ service, doc }) => {
  const served = service.app.endpoints.flatMap((e) => e.methods.map((m) => `${m} ${e.path}`)).sort();
  const documented = Object.entries(doc.paths)
    .flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`))
    .sort();
  assert.equal(documented, served);
});

test("each documented path's methods are what OPTIONS answers in Allow", async ({ service, doc }) => {
  const user = await service.request('POST', '/users', { body: userSample() });
  for (const [path, item] of Object.entries(doc.paths)) {
    const real = path.replace('{id}', String(user.body.id));
    if (!real.startsWith('/users') && path.includes('{id}')) continue;
    const reply = await service.request('OPTIONS', real);
    assert.is(reply.status, 204, real);
    assert.equal(
      (reply.headers.get('allow') ?? '').split(', ').sort(),
      Object.keys(item)
        .map((m) => m.toUpperCase())
        .sort(),
      path,
    );
  }
});

test('every resource kind has its element, create, replace and patch schemas, read-only marked', ({ service, doc }) => {
  for (const resource of service.app.registry.resources) {
    const element = doc.components.schemas[resource.name];
    assert.ok(element, resource.name);
    for (const field of resource.fields) {
      assert.ok(element.properties[field.key], `${resource.name}.${field.key}`);
      assert.is(element.properties[field.key].readOnly === true, field.readOnly, `${resource.name}.${field.key} readOnly`);
    }
    const create = doc.components.schemas[`${resource.name}.create`];
    assert.not.ok('id' in create.properties);
    assert.is(create.additionalProperties, false);
    assert.ok(doc.components.schemas[`${resource.name}.replace`].properties.id.readOnly);
    assert.is(doc.components.schemas[`${resource.name}.patch`].required, undefined);
  }
  assert.equal(doc.components.schemas['users.create'].required.sort(), ['email', 'name']);
  assert.equal(doc.components.schemas.pets.properties.species.enum, ['cat', 'dog', 'bird', 'fish', 'other']);
});

test('operations carry their statuses, headers and problem responses', ({ doc }) => {
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path]?.[method].responses ?? {}).sort();
  assert.equal(statuses('/users', 'get'), ['200', '400', '405', '406', 'default']);
  assert.equal(statuses('/users', 'post'), ['201', '400', '405', '406', '409', '413', '415', '422', 'default']);
  assert.equal(statuses('/users/{id}', 'get'), ['200', '304', '404', '405', '406', 'default']);
  assert.equal(statuses('/users/{id}', 'put'), ['200', '400', '404', '405', '406', '409', '412', '413', '415', '422', 'default']);
  assert.equal(statuses('/users/{id}', 'delete'), ['204', '404', '405', '409', '412', 'default']);
  assert.equal(statuses('/users/{id}/pets', 'get'), ['200', '400', '404', '405', '406', 'default']);
  const created = doc.paths['/users']?.post.responses['201'];
  assert.ok(created.headers.Location && created.headers.ETag);
  assert.ok(doc.paths['/users']?.get.responses['200'].headers.Link);
  assert.ok(doc.paths['/users']?.get.responses['200'].headers['X-Total-Count']);
  assert.ok(doc.paths['/users']?.options.responses['204'].headers.Allow);
  assert.ok(doc.components.responses.Unprocessable.content['application/problem+json']);
  assert.ok(doc.paths['/users/{id}']?.patch.requestBody.content['application/merge-patch+json']);
});

test('list operations document the query language of §5', ({ doc }) => {
  const names = (doc.paths['/pets']?.get.parameters as any[]).map((p) => p.name ?? p.$ref.split('/').pop());
  for (const name of [
    'limit',
    'cursor',
    'sort',
    'count',
    'name',
    'name[contains]',
    'name[startsWith]',
    'ownerId[null]',
    'id[in]',
    'species[ne]',
    'createdAt[gte]',
  ]) {
    assert.ok(names.includes(name), name);
  }
  assert.not.ok(names.includes('id[contains]'), 'contains is for text fields only');
});

test.run();

const secured = suite<{ service: Service }>('OpenAPI document with authentication');
secured.before(async (ctx) => {
  ctx.service = await startService({ env: { AUTH_TOKEN: 'a-token-of-sixteen-chars' } });
});
secured.after(async ({ service }) => service.close());

secured('declares the bearer scheme and the 401/403 answers; stays readable without a token', async ({ service }) => {
  const reply = await service.request('GET', '/openapi.json');
  assert.is(reply.status, 200);
  assert.equal(reply.body.components.securitySchemes, { bearer: { type: 'http', scheme: 'bearer' } });
  assert.equal(reply.body.security, [{ bearer: [] }]);
  assert.ok(reply.body.paths['/users'].get.responses['401']);
  assert.is((await service.request('GET', '/docs')).status, 200);
});

secured.run();

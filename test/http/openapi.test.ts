// The OpenAPI document: valid per a standard OpenAPI 3.1 validator, the same (path, method) set as
// the router serves, and per resource kind the schemas, parameters, headers and statuses.
import { compileErrors, validate } from '@readme/openapi-parser';
import { integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { type Document, OpenAPIBackend } from 'openapi-backend';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CHANGES_PATH, TICKET_PATH } from '../../src/api/changes.js';
import { createRegistry, READ_METHODS } from '../../src/model/registry.js';
import { toOpenApi } from '../../src/openapi/document.js';
import { originOf } from '../../src/web/pointer.js';
import { FIXTURES, userSample } from '../support/fixtures.js';
import { type Service, startService } from '../support/helpers.js';

type Doc = { paths: Record<string, Record<string, any>>; components: Record<string, any>; [key: string]: any };

/** A response validator over the document (openapi-backend's Ajv): the errors of a body for an operation and status. */
async function responseValidator(doc: Doc): Promise<(body: unknown, operationId: string, status: number) => string[]> {
  const dateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
  const api = new OpenAPIBackend({
    definition: structuredClone(doc) as Document,
    quick: true,
    customizeAjv: (ajv) => ajv.addFormat('date-time', (value: string) => dateTime.test(value) && !Number.isNaN(Date.parse(value))),
  });
  await api.init();
  return (body, operationId, status) =>
    (api.validator.validateResponse(body, operationId, status).errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

/** The first event of the event stream at `url` (read until it comes, at most 5 s), then the stream is closed. */
async function firstEvent(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; type: string; fields: Record<string, string> }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 5000);
  try {
    const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const block = text.split('\n\n').find((b) => /^data:/m.test(b));
      if (block) {
        const fields = Object.fromEntries(
          block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
        );
        return { status: response.status, type: response.headers.get('content-type') ?? '', fields };
      }
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before an event: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

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

test('every resource kind has its element, create, replace and patch schemas', ({ service, doc }) => {
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
    assert.is(doc.components.schemas[`${resource.name}.patch`].required, undefined);
  }
  assert.equal(doc.components.schemas['users.create'].required.sort(), ['email', 'name']);
  assert.equal(doc.components.schemas.pets.properties.species.enum, ['cat', 'dog', 'bird', 'fish', 'other']);
});

test('PUT and PATCH bodies take the read-only fields a GET answered, unmarked (API.md §2)', ({ service, doc }) => {
  for (const resource of service.app.registry.resources) {
    for (const kind of ['replace', 'patch']) {
      const schema = doc.components.schemas[`${resource.name}.${kind}`];
      for (const key of resource.readOnly) {
        const property = schema.properties[key];
        assert.ok(property, `${resource.name}.${kind}.${key}`);
        // Tools drop or refuse readOnly members of requests (openapi-fetch's Writable, validating proxies).
        assert.is(property.readOnly, undefined, `${resource.name}.${kind}.${key} readOnly`);
        assert.match(property.description, /repeat the current value/);
        assert.is(property.type, doc.components.schemas[resource.name].properties[key].type);
      }
      assert.not.ok(
        schema.required?.some((key: string) => resource.readOnly.has(key)),
        `${resource.name}.${kind} requires a read-only field`,
      );
    }
  }
});

test('a related POST takes a body without the foreign key the path supplies', ({ service, doc }) => {
  for (const route of service.app.registry.routes.filter((r) => r.shape === 'related')) {
    const { resource, relation } = route;
    const field = relation?.field as string;
    // One element, or an array of them (a bulk create): both name the same schema.
    const post = doc.paths[route.path]?.post as { requestBody: { content: Record<string, { schema: { oneOf: any[] } }> } };
    const [one, many] = post.requestBody.content['application/json']?.schema.oneOf ?? [];
    assert.equal(many.items, one);
    const $ref = one.$ref as string;
    const schema = doc.components.schemas[$ref.split('/').pop() as string];
    const create = doc.components.schemas[`${resource.name}.create`];
    assert.not.ok(schema.required?.includes(field), `${route.path} requires ${field}`);
    assert.equal(
      schema.required ?? [],
      (create.required ?? []).filter((key: string) => key !== field),
      route.path,
    );
    // When present it must equal the path's id: never null, even where the field is nullable.
    assert.equal(schema.properties[field].type, 'integer', `${route.path} ${field}`);
    assert.equal(Object.keys(schema.properties).sort(), Object.keys(create.properties).sort());
  }
});

test('a PATCH body allows null exactly where the server accepts it', async ({ service, doc }) => {
  const allowsNull = (schema: any): boolean => schema.type === 'null' || (schema.anyOf ?? []).some(allowsNull);
  for (const resource of service.app.registry.resources) {
    const fixture = FIXTURES.find((f) => f.name === resource.name);
    if (!fixture) continue;
    const patch = doc.components.schemas[`${resource.name}.patch`];
    for (const key of Object.keys(patch.properties)) {
      const element = await service.request('POST', `/${resource.name}`, { body: await fixture.sample(service) });
      const reply = await service.request('PATCH', `/${resource.name}/${element.body.id}`, { body: { [key]: null } });
      assert.is(reply.status, allowsNull(patch.properties[key]) ? 200 : 422, `${resource.name}.${key}: ${reply.text}`);
    }
  }
});

test('contains and startsWith take any text, also on an enum field', async ({ service, doc }) => {
  for (const route of service.app.registry.routes.filter((r) => r.shape !== 'element')) {
    for (const parameter of doc.paths[route.path]?.get.parameters ?? []) {
      if (/\[(contains|startsWith)\]$/.test(parameter.name ?? '')) assert.equal(parameter.schema, { type: 'string' }, parameter.name);
    }
  }
  await service.request('POST', '/pets', { body: { name: 'Rex', species: 'dog' } });
  const reply = await service.request('GET', '/pets?species[startsWith]=d&species[contains]=o');
  assert.is(reply.status, 200, reply.text);
  assert.ok(reply.body.length > 0 && reply.body.every((pet: any) => pet.species === 'dog'));
});

test("every GET and HEAD declares its success's media type, and the server answers an Accept of it", async ({ service, doc }) => {
  const ids = new Map<string, string>();
  for (const fixture of FIXTURES) {
    ids.set(fixture.name, (await service.request('POST', `/${fixture.name}`, { body: await fixture.sample(service) })).body.id);
  }
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!item.get) continue; // /_batch: POST only
    const types = Object.keys(item.get.responses['200'].content ?? {});
    assert.ok(types.length > 0, `GET ${path}`);
    // Generators derive Accept from the declared answers; with none, only problem+json is left (a 406).
    assert.equal(item.head?.responses['200'].content, item.get.responses['200'].content, `HEAD ${path}`);
    const reply = await service.request('HEAD', path.replace('{id}', String(ids.get(path.split('/')[1] as string))), {
      headers: { accept: types.join(', ') },
    });
    assert.is(reply.status, 200, `HEAD ${path}`);
    assert.is(reply.headers.get('content-type')?.split(';')[0], types[0], `HEAD ${path}`);
  }
});

test('operations carry their statuses, headers and problem responses', ({ doc }) => {
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path]?.[method].responses ?? {}).sort();
  assert.equal(statuses('/users', 'get'), ['200', '400', '405', '406', 'default']);
  assert.equal(statuses('/users', 'post'), ['201', '400', '405', '406', '409', '413', '415', '422', 'default']);
  assert.equal(statuses('/users/{id}', 'get'), ['200', '304', '400', '404', '405', '406', '412', 'default']);
  assert.equal(statuses('/users/{id}', 'put'), ['200', '400', '404', '405', '406', '409', '412', '413', '415', '422', 'default']);
  assert.equal(statuses('/users/{id}', 'delete'), ['204', '400', '404', '405', '409', '412', 'default']);
  // A query parameter sent where none is taken is a 400: on OPTIONS and the service's own paths too.
  assert.equal(statuses('/users', 'options'), ['204', '400', '405', 'default']);
  assert.equal(statuses('/users/{id}', 'options'), ['204', '400', '404', '405', 'default']);
  assert.equal(statuses('/healthz', 'get'), ['200', '400', '405', '406', 'default']);
  assert.equal(statuses('/healthz', 'options'), ['204', '400', '405', 'default']);
  assert.equal(statuses('/_batch', 'options'), ['204', '400', '405', 'default']);
  assert.equal(statuses('/_changes', 'options'), ['204', '400', '405', 'default']);
  assert.equal(statuses('/_changes/ticket', 'options'), ['204', '400', '405', 'default']);
  assert.equal(statuses('/readyz', 'get'), ['200', '400', '405', '406', '503', 'default']);
  assert.equal(statuses('/users/{id}/pets', 'get'), ['200', '400', '404', '405', '406', 'default']);
  // 405 on every operation, the service's own paths too.
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) assert.ok(operation.responses['405'], `${method} ${path}`);
  }
  // The service's own bodies are described, so that typed clients can read them.
  assert.equal(doc.paths['/']?.get.responses['200'].content['application/json'].schema.required, ['resources', 'links']);
  assert.equal(doc.paths['/healthz']?.get.responses['200'].content['application/json'].schema.properties.status, { const: 'ok' });
  assert.equal(doc.paths['/readyz']?.get.responses['200'].content['application/json'].schema.properties.status, { const: 'ready' });
  // A batch's failing operation answers its own status with `operation`, whichever status it is; the batch
  // request's own Accept and media type (406, 415) are the envelope's: an operation's are always JSON.
  for (const status of ['400', '405', '413', '422'])
    assert.ok(JSON.stringify(doc.paths['/_batch']?.post.responses[status]).includes('"operation"'), status);
  assert.is(doc.paths['/_batch']?.post.responses['406'].$ref, '#/components/responses/NotAcceptable');
  assert.is(doc.paths['/_batch']?.post.responses['415'].$ref, '#/components/responses/UnsupportedMediaType');
  assert.ok(doc.components.responses.UnsupportedMediaType.headers['Accept-Post']);
  assert.ok(doc.components.responses.UnsupportedMediaType.headers['Accept-Patch']);
  const created = doc.paths['/users']?.post.responses['201'];
  assert.ok(created.headers.Location && created.headers.ETag && created.headers['Idempotent-Replayed']);
  assert.ok(doc.paths['/_batch']?.post.responses['200'].headers['Idempotent-Replayed']);
  assert.ok(doc.paths['/users']?.get.responses['200'].headers.Link);
  assert.ok(doc.paths['/users']?.get.responses['200'].headers['X-Total-Count']);
  assert.ok(doc.paths['/users']?.options.responses['204'].headers.Allow);
  assert.ok(doc.components.responses.Unprocessable.content['application/problem+json']);
  assert.ok(doc.paths['/users/{id}']?.patch.requestBody.content['application/merge-patch+json']);
});

test('filter patterns take what the service takes: instants in range, integers JSON carries, no empty in list', async ({
  service,
  doc,
}) => {
  const schemaOf = (name: string) => (doc.paths['/users']?.get.parameters as any[]).find((p) => p.name === name)?.schema;
  const matches = (name: string, value: string) => new RegExp(schemaOf(name).pattern).test(value);
  for (const [name, value] of [
    ['createdAt[gte]', '2026-01-01T10:001'],
    ['createdAt[gte]', '2026-01-01T10:00:00.5001Z'],
    ['createdAt[gte]', '2026-13-01'],
    ['createdAt[gte]', '2026-01-01T10:60Z'],
    ['createdAt[in]', '2026-01-01,2026-01-01T25:00Z'],
    ['id[in]', '1,9007199254740992'],
    ['id[in]', '-0'],
  ] as const) {
    assert.not.ok(matches(name, value), `${name}=${value} is refused by the document`);
    const reply = await service.request('GET', `/users?${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
    assert.is(reply.status, 400, `${name}=${value} is refused by the service`);
  }
  for (const [name, value] of [
    ['createdAt[gte]', '2026-01-01T24:00Z'],
    ['createdAt[lt]', '2026-01-01T10:00:00.500000+05:30'],
    ['id[in]', '-9007199254740991,0,9007199254740991'],
  ] as const) {
    assert.ok(matches(name, value), `${name}=${value} is taken by the document`);
    const reply = await service.request('GET', `/users?${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
    assert.is(reply.status, 200, `${name}=${value} is taken by the service: ${reply.text}`);
  }
  assert.is(schemaOf('name[in]').minLength, 1);
  assert.is((await service.request('GET', '/users?name[in]=')).status, 400);
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

test('list operations of a searchable kind take q naming its searchable fields; others take none', ({ service, doc }) => {
  const resolve = (parameter: any) => (parameter.$ref ? doc.components.parameters[parameter.$ref.split('/').pop()] : parameter);
  const q = (path: string, method: string) =>
    (doc.paths[path]?.[method].parameters as any[]).map(resolve).find((p) => p.name === 'q' && p.in === 'query');
  for (const path of ['/users', '/users/{id}/pets']) {
    for (const method of ['get', 'head']) {
      const parameter = q(path, method);
      assert.ok(parameter, `${method} ${path}`);
      assert.is(parameter.schema.type, 'string', `${method} ${path}`);
      assert.match(parameter.description, /full-text search of name\b/, `${method} ${path}`);
      assert.match(parameter.description, /at most 32 words of at most 100 characters/i, `${method} ${path}`);
      assert.is(typeof parameter.example, 'string', `${method} ${path}`);
    }
  }
  // One component per kind, shared by its collection and its related lists, not repeated per operation.
  const refs = ['/pets', '/users/{id}/pets'].flatMap((path) =>
    ['get', 'head'].map((method) => (doc.paths[path]?.[method].parameters as any[]).find((p) => resolve(p).name === 'q')?.$ref),
  );
  assert.ok(refs[0], 'q is a $ref to a component');
  assert.equal(new Set(refs).size, 1, refs.join(' '));
  for (const method of ['get', 'head']) assert.is(q('/orders', method), undefined, `${method} /orders`);
  assert.is(q('/users/{id}', 'get'), undefined, 'an element takes no q');
  // The registry is the one source: q exactly where the listed kind has searchable fields.
  for (const route of service.app.registry.routes.filter((r) => r.shape !== 'element')) {
    assert.is(q(route.path, 'get') !== undefined, route.resource.searchable.length > 0, route.path);
  }
});

test('sort admits relevance (alone or first) exactly on searchable kinds, as the server does', async ({ service, doc }) => {
  const sort = (path: string) => {
    const parameter = (doc.paths[path]?.get.parameters as any[]).find((p) => p.name === 'sort');
    return { pattern: new RegExp(parameter.schema.pattern), description: parameter.description as string };
  };
  for (const path of ['/users', '/users/{id}/pets']) {
    const { pattern, description } = sort(path);
    assert.match(description, /relevance/, path);
    for (const value of ['relevance', 'relevance,-name', 'name', '-id,name']) assert.ok(pattern.test(value), `${path} ${value}`);
    for (const value of ['-relevance', 'name,relevance', 'relevance,relevance']) assert.not.ok(pattern.test(value), `${path} ${value}`);
  }
  assert.not.ok(sort('/orders').pattern.test('relevance'));
  assert.not.match(sort('/orders').description, /relevance/);
  await service.request('POST', '/users', { body: { ...userSample(), name: 'Ada Lovelace' } });
  const example = doc.components.parameters.usersSearch.example as string;
  const reply = await service.request('GET', `/users?q=${encodeURIComponent(example)}&sort=relevance,-name`);
  assert.is(reply.status, 200, reply.text);
  assert.ok(
    reply.body.some((user: any) => user.name === 'Ada Lovelace'),
    reply.text,
  );
  assert.is((await service.request('GET', '/orders?q=ada')).status, 400);
  assert.is((await service.request('GET', '/users?sort=-relevance&q=ada')).status, 400);
});

/** The kinds whose changes the feed records (API.md §8): every table with a primary key. */
const recordedKinds = (service: Service) =>
  service.app.registry.resources.filter((r) => !r.readOnlyKind && r.key.length > 0).map((r) => r.name);

test('/_changes is documented as the change feed: its parameters, both media types and its statuses', ({ service, doc }) => {
  const resolve = (node: any) => (node?.$ref ? doc.components[node.$ref.split('/')[2]][node.$ref.split('/').pop()] : node);
  for (const method of ['get', 'head']) {
    const operation = doc.paths['/_changes']?.[method];
    assert.ok(operation, method);
    const parameters = Object.fromEntries((operation.parameters as any[]).map(resolve).map((p) => [`${p.in} ${p.name}`, p]));
    assert.equal(Object.keys(parameters).sort(), ['header Last-Event-ID', 'query kinds', 'query limit', 'query since', 'query ticket']);
    assert.equal(parameters['query since'].schema, { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
    assert.equal(parameters['query limit'].schema, { type: 'integer', minimum: 1, maximum: 1000, default: 100 });
    assert.equal(parameters['query kinds'].schema.items.enum, recordedKinds(service));
    assert.is(parameters['query kinds'].explode, false);
    assert.is(parameters['query ticket'].schema.type, 'string');
    assert.equal(Object.keys(operation.responses).sort(), ['200', '400', '405', '406', '410', '503', 'default'], method);
    const ok = operation.responses['200'];
    assert.equal(Object.keys(ok.content), ['application/json', 'text/event-stream']);
    assert.equal(ok.content['application/json'].schema, { type: 'array', items: { $ref: '#/components/schemas/feed.change' } });
    assert.match(ok.content['text/event-stream'].schema.description, /`id:` its seq .*`event:` its op .*`data:` the change as JSON/);
    assert.match(ok.content['text/event-stream'].schema.description, /comment line/);
    assert.ok(ok.headers.Link);
    assert.equal(resolve(operation.responses['410']), doc.components.responses.Gone);
    assert.ok(doc.components.responses.Unavailable.headers['Retry-After']);
  }
  assert.equal(Object.keys(doc.paths['/_changes'] ?? {}).sort(), ['get', 'head', 'options']);
  const change = doc.components.schemas['feed.change'];
  assert.equal(change.required, ['seq', 'kind', 'id', 'op', 'at']);
  assert.equal(change.properties.op.enum, ['create', 'update', 'delete']);
  assert.equal(change.properties.kind.enum, recordedKinds(service));
  assert.is(change.properties.at.format, 'date-time');
  assert.is(change.properties.seq.type, 'integer');
  // One branch per kind: its id as the key's type, its element as the kind's schema.
  assert.equal(
    change.oneOf.map((branch: any) => [branch.properties.kind.const, branch.properties.id.type, branch.properties.element.$ref]),
    recordedKinds(service).map((kind) => [kind, 'integer', `#/components/schemas/${kind}`]),
  );
  const ticket = doc.paths['/_changes/ticket']?.get;
  assert.equal(ticket.responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/feed.ticket' });
  assert.equal(doc.components.schemas['feed.ticket'].required, ['ticket', 'expiresAt']);
  assert.equal(ticket.responses['200'].headers['Cache-Control'].schema, { type: 'string', const: 'no-store' });
});

test('/_changes: the documented bounds, kinds and ticket are what the server accepts and refuses', async ({ service, doc }) => {
  const parameters = doc.paths['/_changes']?.get.parameters as any[];
  const schemaOf = (name: string) => parameters.find((p) => p.name === name).schema;
  const status = async (query: string) => (await service.request('GET', `/_changes?${query}`)).status;
  for (const name of ['since', 'limit']) {
    const { minimum, maximum } = schemaOf(name);
    assert.is(await status(`${name}=${minimum}`), 200, `${name}=${minimum}`);
    assert.is(await status(`${name}=${maximum}`), 200, `${name}=${maximum}`);
    for (const value of [minimum - 1, maximum + 1, 'x', '1.5']) assert.is(await status(`${name}=${value}`), 400, `${name}=${value}`);
  }
  const kinds: string[] = schemaOf('kinds').items.enum;
  for (const kind of kinds) assert.is(await status(`kinds=${kind}`), 200, kind);
  assert.is(await status(`kinds=${kinds.join(',')}`), 200);
  assert.is(await status('kinds=nonesuch'), 400);
  assert.is(await status('kinds='), 400);
  // Last-Event-ID: the pattern takes every seq the server takes, up to 2^53 - 1, and no other spelling.
  const lastEventId = new RegExp(schemaOf('Last-Event-ID').pattern);
  for (const id of ['0', '7', String(Number.MAX_SAFE_INTEGER)]) {
    assert.ok(lastEventId.test(id), id);
    const stream = await service.request('HEAD', '/_changes', { headers: { accept: 'text/event-stream', 'last-event-id': id } });
    assert.is(stream.status, 200, id);
  }
  for (const id of ['07', '-1', '1.5', 'x']) assert.not.ok(lastEventId.test(id), id);
  // Without authentication a ticket opens nothing: one that is not valid is a bad parameter (400), and no 401 is documented.
  const refused = await service.request('GET', '/_changes?ticket=not-a-ticket');
  assert.is(refused.status, 400);
  assert.is(doc.paths['/_changes']?.get.responses['401'], undefined);
  assert.is(refused.headers.get('www-authenticate'), null);
  assert.is((await service.request('GET', '/_changes', { headers: { accept: 'text/html' } })).status, 406);
  assert.is((await service.request('GET', '/_changes/ticket?since=1')).status, 400);
  assert.ok(doc.paths['/_changes/ticket']?.get.responses['400']);
});

test('/_changes: a JSON page and the events of its stream are what the document says', async ({ service, doc }) => {
  const errorsOf = await responseValidator(doc);
  const user = (await service.request('POST', '/users', { body: userSample() })).body;
  await service.request('PATCH', `/users/${user.id}`, { body: { name: 'Renamed' } });
  const pet = (await service.request('POST', `/users/${user.id}/pets`, { body: { name: 'Rex', species: 'dog' } })).body;
  await service.request('DELETE', `/pets/${pet.id}`);
  const page = await service.request('GET', '/_changes?limit=1000');
  assert.is(page.status, 200, page.text);
  assert.equal(errorsOf(page.body, 'changes', 200), []);
  const mine = page.body.filter((c: any) => (c.kind === 'users' && c.id === user.id) || (c.kind === 'pets' && c.id === pet.id));
  assert.equal(
    mine.map((c: any) => [c.kind, c.op, c.element === undefined]),
    [
      ['users', 'create', false],
      ['users', 'update', false],
      ['pets', 'create', true],
      ['pets', 'delete', true],
    ],
  );
  // A page that is not what the schema says is seen (the validator is not blind).
  assert.ok(errorsOf([{ ...mine[0], op: 'made' }], 'changes', 200).length > 0);
  assert.ok(errorsOf([{ ...mine[0], element: { id: 'one' } }], 'changes', 200).length > 0);

  // The stream from the same point: id its seq, event its op, data the change as the page has it.
  const [first] = mine;
  const { status, type, fields } = await firstEvent(`${service.url}/_changes`, { 'last-event-id': String(first.seq - 1) });
  assert.is(status, 200);
  assert.is(type.split(';')[0], 'text/event-stream');
  const data = JSON.parse(fields.data as string);
  assert.is(fields.id, String(first.seq));
  assert.is(fields.event, first.op);
  assert.equal(errorsOf([data], 'changes', 200), []);
  assert.equal({ ...data, element: undefined }, { ...first, element: undefined });
});

test('/_changes/ticket answers what it documents: a ticket, its expiry, never cached', async ({ service, doc }) => {
  const errorsOf = await responseValidator(doc);
  const reply = await service.request('GET', '/_changes/ticket');
  assert.is(reply.status, 200);
  assert.equal(errorsOf(reply.body, 'changes_ticket', 200), []);
  assert.is(reply.headers.get('cache-control'), doc.paths['/_changes/ticket']?.get.responses['200'].headers['Cache-Control'].schema.const);
  assert.ok(errorsOf({ ticket: reply.body.ticket }, 'changes_ticket', 200).length > 0);
  assert.is((await service.request('GET', `/_changes?ticket=${encodeURIComponent(reply.body.ticket)}`)).status, 200);
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
  assert.equal(reply.body.components.securitySchemes, {
    bearer: { type: 'http', scheme: 'bearer' },
    ticket: {
      type: 'apiKey',
      in: 'query',
      name: 'ticket',
      description: 'a ticket from GET /_changes/ticket, valid 60 s: for an EventSource, which cannot send Authorization',
    },
  });
  assert.equal(reply.body.security, [{ bearer: [] }]);
  assert.ok(reply.body.paths['/users'].get.responses['401']);
  assert.is((await service.request('GET', '/docs')).status, 200);
});

secured('the open service paths need no token in the document either; 403 only where the read token is refused', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  for (const path of ['/healthz', '/readyz', '/openapi.json', '/docs']) {
    for (const [method, operation] of Object.entries<any>(doc.paths[path])) {
      assert.equal(operation.security, [], `${method} ${path}`);
      assert.is(operation.responses['401'], undefined, `${method} ${path}`);
      assert.is((await service.request(method.toUpperCase(), path)).status, method === 'options' ? 204 : 200, `${method} ${path}`);
    }
  }
  assert.is(doc.paths['/'].get.security, undefined, 'the index needs the token');
  assert.ok(doc.paths['/'].get.responses['401']);
  assert.is((await service.request('GET', '/')).status, 401);
  assert.is(doc.paths['/users'].get.responses['403'], undefined, 'the read token may read');
  assert.ok(doc.paths['/users'].post.responses['403']);
  assert.ok(doc.paths['/users/{id}'].delete.responses['403']);
});

secured('/_changes opens with the bearer token or a ticket, as documented; the ticket and OPTIONS need the token', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  const token = { authorization: 'Bearer a-token-of-sixteen-chars' };
  for (const method of ['get', 'head']) {
    assert.equal(doc.paths['/_changes'][method].security, [{ bearer: [] }, { ticket: [] }], method);
    assert.match(doc.paths['/_changes'][method].responses['401'].description, /bearer token/);
  }
  for (const path of ['/_changes', '/_changes/ticket']) {
    for (const [method, operation] of Object.entries<any>(doc.paths[path])) {
      assert.ok(operation.responses['401'], `${method} ${path}`);
      if (method !== 'get' && method !== 'head') assert.is(operation.security, undefined, `${method} ${path}: the token`);
    }
  }
  assert.is(doc.paths['/_changes/ticket'].get.security, undefined);
  assert.is((await service.request('GET', '/_changes')).status, 401);
  assert.is((await service.request('OPTIONS', '/_changes')).status, 401);
  assert.is((await service.request('GET', '/_changes/ticket')).status, 401);
  const { ticket } = (await service.request('GET', '/_changes/ticket', { headers: token })).body;
  // The apiKey scheme's parameter: the ticket alone opens the feed.
  const scheme = doc.components.securitySchemes.ticket;
  assert.is((await service.request('GET', `/_changes?${scheme.name}=${encodeURIComponent(ticket)}`)).status, 200);
  assert.is((await service.request('GET', '/_changes', { headers: token })).status, 200);
  assert.is((await service.request('GET', '/_changes?ticket=forged')).status, 401);
});

secured.run();

const limited = suite<{ service: Service }>('OpenAPI document with a rate limit');
limited.before(async (ctx) => {
  ctx.service = await startService({ env: { RATE_LIMIT: '3' } });
});
limited.after(async ({ service }) => service.close());

limited('documents the 429 every path but the probes can answer, as the server does', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      const probe = path === '/healthz' || path === '/readyz';
      assert.is(operation.responses['429'] === undefined, probe, `${method} ${path}`);
    }
  }
  assert.ok(doc.components.responses.TooManyRequests.headers['Retry-After']);
  // Every limited answer carries the RateLimit fields, a 200 as a 404: the document says so on each.
  const first = await service.request('GET', '/users');
  assert.ok(first.headers.get('ratelimit'), 'a 200 without RateLimit');
  assert.ok(doc.paths['/users'].get.responses['200'].headers.RateLimit);
  assert.ok(doc.paths['/users/{id}'].get.responses['200'].headers['RateLimit-Policy']);
  assert.ok(doc.components.responses.NotFound.headers.RateLimit);
  let reply = first;
  for (let i = 0; i < 10 && reply.status === 200; i++) reply = await service.request('GET', '/users');
  assert.is(reply.status, 429);
  assert.ok(reply.headers.get('retry-after'));
  assert.is((await service.request('GET', '/healthz')).status, 200);
});

limited.run();

const names = suite('OpenAPI component names');

names('names a component name cannot hold stay apart: one component per table, every $ref resolves', async () => {
  const sales = sqliteTable('売上', { id: integer('id').primaryKey(), note: text('note') });
  const stock = sqliteTable('在庫', { id: integer('id').primaryKey(), note: text('note') });
  const underscored = sqliteTable('Liner_Notes', { id: integer('id').primaryKey() });
  const spaced = sqliteTable('Liner Notes', { id: integer('id').primaryKey() });
  const doc = toOpenApi(createRegistry({ sales, stock, underscored, spaced })) as Doc;
  const schemas = Object.keys(doc.components.schemas).filter((name) => !name.includes('.') && name !== 'Problem');
  assert.equal(schemas.sort(), ['Liner_20_Notes', 'Liner__Notes', '_5728__5eab_', '_58f2__4e0a_'].sort());
  assert.ok(schemas.every((name) => /^[A-Za-z0-9._-]+$/.test(name)));
  const result = await validate(structuredClone(doc) as never);
  assert.ok(result.valid, compileErrors(result));
  // operationIds are identifiers, one per operation, whatever the table names hold.
  const ids = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>).flatMap((item) =>
    Object.values(item).map((operation) => operation.operationId),
  );
  assert.ok(
    ids.every((id) => /^\w+$/.test(id)),
    ids.join(' '),
  );
  assert.is(new Set(ids).size, ids.length, 'unique');
});

names('summaries and descriptions read right whatever the table is called: no article or plural guessed for its name', () => {
  const authors = sqliteTable('authors', { id: integer('id').primaryKey(), name: text('name') });
  const person = sqliteTable('person', { id: integer('id').primaryKey() });
  const data = sqliteTable('data', { id: integer('id').primaryKey(), authorId: integer('author_id').references(() => authors.id) });
  const track = sqliteTable('PlaylistTrack', { list: integer('list').notNull(), track: integer('track').notNull() }, (t) => [
    primaryKey({ columns: [t.list, t.track] }),
  ]);
  const doc = toOpenApi(createRegistry({ authors, person, data, track })) as Doc;
  const texts: string[] = [];
  JSON.stringify(doc, (key, value) => {
    if ((key === 'summary' || key === 'description') && typeof value === 'string') texts.push(value);
    return value;
  });
  const named = /\b(?:a|an|one) (?:authors|person|data|PlaylistTrack)\b|\b(?:authors|person|data|PlaylistTrack) (?:element|key|id)\b/;
  assert.equal(
    texts.filter((text) => named.test(text)),
    [],
  );
  const summaries = (path: string) => Object.fromEntries(Object.entries<any>(doc.paths[path] ?? {}).map(([m, o]) => [m, o.summary]));
  assert.equal(summaries('/authors'), {
    get: 'List the elements of authors',
    head: 'List the elements of authors (headers only)',
    post: 'Create an element of authors',
    options: 'The methods this path supports',
  });
  assert.equal(summaries('/person/{id}'), {
    get: 'Get one element of person',
    head: 'Get one element of person (headers only)',
    put: 'Replace an element of person',
    patch: 'Merge-patch an element of person',
    delete: 'Delete an element of person',
    options: 'The methods this path supports',
  });
  assert.is(doc.paths['/authors/{id}/data']?.get.summary, "List the elements of data whose authorId names the path's element of authors");
  assert.is(doc.paths['/authors/{id}/data']?.post.summary, 'Create an element of data with authorId from the path');
  assert.match(doc.components.parameters.PlaylistTrackId.description, /^the key of an element of PlaylistTrack: list, track/);
});

names.run();

const pages = suite<{ service: Service }>('/docs and /docs/changes: a page for a browser, a pointer for a terminal');

/** What Chromium sends when it opens a page. */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';

pages.before(async (ctx) => {
  ctx.service = await startService();
});
pages.after(async ({ service }) => service.close());

pages('curl (Accept: */*) and text/plain get a few lines naming /openapi.json by its absolute URL; HEAD alike', async ({ service }) => {
  for (const accept of ['*/*', 'text/plain', 'text/*', 'text/html;q=0, */*']) {
    const reply = await service.request('GET', '/docs', { headers: { accept } });
    assert.is(reply.status, 200, accept);
    assert.is(reply.headers.get('content-type'), 'text/plain; charset=utf-8', accept);
    assert.is(reply.headers.get('vary'), 'Accept', accept);
    assert.ok(reply.text.includes(`curl ${service.url}/openapi.json`), reply.text);
    assert.ok(reply.text.includes('docs/http-api.md'), reply.text);
    assert.not.match(reply.text, /swagger-ui/);
    const head = await service.request('HEAD', '/docs', { headers: { accept } });
    assert.is(head.status, 200);
    assert.is(head.text, '');
    assert.is(head.headers.get('content-type'), reply.headers.get('content-type'));
    assert.is(head.headers.get('content-length'), String(Buffer.byteLength(reply.text)));
    assert.is(head.headers.get('vary'), 'Accept');
  }
});

pages('a browser (its Accept names text/html) gets Swagger UI under the page policy, varying by Accept', async ({ service }) => {
  for (const accept of [BROWSER_ACCEPT, 'text/html']) {
    const reply = await service.request('GET', '/docs', { headers: { accept } });
    assert.is(reply.status, 200);
    assert.is(reply.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.is(reply.headers.get('vary'), 'Accept');
    assert.match(reply.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.match(reply.text, /<div id="swagger-ui">/);
  }
  // As before, the page has no entity tag: a conditional request gets it whole.
  const again = await service.request('GET', '/docs', { headers: { accept: 'text/html', 'if-none-match': '*' } });
  assert.is(again.status, 200);
  assert.is(again.headers.get('etag'), null);
});

pages('an Accept naming a charset is served as the bare type: the page, or the note', async ({ service }) => {
  for (const path of ['/docs', '/docs/changes']) {
    const page = await service.request('GET', path, { headers: { accept: 'text/html; charset=utf-8' } });
    assert.is(page.status, 200, path);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/, path);
    const note = await service.request('GET', path, { headers: { accept: 'text/plain; charset=utf-8' } });
    assert.is(note.status, 200, path);
    assert.is(note.headers.get('content-type'), 'text/plain; charset=utf-8', path);
  }
});

pages('an Accept that rules out both is a 406 that points at /openapi.json', async ({ service }) => {
  const reply = await service.request('GET', '/docs', { headers: { accept: 'application/json' } });
  assert.is(reply.status, 406);
  assert.match(reply.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.is(reply.headers.get('vary'), 'Accept');
  assert.ok(reply.body.detail.includes(`${service.url}/openapi.json`), reply.body.detail);
});

pages('/docs/changes tells a terminal how to follow /_changes with curl; a browser gets the page', async ({ service }) => {
  const text = await service.request('GET', '/docs/changes', { headers: { accept: '*/*' } });
  assert.is(text.status, 200);
  assert.is(text.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.is(text.headers.get('vary'), 'Accept');
  assert.ok(text.text.includes(`curl -N -H 'Accept: text/event-stream' ${service.url}/_changes`), text.text);
  const page = await service.request('GET', '/docs/changes', { headers: { accept: BROWSER_ACCEPT } });
  assert.is(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(page.text, /<h1>Live change feed<\/h1>/);
  assert.is(page.headers.get('vary'), 'Accept');
});

pages('the document describes both answers of /docs', async ({ service }) => {
  const doc = (await service.request('GET', '/openapi.json')).body;
  assert.equal(Object.keys(doc.paths['/docs'].get.responses['200'].content), ['text/html', 'text/plain']);
});

pages('a Host that does not read as one is left out of the pointer: its paths stay relative', () => {
  const reply = (host: string | undefined) => originOf({ headers: { host }, socket: {} } as never);
  assert.is(reply('localhost:3000'), 'http://localhost:3000');
  assert.is(reply('[::1]:3000'), 'http://[::1]:3000');
  assert.is(reply('a.example'), 'http://a.example');
  for (const bad of [undefined, '', 'evil.example/phish?', 'a b', 'x:99999999', '<script>']) assert.is(reply(bad), '', String(bad));
});

pages.run();

const feeds = suite('OpenAPI change feed of other schemas');

/** The feed's service entries, as the app passes them. */
const FEED_SERVICES = [CHANGES_PATH, TICKET_PATH].map((path) => ({
  path,
  methods: READ_METHODS,
  summary: path,
  produces: 'application/json',
}));

feeds('lists only the kinds with a key; a text key is a string, a composite key an array of its values in key order', async () => {
  const tracks = sqliteTable('tracks', { album: text('album').notNull(), no: integer('no').notNull() }, (t) => [
    primaryKey({ columns: [t.album, t.no] }),
  ]);
  const tags = sqliteTable('tags', { name: text('name').primaryKey() });
  const lines = sqliteTable('lines', { line: text('line') });
  const doc = toOpenApi(createRegistry({ tracks, tags, lines }), { services: FEED_SERVICES }) as Doc;
  const change = doc.components.schemas['feed.change'];
  assert.equal(change.properties.kind.enum, ['tracks', 'tags']);
  assert.equal(
    change.oneOf.map((branch: any) => branch.properties.id),
    [
      {
        type: 'array',
        prefixItems: [{ type: 'string' }, { type: 'integer', minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER }],
        minItems: 2,
        maxItems: 2,
      },
      { type: 'string' },
    ],
  );
  const kinds = (doc.paths[CHANGES_PATH]?.get.parameters as any[]).find((p) => p.name === 'kinds');
  assert.equal(kinds.schema.items.enum, ['tracks', 'tags']);
  assert.match(doc.paths[CHANGES_PATH]?.get.responses['200'].content['text/event-stream'].example, /"kind":"tracks","id":\["a1",7\]/);
  // The element path's composite id: OpenAPI's simple style of an array, so that clients join the values with
  // an unencoded "," (a string parameter would have its commas percent-encoded: another key).
  const id = doc.components.parameters.tracksId;
  assert.equal([id.style, id.explode, id.schema.type, id.schema.minItems, id.schema.maxItems], ['simple', false, 'array', 2, 2]);
  assert.equal(id.schema.prefixItems[0], { type: 'string' });
  const result = await validate(structuredClone(doc) as never);
  assert.ok(result.valid, compileErrors(result));
});

feeds('a schema without a kind whose changes are recorded still documents a valid feed, without kinds', async () => {
  const lines = sqliteTable('lines', { line: text('line') });
  const doc = toOpenApi(createRegistry({ lines }), { services: FEED_SERVICES, auth: true, rateLimit: true }) as Doc;
  const names = (doc.paths[CHANGES_PATH]?.get.parameters as any[]).map((p) => p.name);
  assert.equal(names, ['since', 'limit', 'ticket', 'Last-Event-ID']);
  assert.is(doc.components.schemas['feed.change'].oneOf, undefined);
  assert.ok(doc.paths[CHANGES_PATH]?.get.responses['429']);
  const result = await validate(structuredClone(doc) as never);
  assert.ok(result.valid, compileErrors(result));
});

feeds('without the feed among the services, neither its paths nor its schemas', () => {
  const tags = sqliteTable('tags', { name: text('name').primaryKey() });
  const doc = toOpenApi(createRegistry({ tags })) as Doc;
  assert.is(doc.paths[CHANGES_PATH], undefined);
  assert.is(doc.components.schemas['feed.change'], undefined);
});

feeds.run();

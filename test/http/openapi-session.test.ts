// A realistic session over every operation kind, each exchange checked by openapi-backend's request
// and response validators against the live OpenAPI 3.1 document: it must report nothing.
import { type Document, OpenAPIBackend, type Operation } from 'openapi-backend';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { type Service, startService } from '../support/helpers.js';

type Json = Record<string, any>;

/** RFC 3339 date-times, as the document's `format: date-time` promises (Ajv knows no formats by itself). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
const isDateTime = (value: string) => DATE_TIME.test(value) && !Number.isNaN(Date.parse(value));

/**
 * The Accept a generated client sends: the media types of the operation's 2xx answers, else of all
 * its answers (what openapi-generator derives); an answer without a declared type leaves only
 * application/problem+json, which is how HEAD came to get a 406.
 */
function acceptFor(operation: Operation): string {
  const responses = operation.responses as Record<string, Json>;
  const typesOf = (codes: string[]) => [...new Set(codes.flatMap((code) => Object.keys(responses[code]?.content ?? {})))];
  const success = typesOf(Object.keys(responses).filter((code) => code.startsWith('2')));
  return (success.length > 0 ? success : typesOf(Object.keys(responses))).join(', ');
}

interface Call {
  body?: unknown;
  /** The request's Content-Type; application/json when a body is given. */
  type?: string;
  headers?: Record<string, string>;
}

interface Exchange {
  status: number;
  headers: Headers;
  body: any;
}

/** Sends requests to `base` and records every disagreement between the exchange and the document. */
async function createSession(base: string, doc: Json) {
  const api = new OpenAPIBackend({
    definition: structuredClone(doc) as Document,
    // quick: validators are compiled when an operation is first used (the document itself is
    // checked by @readme/openapi-parser in openapi.test.ts).
    quick: true,
    customizeAjv: (ajv) => ajv.addFormat('date-time', isDateTime),
  });
  await api.init();
  const problemSchema = api.validator.getAjv('response' as never).compile((api.definition as Json).components.schemas.Problem);
  const findings: string[] = [];

  /** One exchange; `expected` is the status a correct server gives (a different one is a finding too). */
  async function send(method: string, target: string, expected: number, call: Call = {}): Promise<Exchange> {
    const url = new URL(target, base);
    const report = (problem: string) => findings.push(`${method} ${target} → ${problem}`);
    const query: Record<string, string | string[]> = {};
    for (const [name, value] of url.searchParams) {
      const seen = query[name];
      query[name] = seen === undefined ? value : [seen, value].flat();
    }
    const operation = api.router.matchOperation({ method, path: url.pathname, query, headers: {} });
    const type = call.body === undefined ? undefined : (call.type ?? 'application/json');
    const headers: Record<string, string> = {
      ...(operation ? { accept: acceptFor(operation) } : {}),
      ...(type ? { 'content-type': type } : {}),
      ...call.headers,
    };
    const response = await fetch(url, { method, headers, body: call.body === undefined ? undefined : JSON.stringify(call.body) });
    const text = await response.text();
    const body = text && /json/.test(response.headers.get('content-type') ?? '') ? JSON.parse(text) : text;
    const exchange = { status: response.status, headers: response.headers, body };
    if (response.status !== expected) report(`status ${response.status}, expected ${expected}: ${text.slice(0, 300)}`);
    if (!operation) {
      report('no documented operation');
      return exchange;
    }

    // The request, as a validating proxy sees it (query parameters by their documented names).
    const request = api.validateRequest({ method, path: url.pathname, query, headers, body: call.body }, operation);
    for (const error of request.errors ?? []) report(`request ${error.instancePath} ${error.message}`);
    const requestSchema = (operation.requestBody as Json | undefined)?.content?.[type ?? '']?.schema;
    if (type && !requestSchema) report(`request media type ${type} is not documented`);
    for (const key of Object.keys((call.body as Json | undefined) ?? {})) {
      // OpenAPI: a readOnly property SHOULD NOT be sent; tools drop it or refuse the request.
      if (requestSchema?.properties?.[key]?.readOnly) report(`request carries ${key}, documented as readOnly`);
    }

    // The response: a documented status, media type, body and headers.
    const responses = operation.responses as Record<string, Json>;
    const documented = responses[String(response.status)] ?? responses.default;
    if (!documented) {
      report(`status ${response.status} is not documented`);
      return exchange;
    }
    const mediaType = response.headers.get('content-type')?.split(';')[0]?.trim();
    const declared = Object.keys(documented.content ?? {});
    if (mediaType && !declared.includes(mediaType)) report(`answered ${mediaType}; documented: ${declared.join(', ') || 'none'}`);
    if (!mediaType && declared.length > 0 && response.status !== 304) report(`answered no body; documented: ${declared.join(', ')}`);
    if (method !== 'HEAD' && mediaType === 'application/json') {
      const result = api.validator.validateResponse(body, operation, response.status);
      for (const error of result.errors ?? []) report(`response ${error.instancePath} ${error.message}`);
    }
    if (method !== 'HEAD' && mediaType === 'application/problem+json' && !problemSchema(body)) {
      report(`problem body: ${JSON.stringify(problemSchema.errors)}`);
    }
    const headerCheck = api.validator.validateResponseHeaders(Object.fromEntries(response.headers), operation, {
      statusCode: response.status,
    });
    for (const error of headerCheck.errors ?? []) report(`response header ${error.instancePath} ${error.message}`);
    return exchange;
  }

  return { send, findings, acceptFor };
}

const test = suite<{ service: Service; doc: Json }>('OpenAPI document: a validated session');

test.before(async (ctx) => {
  ctx.service = await startService();
  ctx.doc = (await ctx.service.request('GET', '/openapi.json')).body;
});
test.after(async ({ service }) => service?.close());

test('a session over every operation kind agrees with the document', async ({ service, doc }) => {
  const { send, findings } = await createSession(service.url, doc);

  // The service's own endpoints.
  for (const path of ['/', '/healthz', '/readyz', '/openapi.json', '/docs']) {
    await send('GET', path, 200);
    await send('HEAD', path, 200);
    await send('OPTIONS', path, 204);
  }

  // Creates: on collections, on related paths without the foreign key and repeating it, replayed, refused.
  const user = (await send('POST', '/users', 201, { body: { name: 'Ada', email: 'ada@example.com' } })).body;
  await send('POST', '/users', 409, { body: { name: 'Ada again', email: 'ada@example.com' } });
  const pet = (await send('POST', `/users/${user.id}/pets`, 201, { body: { name: 'Rex', species: 'dog' } })).body;
  await send('POST', '/pets', 201, { body: { name: 'Tweety', species: 'bird', ownerId: null } });
  const retry = { body: { petId: pet.id, quantity: 3 }, headers: { 'idempotency-key': 'order-1' } };
  const order = (await send('POST', `/users/${user.id}/orders`, 201, retry)).body;
  await send('POST', `/users/${user.id}/orders`, 201, retry);
  const second = (await send('POST', `/pets/${pet.id}/orders`, 201, { body: { petId: pet.id, userId: user.id } })).body;
  await send('POST', `/pets/${pet.id}/orders`, 422, { body: { petId: pet.id + 1, userId: user.id } });
  await send('POST', '/orders', 422, { body: { userId: 999999, petId: pet.id } });
  await send('POST', '/users/999999/pets', 404, { body: { name: 'Nobody', species: 'cat' } });

  // Lists: filters of every kind (contains/startsWith on an enum), paging through Link, related lists, HEAD.
  const page = await send('GET', '/pets?species[startsWith]=d&species[contains]=o&ownerId[null]=false&sort=-name&limit=1&count=true', 200);
  assert.is(page.headers.get('x-total-count'), '1');
  const all = await send('GET', '/orders?status[in]=placed,approved&quantity[gte]=1&sort=-createdAt,status&limit=1', 200);
  const next = /<([^>]+)>; rel="next"/.exec(all.headers.get('link') ?? '')?.[1];
  assert.ok(next, `a next page: ${findings.join('\n')}`);
  await send('GET', next as string, 200);
  await send('GET', '/orders?cursor=not-a-cursor', 400);
  await send('GET', `/users/${user.id}/orders?status=placed&id[ne]=${second.id}`, 200);
  await send('GET', '/users/999999/orders', 404);
  await send('HEAD', '/users?count=true', 200);
  await send('HEAD', `/users/${user.id}/pets`, 200);

  // Elements: GET, a conditional GET, HEAD, PUT of the GET body, a stale If-Match, merge patches.
  const fetched = await send('GET', `/users/${user.id}`, 200);
  const etag = fetched.headers.get('etag') as string;
  await send('GET', `/users/${user.id}`, 304, { headers: { 'if-none-match': etag } });
  await send('HEAD', `/users/${user.id}`, 200);
  await send('PUT', `/users/${user.id}`, 200, { body: { ...fetched.body, name: 'Ada L.' }, headers: { 'if-match': etag } });
  await send('PUT', `/users/${user.id}`, 412, { body: fetched.body, headers: { 'if-match': etag } });
  const orderNow = await send('GET', `/orders/${order.id}`, 200);
  await send('PUT', `/orders/${order.id}`, 200, { body: orderNow.body });
  await send('PATCH', `/pets/${pet.id}`, 200, { body: { ownerId: null, name: 'Rex II' }, type: 'application/merge-patch+json' });
  await send('PATCH', `/orders/${order.id}`, 200, { body: { status: 'approved', quantity: null } });
  await send('PATCH', `/orders/${order.id}`, 200, { body: { id: order.id, createdAt: order.createdAt } });
  await send('GET', '/users/999999', 404);

  // OPTIONS and DELETE: refused while referenced (restrict), then allowed; then gone.
  for (const path of ['/users', `/users/${user.id}`, `/users/${user.id}/orders`]) await send('OPTIONS', path, 204);
  await send('DELETE', `/users/${user.id}`, 409);
  await send('DELETE', `/orders/${order.id}`, 204);
  await send('DELETE', `/orders/${second.id}`, 204);
  await send('DELETE', `/users/${user.id}`, 204);
  await send('DELETE', `/users/${user.id}`, 404);

  assert.equal(findings, []);
});

test('the validator reports what the document forbids (it is not blind)', async ({ service, doc }) => {
  const { send, findings } = await createSession(service.url, doc);
  const user = (await send('POST', '/users', 201, { body: { name: 'Bo', email: 'bo@example.com' } })).body;
  await send('POST', '/users', 422, { body: { name: 'No email' } });
  await send('PATCH', `/users/${user.id}`, 422, { body: { name: null } });
  await send('GET', '/pets?species=dinosaur', 400);
  await send('PUT', '/users', 405, { body: {} });
  // The body without email matches neither form of a create (one element, or an array of them): three findings.
  assert.equal(findings.length, 6, findings.join('\n'));
  assert.equal(findings.filter((f) => f.startsWith('POST /users → request /requestBody')).length, 3, findings.join('\n'));
  assert.ok(
    findings.every((f) => /request|no documented operation/.test(f)),
    findings.join('\n'),
  );
});

test.run();

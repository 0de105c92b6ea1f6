// The contract checker: reads an OpenAPI document and probes a running service with real
// elements, comparing every (path, method) pair's status, and each body the document gives a schema
// for, with the contract; an event stream is read only until its first event. Knows no restable internals.
import { randomBytes } from 'node:crypto';
import { schemaChecker } from './schemas.js';

type Json = Record<string, any>;

const STANDARD_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const OPERATION_KEYS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

export interface Probe {
  path: string;
  method: string;
  /** Expected status(es), e.g. "201" or "405 Allow: GET, HEAD". */
  expected: string;
  received: string;
  ok: boolean;
}

export interface ContractReport {
  probes: Probe[];
  passed: number;
  failed: number;
}

export interface CheckOptions {
  /** Extra headers on every request (e.g. Authorization). */
  headers?: Record<string, string>;
  /** Called after each probe (progress output). */
  onProbe?: (probe: Probe) => void;
  /** How long a request may take, answer and body (and an event stream to send its first event); 10 s by default. */
  timeoutMs?: number;
}

const EVENT_STREAM = 'text/event-stream';

interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

/** Resolves local `$ref`s (`#/components/...`) of a document, once, lazily. */
function resolver(doc: Json) {
  const resolve = (node: any): any => {
    if (!node || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string' && node.$ref.startsWith('#/')) {
      const target = node.$ref
        .slice(2)
        .split('/')
        .reduce((at: any, key: string) => at?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
      return resolve(target);
    }
    return node;
  };
  return resolve;
}

/** The methods a path documents, with HEAD implied by GET (RFC 9110 §9.3.2). */
function methodsOf(item: Json): Set<string> {
  const methods = new Set(
    Object.keys(item)
      .filter((k) => OPERATION_KEYS.includes(k))
      .map((k) => k.toUpperCase()),
  );
  if (methods.has('GET')) methods.add('HEAD');
  return methods;
}

/** The documented 2xx statuses of an operation. */
function successes(resolve: (n: any) => any, operation: Json): string[] {
  return Object.keys(resolve(operation.responses) ?? {}).filter((s) => /^2\d\d$/.test(s));
}

/** The media type of a reply (`application/json`), without parameters. */
const mediaTypeOf = (headers: Headers) => headers.get('content-type')?.split(';')[0]?.trim().toLowerCase() ?? '';

/** One Server-Sent Event (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation). */
interface ServerEvent {
  id?: string;
  event: string;
  data: string;
}

/** Reads events from SSE text: the complete events in `text`, and the unfinished rest. */
function parseEvents(text: string): { events: ServerEvent[]; rest: string } {
  const events: ServerEvent[] = [];
  const blocks = text.split(/\r\n\r\n|\r\r|\n\n/);
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    const event: ServerEvent = { event: 'message', data: '' };
    const data: string[] = [];
    for (const line of block.split(/\r\n|\r|\n/)) {
      if (line === '' || line.startsWith(':')) continue; // a comment: a heartbeat
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') data.push(value);
      else if (field === 'id') event.id = value;
      else if (field === 'event') event.event = value;
    }
    // A block of comments or `retry:` only dispatches nothing.
    if (data.length > 0) events.push({ ...event, data: data.join('\n') });
  }
  return { events, rest };
}

/**
 * The fields of `element` that make up its key, in key order, read off the Location that names it: the
 * last segment's values (joined by `,`, each percent-encoded: docs/http-api.md#routes) matched with the element's own;
 * undefined when a value matches no field or several (`{count: 7, id: 7}`): a guess could name another element.
 */
function keyFieldsOf(element: unknown, location: string): string[] | undefined {
  if (typeof element !== 'object' || element === null) return undefined;
  const values = (location.split('/').pop() ?? '').split(',').map((part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return undefined;
    }
  });
  const fields: string[] = [];
  for (const value of values) {
    const matching = Object.keys(element).filter((k) => !fields.includes(k) && String((element as Record<string, unknown>)[k]) === value);
    if (value === undefined || matching.length !== 1) return undefined;
    fields.push(matching[0] as string);
  }
  return fields;
}

export async function checkContract(baseUrl: string, doc: Json, options: CheckOptions = {}): Promise<ContractReport> {
  const base = baseUrl.replace(/\/$/, '');
  const resolve = resolver(doc);
  const schemaErrors = schemaChecker(doc);
  const run = randomBytes(3).toString('hex');
  const timeoutMs = options.timeoutMs ?? 10_000;
  let counter = 0;
  const created: { collection: string; location: string }[] = [];
  const probes: Probe[] = [];

  /**
   * One request. A reply that does not come, or whose body does not end, within timeoutMs is status 0
   * (a failed probe, never a hang); an event stream is not read (it never ends): its body is undefined.
   */
  async function call(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
    extra: Record<string, string> = {},
  ): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers, ...extra };
    if (body !== undefined) headers['content-type'] = contentType;
    const signal = AbortSignal.timeout(timeoutMs);
    const late = (what: string): Reply => ({ status: 0, headers: new Headers(), body: `${what} within ${timeoutMs} ms` });
    let response: Response;
    try {
      response = await fetch(base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        signal,
      });
    } catch (error) {
      if (signal.aborted) return late('no answer');
      throw error;
    }
    if (mediaTypeOf(response.headers) === EVENT_STREAM) {
      await response.body?.cancel();
      return { status: response.status, headers: response.headers, body: undefined };
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      if (signal.aborted) return late('no end of the body');
      throw error;
    }
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: response.status, headers: response.headers, body: parsed };
  }

  /** Ids of created elements, by collection path, for `<name>Id` fields. */
  const idsByCollection = new Map<string, string>();
  function referenceFor(field: string): string | undefined {
    const stem = field.replace(/_?[iI]d$/, '').toLowerCase();
    if (stem === '') return undefined; // `id` itself is a key, not a reference
    for (const [collection, id] of idsByCollection) {
      if (collection.split('/').pop()?.toLowerCase().startsWith(stem)) return id;
    }
    return undefined;
  }

  /** A value valid for a JSON schema: enums take their first value, ids point at created elements. */
  function sample(schema: any, name = ''): unknown {
    const s = resolve(schema) ?? {};
    if (s.enum) return s.enum[0];
    if (s.const !== undefined) return s.const;
    // An exact decimal may be a key the client gives: new on every create, as an `id` is (not its example).
    if (s.format === 'decimal') return `${Number.parseInt(run, 16) % 1_000_000}.${++counter}1`;
    if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
    const variants = s.anyOf ?? s.oneOf;
    if (variants) return sample(variants.find((v: any) => resolve(v)?.type !== 'null') ?? variants[0], name);
    const type = Array.isArray(s.type) ? s.type.find((t: string) => t !== 'null') : s.type;
    switch (type) {
      case 'object': {
        const out: Json = {};
        for (const key of s.required ?? []) {
          const property = resolve(s.properties?.[key]);
          if (!property?.readOnly) out[key] = sample(property, key);
        }
        return out;
      }
      case 'array':
        return [];
      case 'integer':
      case 'number': {
        const ref = /id$/i.test(name) ? referenceFor(name) : undefined;
        if (ref !== undefined) return Number(ref);
        // A key the client gives must be new on every create: numbered within this run, far from small ids.
        if (/^id$/i.test(name)) return 1_000_000 + (Number.parseInt(run, 16) % 1_000_000) * 1000 + ++counter;
        return Math.max(1, s.minimum ?? 1);
      }
      case 'boolean':
        return true;
      default:
        return s.format === 'date-time' ? new Date().toISOString() : `contract-${run}-${++counter}`;
    }
  }

  const paths = doc.paths as Record<string, Json>;
  /** Whether a POST takes a batch envelope (docs/bulk-and-batch.md): `{"operations": [{"method", "path", …}]}`. */
  const isBatch = (operation: Json | undefined) => {
    const content = resolve(operation?.requestBody)?.content ?? {};
    const items = resolve(resolve(resolve(content['application/json']?.schema)?.properties?.operations)?.items);
    return Boolean(items?.properties?.method && items?.properties?.path);
  };
  const collections = Object.keys(paths).filter((p) => !p.includes('{') && paths[p]?.post && !isBatch(paths[p]?.post));
  /** Whether an operation's body may be an array of elements (a oneOf with an array variant). */
  const takesArrays = (operation: Json) => {
    const content = resolve(operation.requestBody)?.content ?? {};
    const schema = resolve(content['application/json']?.schema);
    return Boolean((schema?.oneOf as Json[] | undefined)?.some((variant) => resolve(variant)?.type === 'array'));
  };
  const requestSchema = (operation: Json) => {
    const content = resolve(operation.requestBody)?.content ?? {};
    const schema = content['application/json']?.schema ?? (Object.values(content)[0] as Json | undefined)?.schema;
    // A body that may also be an array of elements (a bulk create): the checker sends one element.
    return (resolve(schema)?.oneOf as Json[] | undefined)?.find((variant) => resolve(variant)?.type !== 'array') ?? schema;
  };

  /** The collections a body's `…Id` fields point at (as referenceFor guesses them). */
  function referencedCollections(body: unknown): string[] {
    const found = new Set<string>();
    for (const field of Object.keys(typeof body === 'object' && body !== null ? body : {})) {
      const stem = field.replace(/_?[iI]d$/, '').toLowerCase();
      if (stem === field.toLowerCase()) continue;
      for (const collection of idsByCollection.keys()) {
        if (collection.split('/').pop()?.toLowerCase().startsWith(stem)) found.add(collection);
      }
    }
    return [...found];
  }

  /** The first element a list path answers with, if any. */
  async function firstElement(path: string | undefined): Promise<Json | undefined> {
    if (path === undefined) return undefined;
    const reply = await call('GET', `${path}?limit=1`);
    const row = Array.isArray(reply.body) ? reply.body[0] : undefined;
    return row && typeof row === 'object' ? row : undefined;
  }

  /** The collection whose POST is tagged like an operation (OpenAPI tags group a kind's operations). */
  function collectionTagged(tags: string[]): string | undefined {
    return tags.length === 0 ? undefined : collections.find((c) => JSON.stringify(paths[c]?.post?.tags ?? []) === JSON.stringify(tags));
  }

  /**
   * POSTs a generated element to `path`. A conflict or refusal of a generated body is tried again
   * twice: after making new elements of the collections it references (a key made of references
   * repeats when they do), then from an element the collection already holds (its values satisfy
   * constraints a generator cannot guess, such as a foreign key of several text columns), with
   * those new references. A related POST (`template` has `{id}`) that still conflicts is tried under
   * a new parent: the one it names may already have its only child (a one-to-one extension).
   */
  async function post(
    path: string,
    schema: Json,
    depth = 0,
    tags: string[] = [],
    template?: string,
    wrap: (body: unknown) => unknown = (body) => body,
  ): Promise<Reply> {
    const send = (at: string, body: unknown) => call('POST', at, wrap(body));
    const first = sample(schema);
    const reply = await send(path, first);
    if (depth > 0 || (reply.status !== 409 && reply.status !== 422)) return reply;
    for (const collection of referencedCollections(first)) if (collection !== path) await make(collection, depth + 1);
    const second = sample(schema);
    const again = await send(path, second);
    if (again.status !== 409 && again.status !== 422) return again;
    const parent = template?.includes('{')
      ? (await make(template.slice(0, template.indexOf('/{')), depth + 1))?.split('/').pop()
      : undefined;
    if (template && parent !== undefined) {
      const moved = await send(template.replace(/\{[^}]+\}/, parent), sample(schema));
      if (moved.status !== 409 && moved.status !== 422) return moved;
    }
    const row = (await firstElement(path)) ?? (await firstElement(collectionTagged(tags)));
    if (!row || typeof row !== 'object') return again;
    // Only what the body must hold: an optional field may be one the path supplies (a related POST's reference).
    const required = new Set<string>(resolve(schema)?.required ?? []);
    const copied = Object.fromEntries(Object.entries(row).filter(([key]) => required.has(key)));
    return send(path, {
      ...copied,
      ...Object.fromEntries(Object.entries(second as Json).filter(([key]) => /[iI]d$/.test(key) && referenceFor(key) !== undefined)),
    });
  }

  /** POSTs a generated element to `collection`; returns its path (Location) or undefined. */
  async function make(collection: string, depth = 0): Promise<string | undefined> {
    const reply = await post(collection, requestSchema(paths[collection]?.post ?? {}), depth);
    if (reply.status < 200 || reply.status > 299) return undefined;
    const location = reply.headers.get('location') ?? (reply.body?.id !== undefined ? `${collection}/${reply.body.id}` : undefined);
    if (!location) return undefined;
    const path = new URL(location, `${base}/`).pathname;
    created.push({ collection, location: path });
    idsByCollection.set(collection, path.split('/').pop() as string);
    return path;
  }

  // Make one element per collection, in rounds, so that references can point at earlier ones.
  const elementOf = new Map<string, string>();
  for (let round = 0; round < collections.length && elementOf.size < collections.length; round++) {
    for (const collection of collections) {
      if (elementOf.has(collection)) continue;
      const path = await make(collection);
      if (path) elementOf.set(collection, path);
    }
  }

  /** The concrete path for a template: `{param}` after a collection takes that collection's element id. */
  function concrete(template: string, missing: boolean): string | undefined {
    let ok = true;
    const path = template.replace(/\{[^}]+\}/g, (_match, offset: number) => {
      const collection = template.slice(0, offset - 1);
      const id = elementOf.get(collection)?.split('/').pop();
      if (!id) ok = false;
      return missing ? (/^\d+$/.test(id ?? '') ? '999999999' : `missing-${run}`) : (id ?? '');
    });
    return ok ? path : undefined;
  }

  function record(path: string, method: string, expected: string, received: string, ok: boolean): void {
    const probe = { path, method, expected, received, ok };
    probes.push(probe);
    options.onProbe?.(probe);
  }

  async function bodyFor(method: string, operation: Json, target: string): Promise<{ body?: unknown; type?: string }> {
    if (method === 'PATCH') {
      const content = resolve(operation.requestBody)?.content ?? {};
      return { body: {}, type: content['application/merge-patch+json'] ? 'application/merge-patch+json' : 'application/json' };
    }
    if (method === 'PUT') {
      const current = await call('GET', target);
      const schema = resolve(requestSchema(operation)) ?? {};
      const body = Object.fromEntries(Object.entries(current.body ?? {}).filter(([key]) => !resolve(schema.properties?.[key])?.readOnly));
      return { body };
    }
    return {};
  }

  /**
   * A batch path: a batch that reads every element path the checker made (and a page of each
   * collection) answers 200 with one result per operation, each the status and ETag the same GET
   * answers alone; a batch whose second operation names a missing element answers 404 with
   * `"operation": 1`.
   */
  async function probeBatch(template: string, operation: Json): Promise<void> {
    const elements = Object.keys(paths)
      .filter((p) => /^\/[^{}]+\/\{[^}]+\}$/.test(p) && paths[p]?.get)
      .map((p) => concrete(p, false))
      .filter((p): p is string => p !== undefined);
    const reads = [...elements, ...collections.map((c) => `${c}?limit=1`)].slice(0, 100);
    const batch = await call('POST', template, { operations: reads.map((path) => ({ method: 'GET', path })) });
    const results: Json[] = Array.isArray(batch.body?.results) ? batch.body.results : [];
    let same = batch.status === 200 && results.length === reads.length;
    for (const [i, path] of reads.entries()) {
      if (!same) break;
      const alone = await call('GET', path);
      same = results[i]?.status === alone.status && (results[i]?.headers?.ETag ?? null) === alone.headers.get('etag');
    }
    const batchErrors = answerErrors(operation, batch);
    const got = noting(`${batch.status}, ${results.length} results`, batchErrors);
    record(template, 'POST', `200, ${reads.length} results as alone`, got, same && batchErrors.length === 0);
    const missingElement = Object.keys(paths).find((p) => /^\/[^{}]+\/\{[^}]+\}$/.test(p) && paths[p]?.get);
    const missing = missingElement === undefined ? undefined : concrete(missingElement, true);
    if (missing === undefined || reads[0] === undefined) return;
    const failing = await call('POST', template, {
      operations: [
        { method: 'GET', path: reads[0] },
        { method: 'GET', path: missing },
      ],
    });
    const failingErrors = answerErrors(operation, failing);
    record(
      template,
      'POST [failing]',
      '404 operation 1',
      noting(`${failing.status} operation ${failing.body?.operation ?? '-'}`, failingErrors),
      failing.status === 404 && failing.body?.operation === 1 && failingErrors.length === 0,
    );
  }

  /**
   * How an answer breaks what its operation documents for its status (none documented: nothing): a header
   * marked required that is missing, a media type not documented (a body where the status documents none
   * counts too), a JSON body that breaks its schema. `withBody`: false for HEAD, whose answer has none.
   */
  function answerErrors(operation: Json, reply: Reply, withBody = true): string[] {
    const response = resolve(resolve(operation.responses)?.[String(reply.status)]);
    if (response === undefined) return [];
    const errors: string[] = [];
    for (const [name, header] of Object.entries<Json>(response.headers ?? {})) {
      if (resolve(header)?.required && !reply.headers.has(name)) errors.push(`no ${name} header, which is required`);
    }
    if (!withBody) return errors;
    const type = mediaTypeOf(reply.headers);
    const documented = Object.keys(response.content ?? {});
    const sent = reply.headers.has('content-type') && (reply.headers.get('content-length') ?? '') !== '0';
    if (sent && !documented.includes(type)) {
      errors.push(`answered ${type}, documented ${documented.length ? documented.join(' or ') : 'no body'}`);
      return errors;
    }
    const schema = response.content?.[type]?.schema;
    if (schema !== undefined && /[/+]json$/.test(type)) errors.push(...schemaErrors(schema, reply.body));
    return errors;
  }

  /** The first of `errors` and how many more, for a report cell. */
  const firstOf = (errors: string[]) => `${errors[0]}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`;
  /** A report cell of what was received, followed by the first of `errors` when there are any. */
  const noting = (received: string, errors: string[]) => (errors.length > 0 ? `${received}, ${firstOf(errors)}` : received);

  /** Whether a GET is a change feed (docs/changes.md): besides JSON, it answers an event stream. */
  const isFeed = (operation: Json | undefined) => Boolean(resolve(resolve(operation?.responses)?.['200'])?.content?.[EVENT_STREAM]);

  /**
   * Opens an event stream and reads it until `wanted` events (at least its first bytes) came or
   * timeoutMs passed, then closes it: a stream never ends, so the checker never waits for that.
   */
  async function readStream(
    path: string,
    extra: Record<string, string>,
    wanted: number,
  ): Promise<{ status: number; type: string; events: ServerEvent[]; opened: boolean }> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const events: ServerEvent[] = [];
    let status = 0;
    let type = '';
    let opened = false;
    try {
      const response = await fetch(base + path, {
        headers: { ...options.headers, accept: EVENT_STREAM, ...extra },
        redirect: 'manual',
        signal: controller.signal,
      });
      status = response.status;
      type = mediaTypeOf(response.headers);
      if (type !== EVENT_STREAM || !response.body) await response.body?.cancel();
      else {
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        while (!opened || events.length < wanted) {
          const { value, done } = await reader.read();
          if (done) break;
          opened = true;
          const parsed = parseEvents(buffer + decoder.decode(value, { stream: true }));
          events.push(...parsed.events);
          buffer = parsed.rest;
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
    return { status, type, events, opened };
  }

  /** Values a query parameter's schema rules out: not of its type, past its bounds, outside its enum. */
  function badValues(schema: Json | undefined): string[] {
    const s = resolve(schema) ?? {};
    if (s.type === 'integer' || s.type === 'number') {
      return [
        'x',
        ...(s.type === 'integer' ? ['1.5'] : []),
        ...(typeof s.minimum === 'number' ? [String(s.minimum - 1)] : []),
        ...(typeof s.maximum === 'number' ? [String(s.maximum + 1)] : []),
      ];
    }
    const values = s.type === 'array' ? resolve(s.items) : s;
    return Array.isArray(values?.enum) ? [`contract-${run}-none`] : [];
  }

  /**
   * A change feed (docs/changes.md), never read to the end of its stream. HEAD: 200 as JSON and as an event
   * stream. GET: as JSON, a page valid per the documented schema, which a page of one and its
   * Link rel="next" continue; a query parameter of a value its schema rules out is a 400; an Accept
   * of neither media type is a 406; as an event stream, the first event after Last-Event-ID (one
   * before the page's first seq) is the page's first change: its seq as id, its op as event, the
   * change as data.
   */
  async function probeFeed(template: string, target: string, method: 'GET' | 'HEAD', operation: Json): Promise<void> {
    const responses = resolve(operation.responses) ?? {};
    const parameters: Json[] = (operation.parameters ?? []).map(resolve);
    const json = { accept: 'application/json' };
    if (method === 'HEAD') {
      for (const [label, accept] of [
        ['HEAD', 'application/json'],
        ['HEAD [event-stream]', EVENT_STREAM],
      ] as const) {
        const reply = await call('HEAD', target, undefined, undefined, { accept });
        const type = mediaTypeOf(reply.headers);
        record(template, label, `200 ${accept}`, `${reply.status} ${type || '-'}`, reply.status === 200 && type === accept);
      }
      return;
    }

    const page = await call('GET', target, undefined, undefined, json);
    const pageErrors = answerErrors(operation, page);
    const changes: Json[] = page.status === 200 && Array.isArray(page.body) ? page.body : [];
    record(
      template,
      'GET',
      '200 application/json, valid',
      `${page.status} ${mediaTypeOf(page.headers) || '-'}, ${
        pageErrors.length > 0 ? firstOf(pageErrors) : Array.isArray(page.body) ? `${page.body.length} valid` : 'no JSON array'
      }`,
      page.status === 200 && mediaTypeOf(page.headers) === 'application/json' && Array.isArray(page.body) && pageErrors.length === 0,
    );

    const [first, second] = changes;
    if (first && second && parameters.some((p) => p.in === 'query' && p.name === 'limit')) {
      const one = await call('GET', `${target}?limit=1`, undefined, undefined, json);
      const next = /<([^>]+)>\s*;\s*rel="next"/.exec(one.headers.get('link') ?? '')?.[1];
      const url = next === undefined ? undefined : new URL(next, `${base}/`);
      const following = url ? await call('GET', url.pathname + url.search, undefined, undefined, json) : undefined;
      const seqs = [one.body?.[0]?.seq, following?.body?.[0]?.seq];
      record(
        template,
        'GET [paging]',
        `limit=1: ${first.seq}, Link next: ${second.seq}`,
        `${one.status} ${Array.isArray(one.body) ? one.body.length : '-'}: ${seqs[0] ?? '-'}, Link next: ${following ? `${following.status} ${seqs[1] ?? '-'}` : 'none'}`,
        one.status === 200 &&
          Array.isArray(one.body) &&
          one.body.length === 1 &&
          seqs[0] === first.seq &&
          following?.status === 200 &&
          seqs[1] === second.seq,
      );
    }

    if ('400' in responses) {
      for (const parameter of parameters.filter((p) => p.in === 'query')) {
        for (const value of badValues(parameter.schema)) {
          const reply = await call(
            'GET',
            `${target}?${encodeURIComponent(parameter.name)}=${encodeURIComponent(value)}`,
            undefined,
            undefined,
            json,
          );
          record(template, `GET [${parameter.name}=${value}]`, '400', String(reply.status), reply.status === 400);
        }
      }
    }
    if ('406' in responses) {
      const reply = await call('GET', target, undefined, undefined, { accept: 'image/png' });
      record(template, 'GET [Accept: image/png]', '406', String(reply.status), reply.status === 406);
    }

    const resumable = typeof first?.seq === 'number' && parameters.some((p) => p.in === 'header' && /^last-event-id$/i.test(p.name));
    const stream = await readStream(target, resumable ? { 'last-event-id': String(first.seq - 1) } : {}, resumable ? 1 : 0);
    const [event] = stream.events;
    let data: any;
    try {
      data = event ? JSON.parse(event.data) : undefined;
    } catch {
      data = event?.data;
    }
    const itemSchema = resolve(resolve(responses['200'])?.content?.['application/json']?.schema)?.items;
    const eventErrors = event ? schemaErrors(itemSchema, data) : [];
    const opened = stream.status === 200 && stream.type === EVENT_STREAM;
    const got = event
      ? `event ${event.id ?? '-'} ${event.event}${eventErrors.length > 0 ? `, ${firstOf(eventErrors)}` : `, seq ${data?.seq}`}`
      : stream.opened
        ? `no event within ${timeoutMs} ms`
        : 'nothing';
    record(
      template,
      'GET [event-stream]',
      `200 ${EVENT_STREAM}${resumable ? `, event ${first.seq} ${first.op} after Last-Event-ID ${first.seq - 1}` : ''}`,
      `${stream.status} ${stream.type || '-'}, ${got}`,
      opened &&
        (resumable
          ? event?.id === String(first.seq) && event.event === first.op && data?.seq === first.seq && eventErrors.length === 0
          : stream.opened),
    );
  }

  const deletions: [string, Json][] = [];
  for (const [template, item] of Object.entries(paths)) {
    const defined = methodsOf(item);
    const allow = [...defined].sort().join(', ');
    const target = concrete(template, false);
    if (!target) {
      record(template, '*', 'an element to probe with', 'could not create one', false);
      continue;
    }
    for (const method of STANDARD_METHODS) {
      if (!defined.has(method)) {
        const reply = await call(method, target);
        const received = (reply.headers.get('allow') ?? '')
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean);
        const undocumentedOptions = !defined.has('OPTIONS');
        const got = received
          .filter((m) => !(undocumentedOptions && m === 'OPTIONS'))
          .sort()
          .join(', ');
        record(
          template,
          method,
          `405 Allow: ${allow}`,
          `${reply.status} Allow: ${received.join(', ') || '-'}`,
          reply.status === 405 && got === allow,
        );
        continue;
      }
      const operation = item[method.toLowerCase()] ?? item.get;
      if (method === 'DELETE') {
        deletions.push([template, operation]);
        continue;
      }
      if (method === 'POST' && isBatch(operation)) {
        await probeBatch(template, operation);
        continue;
      }
      if ((method === 'GET' || method === 'HEAD') && isFeed(operation)) {
        await probeFeed(template, target, method, operation);
        continue;
      }
      const expected = successes(resolve, operation);
      const { body, type } = await bodyFor(method, operation, target);
      const reply =
        method === 'POST'
          ? await post(target, requestSchema(operation), 0, operation.tags, template)
          : await call(method, target, body, type);
      if (method === 'POST' && reply.status >= 200 && reply.status < 300) {
        const location = reply.headers.get('location');
        if (location) created.push({ collection: template, location: new URL(location, `${base}/`).pathname });
        // A POST that also takes an array of elements (a bulk create): one element in an array is created as
        // one, or refused as element 0 (its errors prefixed "0/": the generator cannot always find a second valid body).
        if (takesArrays(operation)) {
          const bulk = await post(target, requestSchema(operation), 0, operation.tags, template, (body) => [body]);
          const paths: string[] = (bulk.body?.errors ?? []).map((e: { path?: string }) => String(e.path));
          const one = bulk.status === 201 && Array.isArray(bulk.body) && bulk.body.length === 1;
          // No Location for an array: the element is cleaned up at its key, found as the single POST's Location
          // names its element (the key's fields, whatever their names).
          const collection = template.includes('{') ? collectionTagged(operation.tags ?? []) : template;
          const keys = location ? keyFieldsOf(reply.body, location) : undefined;
          const id = one && keys ? keys.map((k) => encodeURIComponent(String(bulk.body[0]?.[k]))).join(',') : undefined;
          if (collection && id !== undefined) created.push({ collection, location: `${collection}/${id}` });
          const refused = (bulk.status === 409 || bulk.status === 422) && paths.length > 0 && paths.every((p) => /^0(\/|$)/.test(p));
          const got = one ? '201 [1]' : `${bulk.status} ${paths.join(', ') || '(no errors)'}`;
          record(template, 'POST [array]', '201 [1], or 409/422 naming element 0', got, one || refused);
        }
      }
      // The answer, where the document describes it, must follow it.
      const invalid = answerErrors(operation, reply, method !== 'HEAD');
      record(
        template,
        method,
        expected.join('|') || '2xx',
        noting(String(reply.status), invalid),
        (expected.length ? expected.includes(String(reply.status)) : reply.status < 300) && invalid.length === 0,
      );
      if (template.includes('{') && method !== 'OPTIONS') {
        const missing = concrete(template, true) as string;
        const gone = await call(method, missing, body, type);
        const wrong = answerErrors(operation, gone, method !== 'HEAD');
        record(
          template.replace(/\{[^}]+\}/g, '{missing}'),
          method,
          '404',
          noting(String(gone.status), wrong),
          gone.status === 404 && wrong.length === 0,
        );
      }
    }
  }

  // DELETE last, each on an element made for it, so the other probes kept theirs.
  for (const [template, operation] of deletions) {
    const collection = template.slice(0, template.lastIndexOf('/{'));
    const fresh = template.endsWith('}') ? await make(collection) : concrete(template, false);
    const expected = successes(resolve, operation);
    if (!fresh) {
      record(template, 'DELETE', expected.join('|'), 'could not create an element to delete', false);
      continue;
    }
    const reply = await call('DELETE', fresh);
    record(template, 'DELETE', expected.join('|') || '2xx', String(reply.status), expected.includes(String(reply.status)));
    // Later elements reference the kept element of this collection, not the one just deleted.
    const kept = elementOf.get(collection)?.split('/').pop();
    if (kept !== undefined) idsByCollection.set(collection, kept);
    const missing = concrete(template, true) as string;
    const gone = await call('DELETE', missing);
    record(template.replace(/\{[^}]+\}/g, '{missing}'), 'DELETE', '404', String(gone.status), gone.status === 404);
  }

  // Clean up, newest first (children before the parents they reference).
  for (const { location } of created.reverse()) await call('DELETE', location);

  const passed = probes.filter((p) => p.ok).length;
  return { probes, passed, failed: probes.length - passed };
}

/** The report as an aligned text table and a summary line. */
export function formatReport({ probes, passed, failed }: ContractReport): string {
  const rows = [
    ['path', 'method', 'expected', 'received', 'verdict'],
    ...probes.map((p) => [p.path, p.method, p.expected, p.received, p.ok ? 'ok' : 'FAIL']),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  const lines = rows.map((r) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
  return `${lines.join('\n')}\n\ncontract: ${probes.length} pairs checked, ${passed} passed, ${failed} failed`;
}

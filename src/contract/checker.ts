// The contract checker: reads an OpenAPI document and probes a running service with real
// elements, comparing every (path, method) pair's status with the contract. Knows no restable internals.
import { randomBytes } from 'node:crypto';

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
}

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

export async function checkContract(baseUrl: string, doc: Json, options: CheckOptions = {}): Promise<ContractReport> {
  const base = baseUrl.replace(/\/$/, '');
  const resolve = resolver(doc);
  const run = randomBytes(3).toString('hex');
  let counter = 0;
  const created: { collection: string; location: string }[] = [];
  const probes: Probe[] = [];

  async function call(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers };
    if (body !== undefined) headers['content-type'] = contentType;
    const response = await fetch(base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
    });
    const text = await response.text();
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
        return ref !== undefined ? Number(ref) : Math.max(1, s.minimum ?? 1);
      }
      case 'boolean':
        return true;
      default:
        return s.format === 'date-time' ? new Date().toISOString() : `contract-${run}-${++counter}`;
    }
  }

  const paths = doc.paths as Record<string, Json>;
  /** Whether a POST takes a batch envelope (API.md §7): `{"operations": [{"method", "path", …}]}`. */
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
  async function probeBatch(template: string): Promise<void> {
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
    record(template, 'POST', `200, ${reads.length} results as alone`, `${batch.status}, ${results.length} results`, same);
    const missingElement = Object.keys(paths).find((p) => /^\/[^{}]+\/\{[^}]+\}$/.test(p) && paths[p]?.get);
    const missing = missingElement === undefined ? undefined : concrete(missingElement, true);
    if (missing === undefined || reads[0] === undefined) return;
    const failing = await call('POST', template, {
      operations: [
        { method: 'GET', path: reads[0] },
        { method: 'GET', path: missing },
      ],
    });
    record(
      template,
      'POST [failing]',
      '404 operation 1',
      `${failing.status} operation ${failing.body?.operation ?? '-'}`,
      failing.status === 404 && failing.body?.operation === 1,
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
        await probeBatch(template);
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
          // No Location for an array: the element is cleaned up by its collection and id, as make() finds it.
          const collection = template.includes('{') ? collectionTagged(operation.tags ?? []) : template;
          const id = one ? bulk.body[0]?.id : undefined;
          if (collection && id !== undefined) created.push({ collection, location: `${collection}/${encodeURIComponent(String(id))}` });
          const refused = (bulk.status === 409 || bulk.status === 422) && paths.length > 0 && paths.every((p) => /^0(\/|$)/.test(p));
          const got = one ? '201 [1]' : `${bulk.status} ${paths.join(', ') || '(no errors)'}`;
          record(template, 'POST [array]', '201 [1], or 409/422 naming element 0', got, one || refused);
        }
      }
      record(
        template,
        method,
        expected.join('|') || '2xx',
        String(reply.status),
        expected.length ? expected.includes(String(reply.status)) : reply.status < 300,
      );
      if (template.includes('{') && method !== 'OPTIONS') {
        const missing = concrete(template, true) as string;
        const gone = await call(method, missing, body, type);
        record(template.replace(/\{[^}]+\}/g, '{missing}'), method, '404', String(gone.status), gone.status === 404);
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

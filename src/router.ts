// Turns the registry's routes into request handlers: resolve the target (404), pick the method
// (405 + Allow, OPTIONS), then parse → repository → send. No SQL and no per-table code here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { etagOfRow, evaluatePreconditions } from './conditional.js';
import type { Config } from './config.js';
import { type CursorCodec, createCursorCodec, readCursorKey } from './cursor.js';
import type { Db } from './db/client.js';
import { ApiError } from './errors.js';
import { accepts, elementResponse, type JsonResponse, readJson, send, sendEmpty, sendJson } from './http.js';
import { fingerprintOf, type IdempotencyStore, parseIdempotencyKey } from './idempotency.js';
import { encodeCursor, parseListQuery, type RawQuery } from './query.js';
import { queryErrorOf, withParameter } from './query-string.js';
import { type Check, createRepository, type Id, notFound, type Page, type Repository, type Scope, unavailableFrom } from './repository.js';
import type { Method, Registry, Resource, Route } from './resources.js';
import { type Row, toCreateRow } from './validation.js';

/** What a handler gets: the request, its response, and the element or parent the path names. */
export interface Exchange {
  req: IncomingMessage & { params: Record<string, string>; query: Record<string, unknown>; path: string; search: string };
  res: ServerResponse;
  /** The key from the path, parsed to the key's type (element and related routes). */
  id?: Id;
  /** The element (element routes) or the parent (related routes) the path names. */
  target?: Row;
}

export type Handler = (exchange: Exchange) => void | Promise<void>;

/** A path the service answers: its methods and a handler per method (HEAD uses GET's). */
export interface Endpoint {
  path: string;
  pattern: RegExp;
  methods: readonly Method[];
  handlers: Partial<Record<Method, Handler>>;
  /** Resolves the target named by the path, or throws 404; runs for every method. */
  resolve?: (params: Record<string, string>) => { id: Id; target: Row };
  /** The media type of its answers (for 406); application/json unless said otherwise. */
  produces?: string;
  /** Query parameter names this endpoint accepts, per method; any other is a 400. */
  acceptsQuery?: (method: string) => boolean;
}

const JSON_BODY = ['application/json'] as const;
const MERGE_PATCH_BODY = ['application/merge-patch+json', 'application/json'] as const;

/** Lists take the query language of API.md §5 on GET (and HEAD); other methods take none. */
const listsOnGet = (method: string) => method === 'GET';

/** Refuses a query string that could not be read, and any parameter when the path takes none. */
export function rejectQuery(query: Record<string, unknown>, accepts: boolean): void {
  const unreadable = queryErrorOf(query);
  if (unreadable) throw unreadable;
  const names = Object.keys(query);
  if (names.length > 0 && !accepts) {
    throw new ApiError('badRequest', `Unknown query parameter "${names[0]}".`, {
      errors: names.map((name) => ({ path: name, message: 'is not a query parameter of this path' })),
    });
  }
}

/** The request handler for one endpoint: target, then method, then the method's handler. */
export function toRequestHandler(endpoint: Endpoint): Handler {
  const allow = endpoint.methods.join(', ');
  return async (exchange) => {
    const { req, res } = exchange;
    const resolved = endpoint.resolve?.(exchange.req.params);
    const method = req.method as Method;
    if (method === 'OPTIONS') {
      rejectQuery(req.query, false); // OPTIONS takes no parameter: one sent is refused, not ignored
      return sendEmpty(res, 204, { Allow: allow });
    }
    const handler = endpoint.methods.includes(method) ? endpoint.handlers[method === 'HEAD' ? 'GET' : method] : undefined;
    if (!handler) {
      throw new ApiError('methodNotAllowed', `${req.method} is not allowed on ${endpoint.path}; use ${allow}.`, {
        headers: { Allow: allow },
      });
    }
    const produces = endpoint.produces ?? 'application/json';
    if (method !== 'DELETE' && !accepts(req, produces)) {
      throw new ApiError('notAcceptable', `This path only answers ${produces}; the Accept header rules it out.`);
    }
    rejectQuery(req.query, endpoint.acceptsQuery?.(method === 'HEAD' ? 'GET' : method) ?? false);
    await handler({ ...exchange, ...resolved });
  };
}

/**
 * Answers one page of a list: the rows, `Link: <…>; rel="next"` while more follow (RFC 8288),
 * and `X-Total-Count` when asked for. The next-page URL is the client's own query string with
 * the cursor replaced, so its length is the request's plus a short cursor (both bounded).
 */
function sendPage({ req, res }: Exchange, repository: Repository, resource: Resource, cursors: CursorCodec, scope?: Scope): void {
  const query = parseListQuery(resource, req.query as RawQuery, { scope: scope ? `${scope.field}=${scope.value}` : '', cursors });
  const page: Page = repository.list(query, scope);
  const headers: Record<string, string> = {};
  const last = page.rows.at(-1);
  if (page.more && last) {
    const cursor = encodeCursor(query, last, cursors, () => page.rowidOf(last));
    headers.Link = `<${req.path}?${withParameter(req.search, 'cursor', cursor)}>; rel="next"`;
  }
  if (page.total !== undefined) headers['X-Total-Count'] = String(page.total);
  sendJson(res, 200, page.rows, headers);
}

function locationOf(resource: Resource, row: Row): string {
  return `/${resource.name}/${encodeURIComponent(String(row[resource.primaryKey.key]))}`;
}

/** The If-Match / If-None-Match check of a write, run on the current row inside its transaction. */
function preconditions({ req }: Exchange): Check {
  return (current) => void evaluatePreconditions(req.method as string, req.headers, etagOfRow(current));
}

/** Answers GET/HEAD on an element: 304 when If-None-Match matches, else the element with its ETag. */
function sendElement({ req, res }: Exchange, row: Row): void {
  const response = elementResponse(200, row);
  if (evaluatePreconditions(req.method as string, req.headers, response.headers.ETag as string) === 'notModified') {
    sendEmpty(res, 304, { ETag: response.headers.ETag as string });
  } else {
    send(res, response);
  }
}

/** Builds one endpoint per registry route, with a repository per resource kind. */
export function createResourceEndpoints(registry: Registry, db: Db, config: Config, idempotency: IdempotencyStore): Endpoint[] {
  const repositories = new Map<Resource, Repository>(registry.resources.map((r) => [r, createRepository(db, r)]));
  const repo = (resource: Resource) => repositories.get(resource) as Repository;
  /** Read (or made and stored) on first use; a database that cannot store it yet answers 503. */
  const cursors = createCursorCodec(() => {
    try {
      return readCursorKey(db, config.cursorSecret);
    } catch (error) {
      throw unavailableFrom(error) ?? error;
    }
  });

  const resolver = (owner: Resource) => (params: Record<string, string>) => {
    const id = owner.parseId(params.id ?? '');
    const target = id === undefined ? undefined : repo(owner).get(id);
    if (id === undefined || !target) throw notFound(owner, params.id);
    return { id, target };
  };
  const body = (req: IncomingMessage, accepted: readonly string[]) => readJson(req, config.maxBodyBytes, accepted);

  /** POST: validate and create, once per Idempotency-Key when the client sends one (API.md §6). */
  const create = async ({ req, res }: Exchange, resource: Resource, fixed?: Row) => {
    const key = parseIdempotencyKey(req.headers['idempotency-key']);
    const input = await body(req, JSON_BODY);
    // Validated before the key's fingerprint is computed: a refused body costs no canonical hash.
    const valid = toCreateRow(resource, input, fixed);
    const produce = (): JsonResponse => {
      const row = repo(resource).create(valid);
      return elementResponse(201, row, { Location: locationOf(resource, row) });
    };
    if (key === undefined) return send(res, produce());
    const { response, replayed } = idempotency.once(key, fingerprintOf('POST', req.path, input), produce);
    send(res, response, replayed ? { 'Idempotent-Replayed': 'true' } : {});
  };

  return registry.routes.map((route: Route): Endpoint => {
    const { resource, relation } = route;
    const repository = repo(resource);
    const base = { path: route.path, pattern: route.pattern, methods: route.methods };
    if (route.kind === 'collection') {
      return {
        ...base,
        acceptsQuery: listsOnGet,
        handlers: {
          GET: (exchange) => sendPage(exchange, repository, resource, cursors),
          POST: (exchange) => create(exchange, resource),
        },
      };
    }
    if (route.kind === 'element') {
      return {
        ...base,
        resolve: resolver(resource),
        handlers: {
          GET: (exchange) => sendElement(exchange, exchange.target as Row),
          PUT: async (exchange) => {
            const input = await body(exchange.req, JSON_BODY);
            send(exchange.res, elementResponse(200, repository.replace(exchange.id as Id, input, preconditions(exchange))));
          },
          PATCH: async (exchange) => {
            const input = await body(exchange.req, MERGE_PATCH_BODY);
            send(exchange.res, elementResponse(200, repository.patch(exchange.id as Id, input, preconditions(exchange))));
          },
          DELETE: (exchange) => {
            repository.remove(exchange.id as Id, preconditions(exchange));
            sendEmpty(exchange.res, 204);
          },
        },
      };
    }
    const { parent, field } = relation as NonNullable<Route['relation']>;
    return {
      ...base,
      acceptsQuery: listsOnGet,
      resolve: resolver(parent),
      handlers: {
        GET: (exchange) => sendPage(exchange, repository, resource, cursors, { field, value: exchange.id }),
        POST: (exchange) => create(exchange, resource, { [field]: exchange.id }),
      },
    };
  });
}

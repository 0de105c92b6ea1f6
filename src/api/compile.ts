// Compiles each endpoint into one closure per method at start-up: target (404), method (405 +
// Allow, OPTIONS), 406, the query rules, then the handler. No SQL and no per-table code here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import {
  type Check,
  type MaybePromise,
  notFound,
  type ResourceStore,
  type Scope,
  type Store,
  type Transaction,
  then,
} from '../engine/store.js';
import { ApiError } from '../errors.js';
import {
  accepts,
  checkBodySize,
  checkMediaType,
  elementResponse,
  jsonResponse,
  readJson,
  send,
  sendEmpty,
  sendJson,
} from '../http/messages.js';
import type { Id, Method, Registry, Resource, Route } from '../model/registry.js';
import { etagOfRow, evaluatePreconditions } from '../request/conditions.js';
import type { CursorCodec } from '../request/cursor.js';
import { fingerprintOf, parseIdempotencyKey } from '../request/idempotency.js';
import { encodeCursor, parseElementQuery, parseListQuery, type RawQuery, type Shape, shaped } from '../request/list-query.js';
import { firstParameter, type QueryParameters, queryErrorOf, withParameter } from '../request/query-string.js';
import { checkJsonDocument, type Row, toCreateRow, toCreateRows, toPatchedRow, toReplacementRow } from '../request/validation.js';
import { expand } from './expand.js';
import { decodeSegment } from './routes.js';

/**
 * An operation of a batch (src/api/batch.ts) as its request carries it: the body already parsed, and
 * the batch's transaction, which every read and write of the operation goes through.
 */
export interface Operation {
  body: unknown;
  tx: Transaction;
}

/** A request as the handlers see it: polka's parsed path and query, the request id; `operation` inside a batch. */
export type Request = IncomingMessage & { path: string; search: string; query: QueryParameters; id?: string; operation?: Operation };
export type Response = ServerResponse;

/** A method's work on a path; `id` is the key the path names (element and related paths). */
export type Handler = (req: Request, res: Response, id: Id) => MaybePromise<unknown>;

/** What a path with `{id}` names: how to read the segment, whether it exists (as the request sees the data), and its 404. */
export interface Target {
  parseId: (segment: string) => Id | undefined;
  exists: (id: Id, req: Request) => MaybePromise<boolean>;
  resource: Resource;
}

/** A path the service answers: its methods and a handler per method (HEAD uses GET's). */
export interface Endpoint {
  path: string;
  methods: readonly Method[];
  handlers: Partial<Record<Method, Handler>>;
  /** Set when the path names an element (its own, or the parent of a related list). */
  target?: Target;
  /** The kind a resource route serves (collection, element or related list); unset on the service's own paths. */
  resource?: Resource;
  /** The media type of its answers (for 406); application/json unless said otherwise. */
  produces?: string;
  /** False for files served as they are (the docs' assets: any Accept gets them) and pages that negotiate themselves (/docs). */
  negotiates?: boolean;
  /** Whether GET (and HEAD) take the list query language of docs/http-api.md#query-parameters-collections-and-related-lists; any other parameter is a 400. */
  lists?: boolean;
  /** Whether GET (and HEAD) take the shaping parameters of one element (`fields`); the handler reads them. */
  shapes?: boolean;
  /** Whether GET (and HEAD) take query parameters of the endpoint's own, which its handler reads and checks. */
  ownQuery?: boolean;
}

/** The compiled answer of an endpoint to one request; `segment` is the path's `{id}` segment. */
export type Compiled = (req: Request, res: Response, segment: string | undefined) => MaybePromise<unknown>;

/** An endpoint compiled: a closure per method it defines, and one for every other method (405). */
export interface CompiledEndpoint {
  endpoint: Endpoint;
  allow: string;
  byMethod: Map<string, Compiled>;
  otherwise: Compiled;
}

const JSON_BODY = ['application/json'] as const;
const MERGE_PATCH_BODY = ['application/merge-patch+json', 'application/json'] as const;

/** The bound of a bulk array or a batch: MAX_BULK_BODY_BYTES, within what the bodies in flight may hold, and never below one element's. */
export const bulkBodyLimit = (config: Config): number =>
  Math.max(config.maxBodyBytes, Math.min(config.maxBulkBodyBytes, config.maxBodyBytesInFlight));

/** Refuses a query string that could not be read, and any parameter when the path takes none. */
function rejectQuery(query: Record<string, unknown>, takesQuery: boolean): void {
  const unreadable = queryErrorOf(query);
  if (unreadable) throw unreadable;
  const name = firstParameter(query);
  if (name !== undefined && !takesQuery) {
    throw new ApiError('badRequest', `Unknown query parameter "${name}".`, {
      errors: Object.keys(query).map((path) => ({ path, message: 'is not a query parameter of this path' })),
      problemCode: 'bad-query',
    });
  }
}

/**
 * Builds the closures of one endpoint. On a path with `{id}`, a segment that cannot be a key is a
 * 404 at once; any other refusal (405, 406, a bad query or body) is checked against the element's
 * existence only after it happened, so a missing element is still a 404 and an existing one costs
 * no extra read.
 */
export function compile(endpoint: Endpoint): CompiledEndpoint {
  const allow = endpoint.methods.join(', ');
  const produces = endpoint.produces ?? 'application/json';
  const { target } = endpoint;
  const notAllowed: Handler = (req) => {
    throw new ApiError('methodNotAllowed', `${req.method} is not allowed on ${endpoint.path}; use ${allow}.`, {
      headers: { Allow: allow },
    });
  };
  const options: Handler = (req, res, id) => {
    rejectQuery(req.query, false); // OPTIONS takes no parameter: one sent is refused, not ignored
    // The methods of an element that does not exist are not known: its OPTIONS is a 404 too.
    return then(target ? target.exists(id, req) : true, (exists) => {
      if (!exists) throw notFound((target as Target).resource, id);
      sendEmpty(res, 204, { Allow: allow });
    });
  };
  const served = (method: Method): Handler => {
    const handler = endpoint.handlers[method === 'HEAD' ? 'GET' : method] as Handler;
    const takesQuery = Boolean(endpoint.lists || endpoint.shapes || endpoint.ownQuery) && (method === 'GET' || method === 'HEAD');
    const negotiates = method !== 'DELETE' && endpoint.negotiates !== false;
    return (req, res, id) => {
      if (negotiates && !accepts(req, produces)) {
        throw new ApiError('notAcceptable', `This path only answers ${produces}; the Accept header rules it out.`);
      }
      rejectQuery(req.query, takesQuery);
      return handler(req, res, id);
    };
  };
  const withTarget = (handler: Handler): Compiled => {
    if (!target) return (req, res) => handler(req, res, undefined as never);
    /** The 404 when the target is gone, else the error itself. */
    const refusal = (error: unknown, req: Request, id: Id): unknown => {
      if (error instanceof ApiError && (error.code === 'notFound' || error.code === 'unavailable')) throw error;
      // (A body left unread, as after a 413, closes the connection whatever replaces the refusal: sendProblem.)
      const missing = () => notFound(target.resource, id);
      let exists: MaybePromise<boolean>;
      try {
        exists = target.exists(id, req);
      } catch {
        throw error; // the database cannot tell: the first refusal stands
      }
      const decide = (found: boolean) => {
        throw found ? error : missing();
      };
      if (!(exists instanceof Promise)) return decide(exists);
      return exists.then(decide, () => {
        throw error;
      });
    };
    return (req, res, segment = '') => {
      const id = target.parseId(segment);
      if (id === undefined) throw notFound(target.resource, decodeSegment(segment)); // the id as the client meant it
      try {
        const result = handler(req, res, id);
        return result instanceof Promise ? result.catch((error) => refusal(error, req, id) as never) : result;
      } catch (error) {
        return refusal(error, req, id) as never;
      }
    };
  };
  const byMethod = new Map<string, Compiled>(
    endpoint.methods.map((method) => [method, withTarget(method === 'OPTIONS' ? options : served(method))]),
  );
  return { endpoint, allow, byMethod, otherwise: withTarget(notAllowed) };
}

/** Answers GET/HEAD on an element: 304 when If-None-Match matches, else the element with its ETag. */
function sendElement(req: Request, res: Response, row: Row, shape: Shape): void {
  const response = elementResponse(200, shaped(shape, [row])[0]);
  if (evaluatePreconditions(req.method as string, req.headers, response.headers.ETag as string) === 'notModified') {
    sendEmpty(res, 304, { ETag: response.headers.ETag as string });
  } else {
    send(res, response);
  }
}

/** The If-Match / If-None-Match check of a write, run on the current row inside its transaction. */
function preconditionsOf(req: Request): Check {
  // Without a precondition there is nothing to compare: the current row's ETag is not computed.
  if (req.headers['if-match'] === undefined && req.headers['if-none-match'] === undefined) return () => undefined;
  return (current) => void evaluatePreconditions(req.method as string, req.headers, etagOfRow(current));
}

/**
 * The handlers of the registry's routes over a store. Reads stay synchronous on a synchronous
 * store; writes read their body, validate what can be validated without the current row, and
 * hand the rest to the store's transaction.
 */
export function createResourceEndpoints(registry: Registry, store: Store, config: Config, cursors: CursorCodec): Endpoint[] {
  const arrayLimit = bulkBodyLimit(config);
  /**
   * The request's JSON body: read from the connection, or (in a batch) the operation's, parsed with
   * the batch and held to the same bounds as alone: its size (as compact JSON) and its nesting.
   */
  const body = (req: Request, accepted: readonly string[], arrays = config.maxBodyBytes): MaybePromise<unknown> => {
    if (!req.operation) return readJson(req, config.maxBodyBytes, accepted, { arrayLimit: arrays });
    const { body: given } = req.operation;
    // An operation is application/json unless its headers name another type: only then is there a type to check, as alone.
    if (req.headers['content-type'] !== 'application/json') checkMediaType(req, accepted);
    checkBodySize(given, Buffer.byteLength(JSON.stringify(given)), config.maxBodyBytes, arrays);
    checkJsonDocument(given);
    return given;
  };
  /** The data as the request sees it: the store, or the transaction of the batch it is part of. */
  const dataOf = (req: Request): Transaction => req.operation?.tx ?? store;
  /** A kind's store for this request (`kind`, the store's own, unless the request is an operation of a batch). */
  const kindFor = (req: Request, resource: Resource, kind: ResourceStore): ResourceStore =>
    req.operation ? req.operation.tx.of(resource) : kind;
  const targetOf = (resource: Resource, kind: ResourceStore): Target => ({
    parseId: resource.parseId,
    exists: (id, req) => kindFor(req, resource, kind).exists(id),
    resource,
  });

  /**
   * Answers one page of a list: the rows, `Link: <…>; rel="next"` while more follow (RFC 8288),
   * and `X-Total-Count` when asked for. The next-page URL is the client's own query string with
   * the cursor replaced, so its length is the request's plus a short cursor (both bounded). A related
   * list (`scope`, and `parent` its path's target) has rows only while its parent exists: an empty
   * page is a 404 when the parent is gone.
   */
  const list = (req: Request, res: Response, resource: Resource, kind: ResourceStore, scope?: Scope, parent?: Target) => {
    const query = parseListQuery(resource, req.query as RawQuery, { scope: scope ? `${scope.field}=${scope.value}` : '', cursors });
    return then(kindFor(req, resource, kind).list(query, scope), (page) =>
      then(page.rows.length === 0 && parent ? parent.exists(scope?.value as Id, req) : true, (found) => {
        if (!found) throw notFound((parent as Target).resource, scope?.value as Id);
        return then(expand(dataOf(req), resource, page.rows, query.shape.expand), () => {
          const headers: Record<string, string> = {};
          const last = page.rows.at(-1);
          if (page.more && last) {
            const cursor = encodeCursor(query, last, cursors, () => page.rowidOf(last), page.rank);
            headers.Link = `<${req.path}?${withParameter(req.search, 'cursor', cursor)}>; rel="next"`;
          }
          if (page.total !== undefined) headers['X-Total-Count'] = String(page.total);
          sendJson(res, 200, shaped(query.shape, page.rows), headers);
        });
      }),
    );
  };

  /**
   * POST: validate and create, once per Idempotency-Key when the client sends one (docs/http-api.md#safe-clients). `path`
   * is the collection's as the service spells it, so that a retry spelling it otherwise (`/%75sers`) is the same request.
   */
  const create = (req: Request, res: Response, resource: Resource, kind: ResourceStore, path: string, fixed?: Row) => {
    const key = parseIdempotencyKey(req.headers['idempotency-key']);
    // An array is a bulk create (docs/bulk-and-batch.md), with its own body limit.
    return then(body(req, JSON_BODY, arrayLimit), (input) => {
      // Validated before the key's fingerprint is computed: a refused body costs no canonical hash.
      const valid = Array.isArray(input) ? toCreateRows(resource, input, fixed) : toCreateRow(resource, input, fixed);
      const once = key === undefined ? undefined : { key, fingerprint: fingerprintOf('POST', path, input) };
      const respond = (created: Row | Row[]) =>
        Array.isArray(created) ? jsonResponse(201, created) : elementResponse(201, created, { Location: resource.elementPath(created) });
      return then(kindFor(req, resource, kind).create(valid, respond, once), ({ response, replayed }) =>
        send(res, response, replayed ? { 'Idempotent-Replayed': 'true' } : undefined),
      );
    });
  };

  /** PUT and PATCH: read the body, then (in the write's transaction) check the preconditions and validate against the current row. */
  const update = (
    req: Request,
    res: Response,
    resource: Resource,
    kind: ResourceStore,
    id: Id,
    accepted: readonly string[],
    toRow: (input: unknown, current: Row) => Row,
  ) =>
    then(body(req, accepted), (input) => {
      const check = preconditionsOf(req);
      const change = (current: Row) => {
        check(current);
        return toRow(input, current);
      };
      return then(kindFor(req, resource, kind).update(id, change), (row) => send(res, elementResponse(200, row)));
    });

  return registry.routes.map((route: Route): Endpoint => {
    const { resource, relation } = route;
    const kind = store.of(resource);
    const base = { path: route.path, methods: route.methods, resource };
    if (route.shape === 'collection') {
      return {
        ...base,
        lists: true,
        handlers: {
          GET: (req, res) => list(req, res, resource, kind),
          POST: (req, res) => create(req, res, resource, kind, route.path),
        },
      };
    }
    if (route.shape === 'element') {
      return {
        ...base,
        target: targetOf(resource, kind),
        shapes: true,
        handlers: {
          GET: (req, res, id) => {
            const shape = parseElementQuery(resource, req.query as RawQuery);
            return then(kindFor(req, resource, kind).get(id), (row) => {
              if (!row) throw notFound(resource, id);
              return then(expand(dataOf(req), resource, [row], shape.expand), () => sendElement(req, res, row, shape));
            });
          },
          PUT: (req, res, id) =>
            update(req, res, resource, kind, id, JSON_BODY, (input, current) => toReplacementRow(resource, input, current)),
          PATCH: (req, res, id) =>
            update(req, res, resource, kind, id, MERGE_PATCH_BODY, (input, current) => toPatchedRow(resource, input, current)),
          DELETE: (req, res, id) => then(kindFor(req, resource, kind).remove(id, preconditionsOf(req)), () => sendEmpty(res, 204)),
        },
      };
    }
    const { parent, field } = relation as NonNullable<Route['relation']>;
    const target = targetOf(parent, store.of(parent));
    const [before, after] = route.path.split('{id}') as [string, string];
    const pathOf = (id: Id) => `${before}${encodeURIComponent(String(id))}${after}`;
    return {
      ...base,
      lists: true,
      target,
      handlers: {
        GET: (req, res, id) => list(req, res, resource, kind, { field, value: id, parent }, target),
        POST: (req, res, id) => create(req, res, resource, kind, pathOf(id), { [field]: id }),
      },
    };
  });
}

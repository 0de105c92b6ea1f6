// createApp wires the registry, the store and the service endpoints into one route table behind polka.
// It never listens and holds no module-level state: main.ts and the tests own the server.
import type { RequestListener } from 'node:http';
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import polka, { type Polka, type Request as PolkaRequest } from 'polka';
import { BATCH_PATH, batchEndpoint } from './api/batch.js';
import { CHANGES_PATH, changesEndpoints } from './api/changes.js';
import { type CompiledEndpoint, compile, createResourceEndpoints, type Endpoint, type Request, type Response } from './api/compile.js';
import { createRouteTable } from './api/routes.js';
import { createTickets } from './auth/tickets.js';
import type { Config } from './config.js';
import * as defaultSchema from './db/schema.js';
import { type Backend, createBackend } from './engine/backend.js';
import type { PostgresHandle } from './engine/postgres/pool.js';
import type { DatabaseHandle } from './engine/sqlite/connection.js';
import { type MaybePromise, then } from './engine/store.js';
import { ApiError, nothingServedAt, toProblem } from './errors.js';
import { onFirstUse } from './first-use.js';
import { createGuards, type IdentifiedResponse } from './http/guards.js';
import { type JsonResponse, send, sendJson, sendProblem } from './http/messages.js';
import { normalizeTarget } from './http/protocol.js';
import { createRequestLogger } from './logger.js';
import { createRegistry, READ_METHODS, type Registry } from './model/registry.js';
import { toOpenApi } from './openapi/document.js';
import { createCursorCodec } from './request/cursor.js';
import { parseRequestUrl } from './request/query-string.js';
import { docsEndpoints, serveDocsPage } from './web/docs.js';

export interface AppOptions {
  /** An open SQLite database, or a PostgreSQL pool; migrated either way. */
  database: DatabaseHandle | PostgresHandle;
  config: Config;
  logger: Logger;
  /** The schema module to serve; the shipped pet shop by default. */
  schema?: Record<string, unknown>;
  /** The registry of `schema`, when the caller built it already (main does, before migrating). */
  registry?: Registry;
  /** Where this code's migrations for the database's engine live (for /readyz); the committed folder by default. */
  migrationsFolder?: string;
}

export interface App {
  polka: Polka;
  registry: Registry;
  /** The (req, res) listener to hand to http.createServer. */
  handler: RequestListener;
  /** Every endpoint the app routes (service and resource), for documentation checks. */
  endpoints: Endpoint[];
  /** Settles once the app has read what it needs from the database at start (listen after it). */
  ready: Promise<void>;
  /** Deletes expired idempotency keys in batches; runs on a timer, exposed for tests. */
  purgeExpiredKeys: () => MaybePromise<number>;
  /** Deletes changes older than CHANGES_RETENTION_HOURS, a batch at a time; runs on a timer, exposed for tests. */
  purgeChanges: () => Promise<number>;
  /** Starts a graceful stop: /readyz answers 503 and responses close their connections. */
  beginShutdown: () => void;
  /** Stops the app's timers (the database stays open: its owner closes it). */
  close: () => void;
}

/** How often expired Idempotency-Keys are purged, and how many per batch (a batch is a short write). */
const PURGE_EVERY_MS = 10 * 60 * 1000;
const PURGE_BATCH = 500;

/** Changes purged per statement: each purge is a short write that never holds writers up for long. */
const CHANGES_PURGE_BATCH = 1000;

/** The service version, shown in the OpenAPI document: package.json's, the same from src/ and dist/. */
const { version: VERSION } = createRequire(import.meta.url)('../package.json') as { version: string };

/** A service path answering GET (and HEAD, OPTIONS) with a body of `produces`, described by `body` (a JSON Schema) for /openapi.json. */
function serviceEndpoint(
  path: string,
  summary: string,
  get: (req: Request, res: Response) => void,
  produces = 'application/json',
  body?: Record<string, unknown>,
): Endpoint & { summary: string; produces: string; body?: Record<string, unknown>; alternatives?: readonly string[] } {
  return { path, methods: READ_METHODS, handlers: { GET: get }, produces, summary, ...(body && { body }) };
}

/** The service's own paths, as the index links them. */
const INDEX_LINKS = {
  docs: '/docs',
  openapi: '/openapi.json',
  health: '/healthz',
  ready: '/readyz',
  batch: BATCH_PATH,
  changes: CHANGES_PATH,
};

/** A probe's answer: `{"status": <word>}`. */
const statusBody = (word: string) => ({ type: 'object', required: ['status'], properties: { status: { const: word } } });

type ServiceEndpoint = ReturnType<typeof serviceEndpoint>;

/** The service's own paths (index, probes, the document, /docs); `document` answers /openapi.json. */
function serviceEndpoints(
  registry: Registry,
  backend: Backend,
  shutdown: { stopping: boolean },
  document: () => JsonResponse,
): ServiceEndpoint[] {
  return [
    serviceEndpoint(
      '/',
      'The API index: every resource kind and the service links',
      (_req, res) =>
        sendJson(res, 200, {
          resources: registry.resources.map((r) => ({ name: r.name, href: r.path })),
          links: INDEX_LINKS,
        }),
      'application/json',
      {
        type: 'object',
        required: ['resources', 'links'],
        properties: {
          resources: {
            type: 'array',
            items: { type: 'object', required: ['name', 'href'], properties: { name: { type: 'string' }, href: { type: 'string' } } },
          },
          links: { type: 'object', required: Object.keys(INDEX_LINKS), additionalProperties: { type: 'string' } },
        },
      },
    ),
    serviceEndpoint(
      '/healthz',
      '200 while the process serves',
      (_req, res) => sendJson(res, 200, { status: 'ok' }),
      'application/json',
      statusBody('ok'),
    ),
    serviceEndpoint(
      '/readyz',
      '200 when the database is open and migrated, else 503',
      (_req, res) =>
        then(shutdown.stopping ? 'the service is shutting down' : backend.notReady(), (reason) => {
          if (reason)
            throw new ApiError('unavailable', `Not ready: ${reason}.`, { headers: { 'Retry-After': '1' }, problemCode: 'not-ready' });
          sendJson(res, 200, { status: 'ready' });
        }),
      'application/json',
      statusBody('ready'),
    ),
    serviceEndpoint('/openapi.json', 'This OpenAPI 3.1 document', (_req, res) => send(res, document())),
    {
      ...serviceEndpoint(
        '/docs',
        'The API reference for people (HTML); a client that does not ask for HTML (curl) gets a text/plain pointer to /openapi.json',
        serveDocsPage,
        'text/html',
      ),
      negotiates: false, // serveDocsPage answers text/plain too
      alternatives: ['text/plain'],
    },
  ];
}

/** What the request listener needs: the route table, the guards, and where every error goes. */
interface DispatchParts {
  table: ReturnType<typeof createRouteTable<CompiledEndpoint>>;
  guard: ReturnType<typeof createGuards>;
  onError: (error: unknown, req: PolkaRequest, res: Response) => void;
}

/**
 * The request listener and its polka app: the guards, then the route. Synchronous unless a guard is (the
 * rate limit), so a GET runs from the socket to res.end in one turn, with no promise of its own.
 */
function createListener({ table, guard, onError }: DispatchParts): { app: Polka; listener: RequestListener } {
  /** Every request past the guards: the route table finds the endpoint, its compiled closure for the method answers. */
  const serve = (req: PolkaRequest & Request, res: Response) => {
    const match = table.match(req.path);
    if (!match) throw nothingServedAt(req.path);
    const route: CompiledEndpoint = match.value;
    return (route.byMethod.get(req.method as string) ?? route.otherwise)(req, res, match.segment);
  };
  /** Answers a request the guards let through; an error, thrown or rejected, goes to onError. */
  const answer = (req: PolkaRequest & Request, res: Response): void => {
    try {
      const result = serve(req, res);
      if (result instanceof Promise) result.catch((error: unknown) => onError(error, req, res));
    } catch (error) {
      onError(error, req, res);
    }
  };
  /** Settles a verdict of the guards: answer the request, or refuse it (a guard that answered is done). */
  const settle = (verdict: unknown, req: PolkaRequest & Request, res: Response): void => {
    if (verdict === undefined) answer(req, res);
    else if (verdict !== 'answered') onError(verdict, req, res);
  };
  /** The one middleware: the guards, then the route. */
  const dispatch = (req: PolkaRequest & Request, res: Response): void => {
    let verdict: ReturnType<typeof guard>;
    try {
      verdict = guard(req, res);
    } catch (error) {
      onError(error, req, res);
      return;
    }
    if (verdict instanceof Promise) {
      verdict.then(
        (v) => settle(v, req, res),
        (error: unknown) => onError(error, req, res),
      );
    } else settle(verdict, req, res);
  };
  const app = polka({ onError: onError as never });
  // Every parameter read, not the first 1000 (@polka/url's node:querystring default): see src/request/query-string.ts.
  app.parse = parseRequestUrl;
  // polka routes every path to one middleware (a single loose pattern, one test per request); the
  // route table decides within it, so routing costs the same for 3 tables or 300.
  app.use(dispatch as never);

  /**
   * The request listener: polka's parse and route lookup, then the middleware it finds, in this turn.
   * polka's own `handler` runs middleware from an async loop (a promise and a microtask per request),
   * and a SQLite GET answers from here to res.end without one. The request gets what polka's handler
   * gives it (path, url, originalUrl, query, search; no params: the route table hands each route its
   * segments). The one middleware (`dispatch`, which every path reaches) answers or refuses the
   * request itself and never calls `next`.
   */
  const listener: RequestListener = (incoming, res) => {
    normalizeTarget(incoming);
    const req = incoming as PolkaRequest & Request;
    const { pathname, search, query } = app.parse(req);
    const [middleware] = app.find(req.method as Parameters<Polka['find']>[0], pathname).handlers;
    req.path = pathname;
    req.url = pathname + search;
    req.originalUrl ??= req.url;
    req.query = (query ?? {}) as PolkaRequest['query'];
    req.search = search;
    (middleware as typeof dispatch)(req, res);
  };
  return { app, listener };
}

/**
 * The purges on timers: expired Idempotency-Keys, and changes older than the retention. Each purges a batch
 * at a time, yielding to requests between batches; `stop` clears the timers (a purge then running fails
 * as its database closes, which is no fault to log).
 */
function startPurges(backend: Backend, config: Config, logger: Logger) {
  const { store } = backend;
  let closed = false;
  /** Purges every expired key, a batch at a time, yielding to requests between batches. */
  const purgeAll = async () => {
    if (!backend.isOpen() || closed) return;
    try {
      if ((await store.purgeExpiredKeys(PURGE_BATCH)) === PURGE_BATCH) setImmediate(purgeAll);
    } catch (error) {
      if (!closed) logger.warn({ err: error }, 'purging expired idempotency keys failed; will retry');
    }
  };
  const timer = setInterval(purgeAll, PURGE_EVERY_MS).unref();

  const retentionMs = config.changesRetentionHours * 3600 * 1000;
  const purgeChanges = async () => {
    let purged = 0;
    for (;;) {
      const removed = await store.changes.purge(new Date(Date.now() - retentionMs).toISOString(), CHANGES_PURGE_BATCH);
      purged += removed;
      if (removed < CHANGES_PURGE_BATCH) return purged;
      await new Promise((resolve) => setImmediate(resolve)); // requests go between batches
    }
  };
  /** Every tenth of the retention, within 1 s and 1 min: a change is gone at most that long after it expires. */
  const changesTimer = setInterval(
    () => {
      if (!backend.isOpen()) return;
      purgeChanges().catch((error: unknown) => closed || logger.warn({ err: error }, 'purging old changes failed; will retry'));
    },
    Math.min(60_000, Math.max(1000, retentionMs / 10)),
  ).unref();
  return {
    purgeChanges,
    stop: () => {
      closed = true;
      clearInterval(timer);
      clearInterval(changesTimer);
    },
  };
}

/** Builds the HTTP application for one open, migrated database. */
export function createApp({
  database,
  config,
  logger,
  schema = defaultSchema,
  registry = createRegistry(schema),
  migrationsFolder,
}: AppOptions): App {
  /** Set by beginShutdown; every response of this app holds it (IdentifiedResponse closes the connection after it). */
  const shutdown = { stopping: false };
  const backend = createBackend(database, { schema, resources: registry.resources, config, migrationsFolder });
  const { store } = backend;
  /**
   * The OpenAPI document, built on its first request and kept: with many kinds it is large (300 tables:
   * ~13 MB of JSON, several times that while it is built), and most processes never serve it.
   */
  const openapiDocument = onFirstUse(
    (): JsonResponse => ({
      status: 200,
      headers: {},
      body: JSON.stringify(
        toOpenApi(registry, {
          title: 'restable',
          version: VERSION,
          auth: Boolean(config.authToken),
          rateLimit: config.rateLimit > 0,
          services,
        }),
      ),
    }),
  );
  const services = serviceEndpoints(registry, backend, shutdown, openapiDocument);
  /** Tickets sign with the cursor key: any instance serving the database accepts them. */
  const feed = changesEndpoints({
    store,
    log: store.changes,
    resources: registry.resources,
    tickets: createTickets(() => backend.cursorKey()),
    config,
    logger,
    stopping: () => shutdown.stopping,
  });
  services.push(...feed.endpoints);
  /** Read (or made and stored) on first use; a database that cannot give it yet answers 503. */
  const cursors = createCursorCodec(backend.cursorKey);
  const batch = batchEndpoint({ store, config, routes: (path) => table.match(path) });
  const endpoints = [...services, batch, ...createResourceEndpoints(registry, store, config, cursors)];
  const table = createRouteTable([...endpoints, ...docsEndpoints()].map((endpoint) => ({ path: endpoint.path, value: compile(endpoint) })));

  const onError = (error: unknown, req: PolkaRequest, res: Response) => {
    const problem = toProblem(backend.unavailableFrom(error) ?? error, req.path ?? req.url);
    if (problem.unexpected)
      // The path only: a query string may carry a change-feed ticket.
      logger.error({ err: error, requestId: (req as { id?: string }).id, method: req.method, path: req.path }, 'request failed');
    sendProblem(res, problem);
  };
  const requestLog = createRequestLogger(logger);
  const onRequest = (req: Parameters<typeof requestLog>[0], res: Parameters<typeof requestLog>[1]) => {
    (res as IdentifiedResponse).shutdown = shutdown;
    requestLog(req, res);
  };
  const guard = createGuards(config, (path) => table.match(path)?.value.allow, onRequest, feed.ticketed);
  const { app, listener } = createListener({ table, guard, onError });
  const purges = startPurges(backend, config, logger);

  return {
    polka: app,
    registry,
    endpoints,
    handler: listener,
    ready: backend.ready,
    purgeExpiredKeys: () => store.purgeExpiredKeys(PURGE_BATCH),
    purgeChanges: purges.purgeChanges,
    beginShutdown: () => {
      shutdown.stopping = true;
      feed.streams.closeAll();
    },
    close: () => {
      purges.stop();
      feed.streams.closeAll();
      store.flush();
    },
  };
}

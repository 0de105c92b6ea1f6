// What every request passes before routing, in one guard: a request id and security headers (the
// response class that adds them), HTTP/1.x rules, the bound on work in flight, CORS, tokens, rate limit.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { type IncomingMessage, type OutgoingHttpHeaders, ServerResponse } from 'node:http';
import cors from 'cors';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { OPEN_PATHS, OPEN_PREFIX, PROBE_PATHS, READ_METHODS } from '../model/registry.js';
import { announcesBody, lingerAfterResponse, markClosing } from './connection.js';
import { createInFlightGate, createRateLimiter, SEAT } from './load.js';
import { protocolError, type Target } from './protocol.js';

export type GuardedRequest = Target & { id?: string; path?: string };

/** What a step decides: stop with an error, stop because it answered, or go on (undefined). */
export type Verdict = ApiError | 'answered' | undefined;
/** The guards of one request: their verdict, synchronous unless a step is (the rate limit). */
export type Guard = (req: GuardedRequest, res: ServerResponse) => Verdict | Promise<Verdict>;
type Step = (req: GuardedRequest, res: ServerResponse) => Verdict | Promise<Verdict>;

/** Headers every response carries: a JSON API is never sniffed, framed or a referrer source. */
const SECURITY_ENTRIES = Object.entries({
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
});
const SECURITY_NAMES = SECURITY_ENTRIES.map(([name]) => name.toLowerCase());

/** Reason phrases RFC 9110 renamed, which Node still writes by their RFC 7231 names (the problem's title uses these). */
const RFC_9110_REASONS: Record<number, string | undefined> = { 413: 'Content Too Large', 422: 'Unprocessable Content' };

/** Lower-case security header name → its index in SECURITY_ENTRIES. */
const SECURITY_INDEX = new Map(SECURITY_NAMES.map((name, i) => [name, i]));

/**
 * The server's responses: once identified, every response carries its request id and the security
 * headers, added in writeHead as one list with the response's own headers instead of header by
 * header beforehand (each setHeader validates and stores, and a writeHead after any setHeader
 * merges its headers one by one: ~8 such calls a response). A header the response sets itself
 * (a page's own Content-Security-Policy) wins over the default. Headers set one by one (CORS,
 * RateLimit) are only looked up when some were set (`progressive`).
 */
export class IdentifiedResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  requestId?: string;
  /** When the request arrived (performance.now()), for the request log line. */
  startedAt = 0;
  /** The in-flight gate's hold on this response (load.ts), declared here so every response has one shape. */
  [SEAT]: unknown = undefined;
  /** Its app's shutdown state: a response that starts once the app is stopping closes its connection. */
  shutdown: { stopping: boolean } | undefined = undefined;
  /** Whether a header was set before writeHead (setHeader/appendHeader). */
  private progressive = false;
  /**
   * Run when the response has finished, before its 'finish' listeners (the request log line): a field
   * set per request rather than a listener added per request, which Node's emit then walks as a list.
   */
  whenFinished: ((this: IdentifiedResponse) => void) | undefined = undefined;

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'finish' && this.whenFinished !== undefined) this.whenFinished();
    return super.emit(event, ...args);
  }

  override setHeader(name: string, value: number | string | readonly string[]): this {
    this.progressive = true;
    return super.setHeader(name, value);
  }

  override appendHeader(name: string, value: string | readonly string[]): this {
    this.progressive = true;
    return super.appendHeader(name, value);
  }

  override writeHead(statusCode: number, ...rest: unknown[]): this {
    // Also a request that arrived before the stop began: its client must not send another on this connection.
    if (this.shutdown?.stopping) this.shouldKeepAlive = false;
    // An answer given before the request's body arrived whole (a refusal decided on the headers, or a GET,
    // HEAD, DELETE or OPTIONS, which read no body) closes the connection, lingering: the rest is not read,
    // where keeping the connection would mean reading all of it, however large. @see RFC 9112 §9.6
    const req = this.req as IncomingMessage | undefined;
    if (req && !req.complete && announcesBody(req)) {
      this.shouldKeepAlive = false;
      lingerAfterResponse(req.socket);
    }
    if (this.requestId === undefined) return super.writeHead(statusCode, ...(rest as [OutgoingHttpHeaders]));
    const phrase = typeof rest[0] === 'string' ? rest[0] : undefined;
    const reason = phrase ?? RFC_9110_REASONS[statusCode];
    // Node reads writeHead(status, headers) and writeHead(status, reason | undefined, headers).
    const given = (phrase === undefined ? (rest[0] ?? rest[1]) : rest[1]) as OutgoingHttpHeaders | (string | number)[] | undefined;
    const list: (string | number | string[])[] = ['X-Request-Id', this.requestId];
    /** Bit i set: the response names SECURITY_ENTRIES[i] itself. */
    let named = 0;
    const take = (name: string, value: string | number | string[]) => {
      const lower = name.toLowerCase();
      const index = SECURITY_INDEX.get(lower);
      if (index !== undefined) named |= 1 << index;
      // A Vary set one by one before (CORS: Origin) is kept: the answer varies on both.
      if (lower === 'vary' && this.progressive) {
        const held = this.getHeader('vary');
        this.removeHeader('vary');
        if (held !== undefined) return void list.push(name, mergedVary(String(held), String(value)));
      }
      list.push(name, value);
    };
    if (Array.isArray(given)) {
      for (let i = 0; i < given.length; i += 2) take(String(given[i]), given[i + 1] as string | number);
    } else if (given) {
      for (const name in given) {
        const value = given[name];
        if (value !== undefined) take(name, value);
      }
    }
    for (let i = 0; i < SECURITY_ENTRIES.length; i++) {
      if (named & (1 << i) || (this.progressive && this.hasHeader(SECURITY_NAMES[i] as string))) continue;
      const [name, value] = SECURITY_ENTRIES[i] as [string, string];
      list.push(name, value);
    }
    if (reason === undefined) super.writeHead(statusCode, list as string[]);
    else super.writeHead(statusCode, reason, list as string[]);
    // An answer that closes the connection (Connection: close, a stop, HTTP/1.0): nothing after it is served.
    // Node marks it `_last` when it stores the headers (shouldKeepAlive stays true for an explicit close).
    if ((this as { _last?: boolean })._last) markClosing(this.socket);
    return this;
  }
}

/** Two Vary values as one, each field once (RFC 9110 §12.5.5: field names are case-insensitive). */
function mergedVary(held: string, added: string): string {
  const fields = held.split(',').map((f) => f.trim());
  const known = new Set(fields.map((f) => f.toLowerCase()));
  for (const field of added.split(',').map((f) => f.trim())) if (!known.has(field.toLowerCase())) fields.push(field);
  return fields.join(', ');
}

/** Response headers a browser script may read across origins. */
export const EXPOSED_HEADERS = [
  'Location',
  'ETag',
  'Link',
  'X-Total-Count',
  'X-Request-Id',
  'Allow',
  'Idempotent-Replayed',
  'Retry-After',
  'RateLimit',
  'RateLimit-Policy',
];

/** Every method the service defines somewhere: the answer to `OPTIONS *` (RFC 9110 §9.3.7). */
const ALL_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** The request's id: the caller's X-Request-Id when it is sane (1–200 visible ASCII characters), else a new UUID. */
export function requestIdOf(given: unknown): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** The security headers as raw header lines, for answers written on the socket before any request exists. */
export const SECURITY_HEADER_LINES = SECURITY_ENTRIES.map(([name, value]) => `${name}: ${value}\r\n`).join('');

/**
 * Uses the caller's X-Request-Id when it is sane, else a new UUID; echoes it, sets the security
 * headers, and starts the request log line, so that even refused requests are logged with their id.
 */
function identify(log?: (req: GuardedRequest, res: ServerResponse) => void): Step {
  return (req, res) => {
    req.id = requestIdOf(req.headers['x-request-id']);
    if (res instanceof IdentifiedResponse) res.requestId = req.id;
    else {
      res.setHeader('X-Request-Id', req.id);
      for (const [name, value] of SECURITY_ENTRIES) res.setHeader(name, value);
    }
    log?.(req, res);
    return undefined;
  };
}

/**
 * CORS headers, and the answer to a real preflight (OPTIONS with Origin and Access-Control-Request-Method).
 * A preflight needs no token; with authentication on it names every method on any path, so that it tells
 * a client without a token nothing about which paths exist; without, the methods of its path (its Allow).
 */
function corsSteps(
  origins: NonNullable<Config['corsOrigins']>,
  allowOf: AllowOf,
  authenticates: boolean,
): { headers: Step; preflight: Step } {
  const options = { origin: origins, exposedHeaders: EXPOSED_HEADERS, maxAge: 600, optionsSuccessStatus: 204 };
  const methodsOf: AllowOf = authenticates ? () => ALL_METHODS : allowOf;
  const handle = cors<GuardedRequest>((req, callback) => callback(null, { ...options, methods: methodsOf(req.path ?? '') }));
  /** Runs cors as `method`: with a fixed origin list it decides synchronously, and ends the response of a preflight. */
  const run = (req: GuardedRequest, res: ServerResponse, method: string): Verdict => {
    const sent = req.method;
    req.method = method;
    let verdict: Verdict;
    handle(req, res, (error?: unknown) => {
      verdict = error instanceof ApiError ? error : undefined;
    });
    req.method = sent;
    return res.writableEnded ? 'answered' : verdict;
  };
  const isPreflight = (req: GuardedRequest) =>
    req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined;
  return {
    // First, so that every answer carries them, the guards' own refusals (400, 417, 503…) included.
    headers: (req, res) => {
      if (req.method !== 'OPTIONS') return run(req, res, req.method ?? 'GET');
      // Any OPTIONS that is no preflight answered below is routed like any request (204 + Allow, or 404), with the CORS headers of a simple request.
      return isPreflight(req) && methodsOf(req.path ?? '') ? undefined : run(req, res, 'GET');
    },
    // A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered once the request passed the protocol checks.
    preflight: (req, res) => (isPreflight(req) && methodsOf(req.path ?? '') ? run(req, res, 'OPTIONS') : undefined),
  };
}

/** Digest first, so the comparison is constant-time whatever the lengths. */
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

type Client = 'full' | 'read' | 'invalid' | 'none';

/**
 * Which token a request presents: `Authorization: Bearer <token>`, compared in constant time.
 * @see https://www.rfc-editor.org/rfc/rfc6750#section-2.1
 */
function tokenReader(fullToken: string, readToken: string | undefined): (req: IncomingMessage) => Client {
  const full = digest(fullToken);
  const read = readToken === undefined ? undefined : digest(readToken);
  return (req) => {
    const header = req.headers.authorization;
    // Another scheme (Basic…) presents no bearer token: answered as none was sent, without an error code (RFC 6750 §3.1).
    if (!header || !/^Bearer(?: |$)/i.test(header)) return 'none';
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header);
    const given = match ? digest(match[1] as string) : undefined;
    if (given && timingSafeEqual(given, full)) return 'full';
    if (given && read && timingSafeEqual(given, read)) return 'read';
    return 'invalid';
  };
}

/**
 * 401 without a valid token, 403 for a write with the read token; open paths pass.
 * @see https://www.rfc-editor.org/rfc/rfc6750#section-3
 */
const challenge = (error?: string) => ({ 'WWW-Authenticate': `Bearer realm="restable"${error ? `, error="${error}"` : ''}` });
const CHALLENGES = { none: challenge(), invalid: challenge('invalid_token'), read: challenge('insufficient_scope') };

/** A request that authenticates otherwise than by header (a change-feed ticket); its endpoint checks it. */
export type Ticketed = (req: GuardedRequest & { query?: unknown }) => boolean;

function authorize(req: GuardedRequest, client: Client, ticketed?: Ticketed): Verdict {
  if (OPEN_PATHS.has(req.path ?? '') || req.path?.startsWith(OPEN_PREFIX)) return undefined;
  if (client === 'none' && ticketed?.(req)) return undefined;
  if (client === 'full' || (client === 'read' && (READ_METHODS as readonly string[]).includes(req.method ?? ''))) return undefined;
  if (client === 'read') {
    return new ApiError('forbidden', `The read-only token may not ${req.method}; use the full token.`, {
      headers: CHALLENGES.read,
    });
  }
  if (client === 'none') {
    return new ApiError('unauthorized', 'This service needs a bearer token (Authorization: Bearer <token>).', { headers: CHALLENGES.none });
  }
  return new ApiError('unauthorized', 'The bearer token is not valid.', { headers: CHALLENGES.invalid });
}

/**
 * Tokens, then the rate limit, then authorization: a client is counted by its token when the token
 * is valid, else by its address, so failed attempts count against the address that makes them.
 */
function clientStep(
  config: Pick<Config, 'authToken' | 'authReadToken' | 'rateLimit' | 'rateLimitWindowS'>,
  ticketed?: Ticketed,
): Step | undefined {
  const readToken = config.authToken ? tokenReader(config.authToken, config.authReadToken) : undefined;
  const limit = createRateLimiter(config);
  if (!readToken && !limit) return undefined;
  const check = (req: GuardedRequest, client: Client) => (readToken ? authorize(req, client, ticketed) : undefined);
  return (req, res) => {
    const client = readToken?.(req) ?? 'none';
    if (!limit || PROBE_PATHS.has(req.path ?? '')) return check(req, client); // probes: see exceptProbes
    const key = client === 'full' || client === 'read' ? `token:${client}` : `address:${req.socket.remoteAddress ?? ''}`;
    return limit(key).then((outcome) => {
      if (!outcome.allowed) return outcome.error;
      res.setHeader('RateLimit-Policy', outcome.policy);
      res.setHeader('RateLimit', outcome.remaining);
      return check(req, client);
    });
  };
}

/** The step, except on the health probes: a busy service must still answer its orchestrator. */
function exceptProbes(step: Step): Step {
  return (req, res) => (PROBE_PATHS.has(req.path ?? '') ? undefined : step(req, res));
}

/** `OPTIONS *` asks what the server supports as a whole; it is answered after every other guard. */
const asterisk: Step = (req, res) => {
  if (!req.asteriskForm) return undefined;
  res.writeHead(204, { Allow: ALL_METHODS });
  res.end();
  return 'answered';
};

/** The methods a path defines (its Allow), or undefined when nothing is routed there. */
export type AllowOf = (path: string) => string | undefined;

/** Runs steps from `i` in order, synchronously until a step answers a promise (then the rest follow it). */
function runSteps(steps: Step[], i: number, req: GuardedRequest, res: ServerResponse): Verdict | Promise<Verdict> {
  for (; i < steps.length; i++) {
    const verdict = (steps[i] as Step)(req, res);
    if (verdict instanceof Promise) {
      const resume = i + 1;
      return verdict.then((v) => (v === undefined ? runSteps(steps, resume, req, res) : v));
    }
    if (verdict !== undefined) return verdict;
  }
  return undefined;
}

/**
 * The guards of a configuration, in one function; `log` (the request logger) starts right after the
 * request id is set; `ticketed` requests pass authentication to their endpoint.
 */
export function createGuards(
  config: Pick<
    Config,
    'authToken' | 'authReadToken' | 'corsOrigins' | 'maxInFlight' | 'maxBodyBytesInFlight' | 'rateLimit' | 'rateLimitWindowS'
  >,
  allowOf: AllowOf,
  log?: (req: GuardedRequest, res: ServerResponse) => void,
  ticketed?: Ticketed,
): Guard {
  const client = clientStep(config, ticketed);
  const cors = config.corsOrigins ? corsSteps(config.corsOrigins, allowOf, Boolean(config.authToken)) : undefined;
  const steps: (Step | undefined)[] = [
    identify(log),
    cors?.headers,
    protocolError,
    exceptProbes(createInFlightGate(config)),
    cors?.preflight,
    client,
    asterisk,
  ];
  const active = steps.filter((step): step is Step => step !== undefined);
  return (req, res) => runSteps(active, 0, req, res);
}

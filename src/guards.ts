// What every request passes before routing: a request id, security headers, CORS (when
// configured) and bearer-token authentication (when configured). Guards never touch the database.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from 'cors';
import type { Config } from './config.js';
import { ApiError } from './errors.js';

export type Guard = (req: IncomingMessage & { id?: string; path?: string }, res: ServerResponse, next: (error?: unknown) => void) => void;

/** Headers every response carries: a JSON API is never sniffed, framed or a referrer source. */
const SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
};

/** Response headers a browser script may read across origins. */
export const EXPOSED_HEADERS = ['Location', 'ETag', 'Link', 'X-Total-Count', 'X-Request-Id', 'Allow', 'Idempotent-Replayed'];

/**
 * Paths that stay open when authentication is on: probes (orchestrators have no token) and the
 * documentation (a browser cannot attach a bearer token to a page load; it holds no data).
 */
const OPEN_PATHS = new Set(['/healthz', '/readyz', '/openapi.json', '/docs', '/docs/init.js'].flatMap((p) => [p, `${p}/`]));
const OPEN_PREFIX = '/docs/assets/';
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * Uses the caller's X-Request-Id when it is sane, else a new UUID; echoes it, sets the security
 * headers, and starts the request log line (one guard: each extra middleware is a polka hop).
 */
function identify(log?: (req: Parameters<Guard>[0], res: ServerResponse) => void): Guard {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    req.id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-Id', req.id);
    for (const [name, value] of SECURITY_ENTRIES) res.setHeader(name, value);
    log?.(req, res);
    next();
  };
}
const SECURITY_ENTRIES = Object.entries(SECURITY_HEADERS);

/** Digest first, so the comparison is constant-time whatever the lengths. */
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Requires `Authorization: Bearer <token>`; the read token may only GET, HEAD and OPTIONS.
 * @see https://www.rfc-editor.org/rfc/rfc6750#section-3
 */
function authenticate(fullToken: string, readToken: string | undefined): Guard {
  const full = digest(fullToken);
  const read = readToken === undefined ? undefined : digest(readToken);
  const challenge = (error?: string) => ({ 'WWW-Authenticate': `Bearer realm="restable"${error ? `, error="${error}"` : ''}` });
  return (req, _res, next) => {
    if (OPEN_PATHS.has(req.path ?? '') || req.path?.startsWith(OPEN_PREFIX)) return next();
    const header = req.headers.authorization;
    if (!header)
      return next(
        new ApiError('unauthorized', 'This service needs a bearer token (Authorization: Bearer <token>).', { headers: challenge() }),
      );
    const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header);
    const given = match ? digest(match[1] as string) : undefined;
    if (given && timingSafeEqual(given, full)) return next();
    if (given && read && timingSafeEqual(given, read)) {
      if (READ_METHODS.has(req.method ?? '')) return next();
      return next(
        new ApiError('forbidden', `The read-only token may not ${req.method}; use the full token.`, {
          headers: challenge('insufficient_scope'),
        }),
      );
    }
    next(new ApiError('unauthorized', 'The bearer token is not valid.', { headers: challenge('invalid_token') }));
  };
}

/**
 * The guards for a configuration, in the order they must run; `log` (the request logger) starts
 * right after the request id is set, so that even refused requests are logged with their id.
 */
export function createGuards(
  config: Pick<Config, 'authToken' | 'authReadToken' | 'corsOrigins'>,
  log?: (req: Parameters<Guard>[0], res: ServerResponse) => void,
): Guard[] {
  const guards: Guard[] = [identify(log)];
  if (config.corsOrigins) {
    guards.push(
      cors({
        origin: config.corsOrigins,
        methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
        exposedHeaders: EXPOSED_HEADERS,
        maxAge: 600,
        optionsSuccessStatus: 204,
      }) as Guard,
    );
  }
  if (config.authToken) guards.push(authenticate(config.authToken, config.authReadToken));
  return guards;
}

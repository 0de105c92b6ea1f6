// Bounds on the work a client can put on the service: requests and request-body bytes in flight
// (503 + Retry-After past them) and the optional per-client rate limit (429 + RateLimit headers).
import cluster from 'node:cluster';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type * as Flexible from 'rate-limiter-flexible';
import type { Config } from './config.js';
import { ApiError } from './errors.js';

/**
 * The rate limiter's classes, loaded only when a limit is configured and only the files needed:
 * the package's index loads every backend it supports (Redis, Mongo, Prisma…), ~9 MB of RSS.
 */
function flexible() {
  const load = createRequire(import.meta.url);
  const { RateLimiterCluster, RateLimiterClusterMaster } = load('rate-limiter-flexible/lib/RateLimiterCluster.js');
  return {
    RateLimiterMemory: load('rate-limiter-flexible/lib/RateLimiterMemory.js') as typeof Flexible.RateLimiterMemory,
    RateLimiterRes: load('rate-limiter-flexible/lib/RateLimiterRes.js') as typeof Flexible.RateLimiterRes,
    RateLimiterCluster: RateLimiterCluster as typeof Flexible.RateLimiterCluster,
    RateLimiterClusterMaster: RateLimiterClusterMaster as typeof Flexible.RateLimiterClusterMaster,
  };
}

/**
 * Admits a request, or says why not: past `maxInFlight` requests, or past `maxBodyBytesInFlight`
 * bytes of bodies that may be buffered at once, the answer is a cheap 503. A body's share is its
 * Content-Length (capped at the body limit), or the whole limit when it is chunked. The share is
 * given back when the response closes, whether it finished or the client went away.
 */
export function createInFlightGate(config: Pick<Config, 'maxInFlight' | 'maxBodyBytesInFlight' | 'maxBodyBytes'>) {
  let requests = 0;
  let bytes = 0;
  return (req: IncomingMessage, res: ServerResponse): ApiError | undefined => {
    const share = bodyShare(req, config.maxBodyBytes);
    if (requests >= config.maxInFlight || bytes + share > config.maxBodyBytesInFlight) {
      return new ApiError('unavailable', 'The service is at its limit of work in flight; try again shortly.', {
        // A body that is not read must not be taken for the next request on this connection.
        headers: share > 0 ? { 'Retry-After': '1', Connection: 'close' } : { 'Retry-After': '1' },
      });
    }
    requests++;
    bytes += share;
    res.on('close', () => {
      requests--;
      bytes -= share;
    });
    return undefined;
  };
}

/** The bytes a request's body may take while it is read and parsed. */
function bodyShare(req: IncomingMessage, limit: number): number {
  if (req.headers['transfer-encoding'] !== undefined) return limit;
  const length = Number(req.headers['content-length']);
  return Number.isFinite(length) && length > 0 ? Math.min(length, limit) : 0;
}

/** The policy's name in the RateLimit fields. */
const POLICY = 'per-client';

/** Allowed, with the RateLimit-Policy and RateLimit field values to send; or refused with its 429. */
export type RateLimitOutcome = { allowed: true; policy: string; remaining: string } | { allowed: false; error: ApiError };

/**
 * The per-client rate limit: `rateLimit` requests per `rateLimitWindowS` seconds (a fixed window),
 * or undefined when it is off. With WORKERS > 1 the workers share one count kept by the cluster
 * primary (see `startRateLimitPrimary`). Headers follow the IETF RateLimit fields draft.
 * @see https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/
 */
export function createRateLimiter(config: Pick<Config, 'rateLimit' | 'rateLimitWindowS'>) {
  const { rateLimit: points, rateLimitWindowS: duration } = config;
  if (!points) return undefined;
  const { RateLimiterCluster, RateLimiterMemory, RateLimiterRes } = flexible();
  const options = { points, duration, keyPrefix: 'restable' };
  // In a worker the primary keeps the count; if it does not answer in time, the worker counts alone.
  const limiter = cluster.isWorker
    ? new RateLimiterCluster({ ...options, timeoutMs: 1000, insuranceLimiter: new RateLimiterMemory(options) })
    : new RateLimiterMemory(options);
  const policy = `"${POLICY}";q=${points};w=${duration}`;
  const remaining = (res: Flexible.RateLimiterRes) => `"${POLICY}";r=${res.remainingPoints};t=${Math.ceil(res.msBeforeNext / 1000)}`;
  return async (client: string): Promise<RateLimitOutcome> => {
    try {
      return { allowed: true, policy, remaining: remaining(await limiter.consume(client)) };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      const retryAfter = String(Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)));
      return {
        allowed: false,
        error: new ApiError(
          'tooManyRequests',
          `This client made more than ${points} requests in ${duration} s; retry after ${retryAfter} s.`,
          {
            headers: { 'RateLimit-Policy': policy, RateLimit: remaining(rejection), 'Retry-After': retryAfter },
          },
        ),
      };
    }
  };
}

/** In the cluster primary: keeps the rate-limit counts the workers share (WORKERS > 1). */
export function startRateLimitPrimary(): void {
  new (flexible().RateLimiterClusterMaster)();
}

// Bounds on the work a client can put on the service: requests and request-body bytes in flight
// (503 + Retry-After past them) and the optional per-client rate limit (429 + RateLimit headers).
import cluster from 'node:cluster';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type * as Flexible from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { announcesBody } from './connection.js';

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

/** A request's share of the body budget: `take` more bytes or say no (the body must then be refused); `release` once read. */
export interface BodyBudget {
  take: (bytes: number) => boolean;
  release: () => void;
}
const BUDGET = Symbol('body budget');
/** The gate's hold on a response: its place among the requests in flight, given back once. */
export const SEAT: unique symbol = Symbol('in-flight seat');

/** Gives back a request's place among the requests in flight before its response ends (an endless event stream). */
export function leaveInFlight(res: ServerResponse): void {
  (res as { [SEAT]?: (this: ServerResponse) => void })[SEAT]?.call(res);
}

/** The body budget of a request the gate admitted (undefined for one it never saw, e.g. in unit tests). */
export function bodyBudgetOf(req: IncomingMessage): BodyBudget | undefined {
  return (req as { [BUDGET]?: BodyBudget })[BUDGET];
}

/** The 503 of a request refused because too much is in flight (a body left unread closes the connection: sendProblem). */
function overloaded(): ApiError {
  return new ApiError('unavailable', 'The service is at its limit of work in flight; try again shortly.', {
    headers: { 'Retry-After': '1' },
    problemCode: 'overloaded',
  });
}

/**
 * Admits a request, or says why not: past `maxInFlight` requests, or while the bodies being read
 * already hold `maxBodyBytesInFlight` bytes, the answer is a cheap 503. Body bytes are counted as
 * they arrive (the body reader asks `bodyBudgetOf(req)` for each chunk and refuses the body with a
 * 503 when the budget is spent), so a client that announces a large body and sends nothing holds
 * nothing. Its bytes are given back once its body has been read (or refused), and everything a
 * request took when its response closes, finished or not.
 */
export function createInFlightGate(config: Pick<Config, 'maxInFlight' | 'maxBodyBytesInFlight'>) {
  let requests = 0;
  let bytes = 0;
  /** A request gives back its place once: when its response closes (one listener for all), or before (leaveInFlight). */
  function leave(this: ServerResponse & { [SEAT]?: unknown }) {
    if (this[SEAT] === undefined) return;
    this[SEAT] = undefined;
    requests--;
  }
  return (req: IncomingMessage, res: ServerResponse): ApiError | undefined => {
    const hasBody = announcesBody(req);
    if (requests >= config.maxInFlight || (hasBody && bytes >= config.maxBodyBytesInFlight)) return overloaded();
    requests++;
    (res as { [SEAT]?: unknown })[SEAT] = leave;
    res.on('close', leave);
    if (!hasBody) return undefined;
    let taken = 0;
    const release = () => {
      bytes -= taken;
      taken = 0;
    };
    const take = (more: number) => {
      if (bytes + more > config.maxBodyBytesInFlight) return false;
      bytes += more;
      taken += more;
      return true;
    };
    (req as { [BUDGET]?: BodyBudget })[BUDGET] = { take, release };
    res.on('close', release);
    return undefined;
  };
}

/** The 503 for a body refused part-way because the bodies being read hold the whole budget. */
export const overBudget = () => overloaded();

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

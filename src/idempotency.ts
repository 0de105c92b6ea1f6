// Idempotency-Key for POST: the first successful response per key is stored in SQLite with a hash
// of its request and replayed on retries; check, create and store happen in one transaction.
import { createHash } from 'node:crypto';
import { and, eq, gt, inArray, lte } from 'drizzle-orm';
import { configure } from 'safe-stable-stringify';
import type { Db } from './db/client.js';
import { idempotencyKeys } from './db/internal-schema.js';
import { ApiError } from './errors.js';
import type { JsonResponse } from './http.js';
import { unavailableFrom } from './repository.js';
import { MAX_JSON_DEPTH } from './validation.js';

/** How long a key is remembered (API.md §6: at least 24 hours). */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000;
const KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * Reads the Idempotency-Key header (a plain token or a structured-field string in quotes).
 * @throws 400 when it is present but empty, too long or not visible ASCII
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const raw = Array.isArray(header) ? header.join(',') : header;
  const key = /^"(.*)"$/.exec(raw.trim())?.[1] ?? raw.trim();
  if (!KEY.test(key)) throw new ApiError('badRequest', 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
  return key;
}

/**
 * Serialises a body with sorted keys. Its recursion stops at MAX_JSON_DEPTH, the nesting readJson
 * lets through (checked without recursion), so no body can exhaust the stack here.
 */
const stringify = configure({ maximumDepth: MAX_JSON_DEPTH });

/** What a retry must repeat: method, path (trailing slash ignored) and the JSON body, key order ignored. */
export function fingerprintOf(method: string, path: string, body: unknown): string {
  const canonical = `${method} ${path.replace(/(.)\/$/, '$1')}\n${stringify(body)}`;
  return createHash('sha256').update(canonical).digest('base64url');
}

export interface IdempotencyStore {
  /**
   * Replays the stored response of `key`, or runs `produce` and stores its response, atomically
   * (an IMMEDIATE transaction), so concurrent retries create one element between them.
   * A failed `produce` stores nothing. Same key with another fingerprint is a 422.
   */
  once(key: string, fingerprint: string, produce: () => JsonResponse): { response: JsonResponse; replayed: boolean };
  /** Deletes up to `batch` expired keys; returns how many it deleted. */
  purgeExpired(batch?: number): number;
}

export function createIdempotencyStore(db: Db, now: () => number = Date.now): IdempotencyStore {
  const t = idempotencyKeys;

  const once: IdempotencyStore['once'] = (key, fingerprint, produce) =>
    db.transaction(
      () => {
        const stored = db
          .select()
          .from(t)
          .where(and(eq(t.key, key), gt(t.createdAt, now() - KEY_TTL_MS)))
          .get();
        if (stored) {
          if (stored.fingerprint !== fingerprint) {
            throw new ApiError('unprocessable', 'This Idempotency-Key was used with another request; use a new key for a new request.');
          }
          return { response: { status: stored.status, headers: JSON.parse(stored.headers), body: stored.body }, replayed: true };
        }
        const response = produce();
        const row = {
          fingerprint,
          status: response.status,
          headers: JSON.stringify(response.headers),
          body: response.body,
          createdAt: now(),
        };
        db.insert(t)
          .values({ key, ...row })
          .onConflictDoUpdate({ target: t.key, set: row })
          .run();
        return { response, replayed: false };
      },
      { behavior: 'immediate' },
    );

  return {
    once(key, fingerprint, produce) {
      try {
        return once(key, fingerprint, produce);
      } catch (error) {
        throw unavailableFrom(error) ?? error;
      }
    },
    purgeExpired(batch = 500) {
      const expired = db
        .select({ key: t.key })
        .from(t)
        .where(lte(t.createdAt, now() - KEY_TTL_MS))
        .limit(batch);
      return db.delete(t).where(inArray(t.key, expired)).run().changes;
    },
  };
}

// Idempotency-Key for POST (docs/http-api.md#safe-clients): reading the header, the fingerprint a retry must repeat,
// and how long a key is kept. The store keeps the first response per key with its write.
import { createHash } from 'node:crypto';
import { configure } from 'safe-stable-stringify';
import { ApiError } from '../errors.js';
import { MAX_JSON_DEPTH } from './validation.js';

/** How long a key is remembered (docs/http-api.md#safe-clients: at least 24 hours). */
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

/** The 422 for a key stored with another request's fingerprint. */
export function reusedKey(): ApiError {
  return new ApiError('unprocessable', 'This Idempotency-Key was used with another request; use a new key for a new request.', {
    problemCode: 'idempotency-key-reused',
  });
}

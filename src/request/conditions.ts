// Pure conditional-request rules: the strong ETag of a representation and the evaluation of
// If-Match / If-None-Match (RFC 9110 §13). It decides; the handlers and the store act on it.
import * as crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from '../errors.js';

/** SHA-1 of a string as base64url: the one-shot crypto.hash where Node has it (≥ 20.12), else a Hash. */
const sha1: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha1', text, 'base64url')
    : (text) => crypto.createHash('sha1').update(text).digest('base64url');

/**
 * A strong entity tag for a JSON body: a hash of its exact bytes, so any change changes it.
 * SHA-1 is ample against accidental collisions (an ETag is not a security boundary) and cheap.
 */
export function etagOf(body: string): string {
  return `"${sha1(body)}"`;
}

/** The ETag of a row as element responses serialize it. */
export function etagOfRow(row: unknown): string {
  return etagOf(JSON.stringify(row));
}

interface TagList {
  any: boolean;
  tags: { weak: boolean; opaque: string }[];
}

/** Parses `*` or a list of entity tags; undefined when the header is absent. @see RFC 9110 §8.8.3 */
function parseTags(header: string | undefined): TagList | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return { any: true, tags: [] };
  const tags = [...header.matchAll(/(W\/)?("[\x21\x23-\x7e\x80-\xff]*")/g)].map((m) => ({ weak: Boolean(m[1]), opaque: m[2] as string }));
  return { any: false, tags };
}

export type Outcome = 'proceed' | 'notModified';

/**
 * Evaluates the preconditions of a request against the target's current ETag, as the response
 * carries it (a weak one, `W/"…"`, for a static file). If-Match uses the strong comparison, which a
 * weak tag never passes; If-None-Match the weak one.
 * @returns 'notModified' when a GET/HEAD may answer 304
 * @throws {ApiError} 412 when a precondition fails
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-13.2.2
 */
export function evaluatePreconditions(method: string, headers: IncomingHttpHeaders, etag: string): Outcome {
  const ifMatch = parseTags(headers['if-match']);
  if (ifMatch && !ifMatch.any && !ifMatch.tags.some((t) => !t.weak && t.opaque === etag)) {
    const detail = etag.startsWith('W/')
      ? 'If-Match names no tag this weak ETag matches: If-Match compares strongly (RFC 9110 §13.1.1).'
      : 'If-Match does not match the current ETag; fetch the element again.';
    throw new ApiError('preconditionFailed', detail, { headers: { ETag: etag } });
  }
  const ifNoneMatch = parseTags(headers['if-none-match']);
  if (ifNoneMatch && (ifNoneMatch.any || ifNoneMatch.tags.some((t) => t.opaque === opaqueOf(etag)))) {
    if (method === 'GET' || method === 'HEAD') return 'notModified';
    throw new ApiError('preconditionFailed', 'If-None-Match matches the current ETag.', { headers: { ETag: etag } });
  }
  return 'proceed';
}

/** An entity tag without its weakness indicator: what the weak comparison compares. */
const opaqueOf = (etag: string) => (etag.startsWith('W/') ? etag.slice(2) : etag);

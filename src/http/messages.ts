// Request and response plumbing shared by every handler: reading a JSON body within the size
// limit, and writing JSON, problem and empty responses. It knows HTTP, never the database.
import type { IncomingMessage, ServerResponse } from 'node:http';
import contentType from 'content-type';
import Negotiator from 'negotiator';
import getRawBody from 'raw-body';
import { ApiError, type FieldError, MAX_REPORTED_ERRORS, type ProblemResponse, unlistedErrors } from '../errors.js';
import { etagOf } from '../request/conditions.js';
import { checkJsonDocument, checkJsonText, MAX_JSON_DEPTH } from '../request/validation.js';
import { sendContinue } from './connection.js';
import { bodyBudgetOf, overBudget } from './load.js';

/** Stops raw-body (it gives up on a stream error) when the bodies in flight hold the whole budget. */
const OVER_BUDGET = new Error('the bodies in flight hold the whole budget');

/** The 413 of a body refused before it was read whole (sendProblem closes the connection after it: the rest is not read). */
const unreadTooLarge = (bound: number) => new ApiError('payloadTooLarge', `The request body is larger than ${bound} bytes.`);

/** Decodes bodies; `fatal` refuses bytes that are not UTF-8 instead of turning them into U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads the whole body as a string, refusing it (413) as soon as it passes `limit` bytes, and (400)
 * when it is not UTF-8: a replacement character would silently alter what the client sent.
 */
async function readText(req: IncomingMessage, limit: number): Promise<string> {
  let bytes: Buffer;
  // Each chunk is counted against the bodies-in-flight budget as it arrives; past it the read stops.
  const budget = bodyBudgetOf(req);
  const count = (chunk: Buffer) => budget?.take(chunk.length) || req.emit('error', OVER_BUDGET);
  if (budget) req.on('data', count); // attached in the same tick as raw-body's listener: no chunk is missed
  sendContinue(req);
  try {
    bytes = await getRawBody(req, { limit });
  } catch (error) {
    if (error === OVER_BUDGET) throw overBudget();
    const type = (error as { type?: string }).type;
    if (type === 'entity.too.large') throw unreadTooLarge(limit);
    if (type === 'request.aborted') throw new ApiError('badRequest', 'The request body was cut off.', { cause: error });
    throw new ApiError('badRequest', 'The request body could not be read.', { cause: error });
  } finally {
    req.off('data', count);
    budget?.release(); // read (or refused): its bytes are no longer a body being read
  }
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new ApiError('badRequest', 'The request body is not valid UTF-8.', { problemCode: 'bad-json' });
  }
}

/** The header that tells a client which media types a method accepts. @see https://www.rfc-editor.org/rfc/rfc5789#section-3.1 */
const ADVERTISE: Record<string, string> = { POST: 'Accept-Post', PATCH: 'Accept-Patch' };

/** Parses a Content-Type header; undefined when it is missing or malformed. */
function mediaTypeOf(req: IncomingMessage): { type: string; charset?: string } | undefined {
  const header = req.headers['content-type'];
  if (!header) return undefined;
  try {
    // RFC 9110 §5.6.6 allows empty parameters (`application/json;`), which the parser refuses: dropped
    // first (unless a quoted value is there, which could hold a `;`).
    const parsed = contentType.parse(header.includes('"') ? header : header.replace(/;[ \t]*(?=;|$)/g, ''));
    return { type: parsed.type, charset: parsed.parameters.charset };
  } catch {
    return undefined;
  }
}

/**
 * Refuses a request whose Content-Type is not one of `accepted` (UTF-8, if it names a charset), with the
 * header that lists those (Accept-Post, Accept-Patch). A batch operation's Content-Type is held to it too.
 * @throws 415 @see https://www.rfc-editor.org/rfc/rfc9110#section-15.5.16
 */
export function checkMediaType(req: IncomingMessage, accepted: readonly string[]): void {
  const media = mediaTypeOf(req);
  if (!media || !accepted.includes(media.type) || (media.charset && media.charset.toLowerCase() !== 'utf-8')) {
    throw new ApiError('unsupportedMediaType', `The request body must be ${accepted.join(' or ')} (UTF-8).`, {
      headers: ADVERTISE[req.method ?? ''] ? { [ADVERTISE[req.method ?? ''] as string]: accepted.join(', ') } : {},
    });
  }
}

/**
 * Reads a JSON request body whose media type is one of `accepted`, checked by checkJsonDocument
 * before anything walks it (bounded nesting, well-formed Unicode).
 * `arrayLimit`: the larger bound of a JSON array (a bulk create); any other document stays within `limit`.
 * `levels`: the nesting allowed; `envelope`: the document only carries bodies that are checked one by one
 * later (a batch's operations), so only its nesting is bounded here, not its text.
 * @throws 415 for another or no media type, 413 past `limit`, 400 for malformed or too deeply nested
 *   JSON, 422 for lone surrogates
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.5.16
 */
export async function readJson(
  req: IncomingMessage,
  limit: number,
  accepted: readonly string[],
  { arrayLimit = limit, levels = MAX_JSON_DEPTH, envelope = false }: { arrayLimit?: number; levels?: number; envelope?: boolean } = {},
): Promise<unknown> {
  checkMediaType(req, accepted);
  const coding = req.headers['content-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
    // Bodies are read as sent; a compressed one would be parsed as garbage. @see RFC 9110 §15.5.16
    throw new ApiError('unsupportedMediaType', `The request body must not be encoded (Content-Encoding: ${coding.slice(0, 40)}).`, {
      headers: { 'Accept-Encoding': 'identity' },
    });
  }
  const most = Math.max(limit, arrayLimit);
  if (Number(req.headers['content-length']) > most) throw unreadTooLarge(most);
  const text = await readText(req, most);
  const beyondLimit = () => most > limit && Buffer.byteLength(text) > limit;
  if (text.trim() === '') {
    if (beyondLimit()) throw readButTooLarge(limit, arrayLimit);
    throw new ApiError('badRequest', 'The request body is empty; a JSON document is required.', { problemCode: 'bad-json' });
  }
  checkJsonText(text, levels);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new ApiError('badRequest', `The request body is not valid JSON: ${(error as Error).message}`, { problemCode: 'bad-json' });
  }
  if (beyondLimit()) checkBodySize(document, Buffer.byteLength(text), limit, arrayLimit);
  if (!envelope) checkJsonDocument(document, levels);
  return document;
}

/** The 413 of a body read whole (a keep-alive connection is fine after it) that only an array could be. */
const readButTooLarge = (limit: number, arrayLimit: number) =>
  new ApiError('payloadTooLarge', `The request body is larger than ${limit} bytes (a JSON array of elements may have ${arrayLimit}).`);

/**
 * The 413s of a parsed body of `bytes`: past `arrayLimit` (or `limit`, where no array is taken) always,
 * past `limit` unless it is an array, and an array whose element is past `limit` (checkElementSizes).
 * A batch operation's body is held to them as the same request's alone (src/api/compile.ts).
 */
export function checkBodySize(document: unknown, bytes: number, limit: number, arrayLimit = limit): void {
  const most = Math.max(limit, arrayLimit);
  if (bytes > most) throw unreadTooLarge(most);
  if (bytes <= limit) return;
  if (!Array.isArray(document)) throw readButTooLarge(limit, arrayLimit);
  checkElementSizes(document, limit);
}

/**
 * Each element of a bulk array within `limit` bytes as compact JSON, the most one element may be
 * alone: an element created in bulk can be sent back whole with PUT. A 413 naming the elements past it.
 */
export function checkElementSizes(elements: unknown[], limit: number): void {
  const errors: FieldError[] = [];
  elements.forEach((element, i) => {
    if (Buffer.byteLength(JSON.stringify(element)) > limit) errors.push({ path: String(i), message: `is larger than ${limit} bytes` });
  });
  if (errors.length === 0) return;
  const listed = errors.slice(0, MAX_REPORTED_ERRORS);
  throw new ApiError(
    'payloadTooLarge',
    `An element of the array is larger than ${limit} bytes, the most one element may be, alone or in an array.${unlistedErrors(listed.length, errors.length)}`,
    { errors: listed },
  );
}

/** A complete JSON response, ready to send or to store for an idempotent replay. */
export interface JsonResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}): JsonResponse {
  return { status, headers, body: JSON.stringify(value) };
}

/** A JSON response for one element, with the strong ETag of exactly these bytes (added to `headers`, which it keeps). */
export function elementResponse(status: number, row: unknown, headers: Record<string, string> = {}): JsonResponse {
  const body = JSON.stringify(row);
  headers.ETag = etagOf(body);
  return { status, headers, body };
}

/** The Content-Type of each media type the service writes, built once. */
const CONTENT_TYPES = new Map<string, string>();
const contentTypeOf = (type: string): string => {
  let value = CONTENT_TYPES.get(type);
  if (value === undefined) {
    value = `${type}; charset=utf-8`;
    CONTENT_TYPES.set(type, value);
  }
  return value;
};

/**
 * Writes a whole body with its media type and an exact Content-Length (so HEAD answers carry it too).
 * The headers go to writeHead as one flat list (no merged copies); `extra` adds to (or overrides) `headers`.
 */
function writeBody(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  headers: Record<string, string>,
  extra?: Record<string, string>,
): void {
  const list: (string | number)[] = [];
  for (const name in headers) if (extra?.[name] === undefined) list.push(name, headers[name] as string);
  if (extra) for (const name in extra) list.push(name, extra[name] as string);
  list.push('Content-Type', contentTypeOf(type), 'Content-Length', Buffer.byteLength(body));
  res.writeHead(status, list as string[]);
  res.end(body);
}

/** Sends a JSON response. */
export function send(res: ServerResponse, { status, headers, body }: JsonResponse, extra?: Record<string, string>): void {
  writeBody(res, status, 'application/json', body, headers, extra);
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  writeBody(res, status, 'application/json', JSON.stringify(value), headers);
}

/** Sends a text body (HTML, JavaScript) with its media type. */
export function sendText(res: ServerResponse, type: string, body: string, headers: Record<string, string> = {}): void {
  writeBody(res, 200, type, body, headers);
}

/**
 * Whether the request's Accept header allows an answer of `type` (no header allows anything).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-12.5.1
 */
export function accepts(req: IncomingMessage, type: string): boolean {
  const accept = req.headers.accept;
  if (accept === undefined || accept === '*/*' || accept === type) return true; // the common cases, without parsing
  // A client sends the same Accept on every request (axios: `application/json, text/plain, */*`): parsed once.
  const known = accept.length <= MAX_REMEMBERED_ACCEPT ? ACCEPTED.get(type)?.get(accept) : undefined;
  if (known !== undefined) return known;
  const answer = new Negotiator(req).mediaType([type, `${type}; charset=utf-8`]) !== undefined;
  if (accept.length <= MAX_REMEMBERED_ACCEPT) {
    let byAccept = ACCEPTED.get(type);
    if (byAccept === undefined) {
      byAccept = new Map();
      ACCEPTED.set(type, byAccept);
    }
    if (byAccept.size >= MAX_REMEMBERED_ACCEPTS) byAccept.clear(); // bounded: many distinct values start over
    byAccept.set(accept, answer);
  }
  return answer;
}

/** accepts()'s answers by media type, then Accept value; at most MAX_REMEMBERED_ACCEPTS values of at most MAX_REMEMBERED_ACCEPT characters each. */
const ACCEPTED = new Map<string, Map<string, boolean>>();
const MAX_REMEMBERED_ACCEPTS = 256;
const MAX_REMEMBERED_ACCEPT = 256;

/** Sends a response without a body (204, or 405/OPTIONS answers). */
export function sendEmpty(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  res.writeHead(status, headers);
  res.end();
}

/**
 * Sends an RFC 9457 problem as application/problem+json. A refusal sent before the request's body
 * arrived whole (a 401, a 404, a 415… decided on the headers) closes the connection, lingering
 * (IdentifiedResponse.writeHead): the rest of the body is not read (and a client that waited for
 * `100 Continue` need not send it).
 */
export function sendProblem(res: ServerResponse, problem: ProblemResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  writeBody(res, problem.status, 'application/problem+json', JSON.stringify(problem.body), problem.headers);
}

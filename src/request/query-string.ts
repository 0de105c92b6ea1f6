// Reads the whole query string of every request in one place (polka's `parse`), so that each
// parameter the client sent is kept or the request refused with a 400; none is silently dropped.
import type { IncomingMessage } from 'node:http';
import { ApiError, badQuery, type FieldError } from '../errors.js';

/** Parameters by decoded name: one value, or all of them in order when the name repeats. */
export type QueryParameters = Record<string, string | string[]>;

/**
 * Bounds of a query string. 8 KiB, not counting the `cursor` (a next-page link replaces it with a
 * short one), keeps a `Link` far below the 16 KiB of response headers common clients read;
 * 200 parameters is more than any list needs.
 */
export const QUERY_STRING_LIMITS = { maxBytes: 8192, maxParameters: 200 } as const;

/** The parameter a next-page link replaces rather than repeats, so it does not count toward maxBytes. */
const REPLACED = 'cursor';

/** What polka's router reads from a request URL (the shape of @polka/url's ParsedURL). */
export interface ParsedUrl {
  pathname: string;
  /** The query string as sent, with its `?` (empty when there is none). */
  search: string;
  query: QueryParameters;
  hash: string | undefined;
  raw: string;
}

const QUERY_ERROR = Symbol('query string error');

/** Characters a URI's query may not hold (RFC 3986 §3.4; `[` and `]` only delimit an IP literal host) that a request target can still carry raw. */
const NOT_URI = /[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]/g;

/**
 * Decodes one name or value as application/x-www-form-urlencoded does (`+` is a space), or
 * undefined when its percent-encoding is malformed (`%ZZ`, a lone `%`) or not UTF-8 (which is
 * also how an encoded lone surrogate arrives): such text has no meaning to honour.
 */
function decode(text: string): string | undefined {
  const spaced = text.includes('+') ? text.replaceAll('+', ' ') : text;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return undefined;
  }
}

function splitPair(pair: string): [string, string] {
  const at = pair.indexOf('=');
  return at === -1 ? [pair, ''] : [pair.slice(0, at), pair.slice(at + 1)];
}

/**
 * Parses a query string (without its `?`) into every parameter it holds, repeated names kept in
 * order. Empty pairs (`a=1&&b=2`) hold no parameter; an empty name (`=1`) is one, named "".
 * @throws {ApiError} 400 when it passes QUERY_STRING_LIMITS or a name or value cannot be decoded
 * (the request line itself is bounded by node:http's 16 KiB of headers: a 431 beyond)
 */
export function parseQueryString(text: string): QueryParameters {
  const query: QueryParameters = Object.create(null);
  if (text === '') return query;
  const pairs = text.split('&').filter((pair) => pair !== '');
  if (pairs.length > QUERY_STRING_LIMITS.maxParameters) {
    throw new ApiError(
      'badRequest',
      `The query string has ${pairs.length} parameters; at most ${QUERY_STRING_LIMITS.maxParameters} are accepted.`,
      { problemCode: 'bad-query' },
    );
  }
  const errors: FieldError[] = [];
  let bytes = -1;
  for (const pair of pairs) {
    const [rawName, rawValue] = splitPair(pair);
    const name = decode(rawName);
    const value = decode(rawValue);
    // Counted as a next-page link will carry it: a character a URI may not hold takes 3 bytes there.
    if (name !== REPLACED) bytes += pair.length + 1 + 2 * (pair.match(NOT_URI)?.length ?? 0);
    if (name === undefined || value === undefined) {
      errors.push({ path: name ?? rawName, message: 'is not valid percent-encoded UTF-8' });
      continue;
    }
    const previous = query[name];
    query[name] = previous === undefined ? value : [previous, value].flat();
  }
  if (bytes > QUERY_STRING_LIMITS.maxBytes) {
    throw new ApiError(
      'badRequest',
      `The query string is ${bytes} bytes long percent-encoded (not counting a cursor); at most ${QUERY_STRING_LIMITS.maxBytes} bytes are accepted.`,
      { problemCode: 'bad-query' },
    );
  }
  if (errors.length > 0) throw badQuery(errors);
  return query;
}

/**
 * polka's `parse`: the path and the whole query string of a request. It must not throw (polka
 * calls it outside its error handling), so a query string that cannot be read is recorded on the
 * (empty) query and thrown by `queryErrorOf`'s caller, which every routed endpoint runs.
 */
export function parseRequestUrl(req: IncomingMessage & { _parsedUrl?: ParsedUrl }): ParsedUrl {
  const raw = req.url ?? '/';
  const previous = req._parsedUrl;
  if (previous && previous.raw === raw) return previous;
  const queryAt = raw.indexOf('?', 1);
  const hashAt = raw.indexOf('#');
  const pathEnd = Math.min(queryAt === -1 ? raw.length : queryAt, hashAt === -1 ? raw.length : hashAt);
  const search = queryAt === -1 ? '' : raw.slice(queryAt);
  let query: QueryParameters;
  try {
    // A fragment is never sent; a raw `#` would make what follows it vanish from the query.
    if (hashAt !== -1) throw new ApiError('badRequest', 'The request target holds a raw "#"; percent-encode it as %23.');
    query = parseQueryString(search.slice(1));
  } catch (error) {
    query = Object.create(null);
    Object.defineProperty(query, QUERY_ERROR, { value: error });
  }
  const parsed = { pathname: raw.slice(0, pathEnd) || '/', search, query, hash: undefined, raw };
  req._parsedUrl = parsed;
  return parsed;
}

/** The name of a query's first parameter, or undefined when it has none (no array of names is built). */
export function firstParameter(query: object): string | undefined {
  for (const name in query) return name;
  return undefined;
}

/** The 400 recorded when the request's query string could not be read, if any. */
export function queryErrorOf(query: object): unknown {
  return (query as { [QUERY_ERROR]?: unknown })[QUERY_ERROR];
}

/**
 * The query string `search` (as sent, `?` included) with every `name` parameter replaced by
 * `name=value` (`value` must be URI-safe): the client's own bytes are kept, not re-encoded; only
 * characters a URI may not hold are percent-encoded, so that the result fits in a Link header.
 */
export function withParameter(search: string, name: string, value: string): string {
  const kept = search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '' && decode(splitPair(pair)[0]) !== name);
  kept.push(`${name}=${value}`);
  const percentEncode = (c: string) => [...Buffer.from(c)].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  return kept.join('&').replace(NOT_URI, percentEncode);
}

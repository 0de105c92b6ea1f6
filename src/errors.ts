// The typed error every layer throws, and its single mapping to an HTTP status and RFC 9457 body.
// Nothing else decides an error status; anything that is not an ApiError becomes a generic 500.
import { STATUS_CODES } from 'node:http';
import type { ProblemCode } from './problem-codes.js';

/** Why a request failed, independent of HTTP; STATUS below is the one mapping to a status code. */
export type ErrorCode =
  | 'badRequest'
  | 'unauthorized'
  | 'forbidden'
  | 'notFound'
  | 'methodNotAllowed'
  | 'notAcceptable'
  | 'conflict'
  | 'gone'
  | 'preconditionFailed'
  | 'payloadTooLarge'
  | 'unsupportedMediaType'
  | 'unprocessable'
  | 'expectationFailed'
  | 'tooManyRequests'
  | 'unavailable'
  | 'notImplemented'
  | 'httpVersionNotSupported'
  | 'internal';

const STATUS: Record<ErrorCode, number> = {
  badRequest: 400,
  unauthorized: 401,
  forbidden: 403,
  notFound: 404,
  methodNotAllowed: 405,
  notAcceptable: 406,
  conflict: 409,
  gone: 410,
  preconditionFailed: 412,
  payloadTooLarge: 413,
  unsupportedMediaType: 415,
  unprocessable: 422,
  expectationFailed: 417,
  tooManyRequests: 429,
  notImplemented: 501,
  unavailable: 503,
  httpVersionNotSupported: 505,
  internal: 500,
};

/** The problem code of each ErrorCode where a site names no other (src/problem-codes.ts). */
const DEFAULT_CODE: Record<ErrorCode, ProblemCode> = {
  badRequest: 'bad-request',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden',
  notFound: 'not-found',
  methodNotAllowed: 'method-not-allowed',
  notAcceptable: 'not-acceptable',
  conflict: 'unique-taken',
  gone: 'changes-gone',
  preconditionFailed: 'precondition-failed',
  payloadTooLarge: 'payload-too-large',
  unsupportedMediaType: 'unsupported-media-type',
  unprocessable: 'validation',
  expectationFailed: 'expectation-failed',
  tooManyRequests: 'rate-limited',
  notImplemented: 'not-implemented',
  unavailable: 'unavailable',
  httpVersionNotSupported: 'http-version-not-supported',
  internal: 'internal',
};

/** The longest piece of a client's text (a key, a path) echoed back in an error. */
export const MAX_ECHOED_LENGTH = 64;

/** String.prototype.isWellFormed and toWellFormed (ES2024, in Node 20; not yet in the ES2022 typings). */
type WellFormed = { isWellFormed(): boolean; toWellFormed(): string };

/**
 * A client's text made safe to echo in an error: at most MAX_ECHOED_LENGTH characters (code points, so
 * a 1 MB key is not sent back and no character is cut in two), lone surrogates replaced by U+FFFD.
 */
export function echo(text: string): string {
  const short = (text.length > MAX_ECHOED_LENGTH ? cut(text) : text) as string & WellFormed;
  return short.isWellFormed() ? short : short.toWellFormed();
}

/**
 * The first MAX_ECHOED_LENGTH code points of `text` and `…`, or `text` when it has no more; never
 * ending inside a percent-escape (`%F0%9`) of a path or query as sent.
 */
function cut(text: string): string {
  let end = 0;
  for (let count = 0; count < MAX_ECHOED_LENGTH && end < text.length; count++) {
    const unit = text.charCodeAt(end);
    const low = text.charCodeAt(end + 1);
    end += unit >= 0xd800 && unit <= 0xdbff && low >= 0xdc00 && low <= 0xdfff ? 2 : 1;
  }
  if (end >= text.length) return text;
  const head = text.slice(0, end);
  return `${head.slice(0, head.length - (PARTIAL_ESCAPE.exec(head)?.[0].length ?? 0))}…`;
}

/** A percent-escape cut short at the end of a text: `%` or `%F`. */
const PARTIAL_ESCAPE = /%[0-9A-Fa-f]?$/;

/** The 404 of a path that no route serves. */
export function nothingServedAt(path: string): ApiError {
  return new ApiError('notFound', `Nothing is served at ${echo(path)}.`, { problemCode: 'no-route' });
}

/** Field errors listed in one problem at most; its detail says how many more there were. */
export const MAX_REPORTED_ERRORS = 50;

/** What a problem's detail adds when only `listed` of `total` field errors are listed ('' when all are). */
export function unlistedErrors(listed: number, total: number): string {
  return total > listed ? ` The first ${listed} of ${total} errors are listed; ${total - listed} more are not.` : '';
}

/**
 * The error of one element of a bulk request (docs/bulk-and-batch.md): the same status and detail, each
 * `errors[].path` prefixed by the element's index (`3/email`; `3` alone when it named no field).
 * Only a client's refusal (409, 422) is about the element; any other error is returned as it is. It keeps
 * the element's problem code.
 */
export function atElement(index: number, error: unknown): unknown {
  if (!(error instanceof ApiError) || (error.code !== 'conflict' && error.code !== 'unprocessable')) return error;
  const errors = error.errors?.length ? error.errors : [{ path: '', message: error.message }];
  return new ApiError(error.code, `Element ${index}: ${error.message}`, {
    errors: errors.map(({ path, message }) => ({ path: path === '' ? String(index) : `${index}/${path}`, message })),
    headers: error.headers,
    problemCode: error.problemCode,
    cause: error,
  });
}

/** One failed field of a request body or query: where, and what is wrong with it. */
export interface FieldError {
  path: string;
  message: string;
}

export interface ApiErrorOptions {
  errors?: FieldError[];
  headers?: Record<string, string>;
  /** The problem's `code`, where its ErrorCode's default does not name the class of failure. */
  problemCode?: ProblemCode;
  cause?: unknown;
}

/**
 * The 400 for a query string with these errors (at least one): the first is named in the detail. Its code
 * is `bad-cursor` when the cursor alone is refused (start again without it), else `bad-query`.
 */
export function badQuery(errors: FieldError[]): ApiError {
  const first = errors[0] as FieldError;
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  const problemCode = errors.every((e) => e.path === 'cursor') ? 'bad-cursor' : 'bad-query';
  return new ApiError('badRequest', `Query parameter "${first.path}" ${first.message}${more}.`, { errors, problemCode });
}

/** An expected failure: its message is safe to show to clients and becomes the problem's `detail`. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly code: ErrorCode;
  /** The problem body's `code`: the class of failure a client may act on. */
  readonly problemCode: ProblemCode;
  readonly errors?: FieldError[];
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: ApiErrorOptions = {}) {
    // An answer to the client, not a fault: no stack is captured (capturing one cost more than the
    // rest of a 404). A cause keeps its own stack for the log.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, { cause: options.cause });
    Error.stackTraceLimit = limit;
    this.code = code;
    this.problemCode = options.problemCode ?? DEFAULT_CODE[code];
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }
}

/** An RFC 9457 problem details object. @see https://www.rfc-editor.org/rfc/rfc9457#section-3 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ProblemCode;
  errors?: FieldError[];
}

export interface ProblemResponse {
  status: number;
  headers: Record<string, string>;
  body: Problem;
  /** True when the error was not expected: the caller must log it with its cause. */
  unexpected: boolean;
}

/** RFC 9110's reason phrases where Node still gives older ones: with type about:blank, a problem's title is the phrase (RFC 9457 §4.2.1). */
const TITLES: Readonly<Record<number, string>> = { ...STATUS_CODES, 413: 'Content Too Large', 422: 'Unprocessable Content' };

/** Turns anything thrown while handling a request into the response that describes it. */
export function toProblem(error: unknown, instance: string): ProblemResponse {
  const known = error instanceof ApiError;
  const status = known ? STATUS[error.code] : 500;
  const body: Problem = {
    type: 'about:blank',
    title: TITLES[status] ?? 'Error',
    status,
    detail: known ? error.message : 'The server failed to handle this request; the failure has been logged.',
    // The request path is client text: a 16 KB path is not sent back whole.
    instance: echo(instance),
    code: known ? error.problemCode : 'internal',
  };
  if (known && error.errors) {
    // Validators bound their own lists; this bound holds for any error, so no problem body is ever unbounded.
    body.errors = error.errors.slice(0, MAX_REPORTED_ERRORS);
    body.detail += unlistedErrors(body.errors.length, error.errors.length);
  }
  return { status, headers: known ? error.headers : {}, body, unexpected: !known };
}

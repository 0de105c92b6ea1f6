// HTTP/1.x message rules checked before anything else (RFC 9112, RFC 9110): the protocol version,
// Host, the request-target's form, Content-Type, Transfer-Encoding and Expect. It rewrites a target to origin form and says what is wrong; no I/O.
import type { IncomingMessage } from 'node:http';
import { ApiError } from '../errors.js';

/** The versions served: HTTP/1.1, and HTTP/1.0 (same major version; RFC 9110 §2.5). */
const SERVED_VERSIONS = new Set(['1.1', '1.0']);
/** `http://authority/path?query` or `https://…`: the absolute form of a request-target. */
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)([^#]*)$/i;

/** A Host value: an RFC 3986 authority (reg-name, IPv4 or [IPv6], optional port), nothing else. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(:\d*)?$/;

/** A request whose target was `*` (OPTIONS * asks about the server as a whole), or of no form served. */
export type Target = IncomingMessage & { asteriskForm?: boolean; invalidTarget?: string; originalUrl?: string };

/**
 * Rewrites the request-target to origin form before routing, so that every request passes every
 * guard: an absolute-form target names this server, so its path and query are what is routed
 * (RFC 9112 §3.2.2); `*` and any other form become `/`, flagged for `protocolError` to answer.
 */
export function normalizeTarget(req: Target): void {
  const url = req.url ?? '';
  if (url.startsWith('/')) return;
  req.originalUrl = url;
  const absolute = ABSOLUTE_FORM.exec(url);
  if (absolute) {
    // The authority replaces Host (RFC 9112 §3.2.2): a host as Host takes one, and not empty (RFC 9110 §4.2.1).
    const host = (absolute[1] ?? '').slice((absolute[1] ?? '').lastIndexOf('@') + 1);
    if (host === '' || host.startsWith(':') || !HOST.test(host)) {
      req.invalidTarget = "The request-target's authority is not a valid host[:port].";
      req.url = '/';
      return;
    }
    req.url = absolute[2]?.startsWith('/') ? absolute[2] : `/${absolute[2] ?? ''}`;
    return;
  }
  if (url === '*') req.asteriskForm = true;
  else req.invalidTarget = 'The request-target must be a path (origin form), an http(s) URL, or * for OPTIONS.';
  req.url = '/';
}

/** How many Host and Content-Type fields the request has as sent (Node folds duplicates of some), in one pass. */
function occurrences(req: IncomingMessage): { hosts: number; contentTypes: number } {
  let hosts = 0;
  let contentTypes = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const field = raw[i] as string;
    if (field.length === 4 && field.toLowerCase() === 'host') hosts++;
    else if (field.length === 12 && field.toLowerCase() === 'content-type') contentTypes++;
  }
  return { hosts, contentTypes };
}

/**
 * What makes this request unservable as HTTP/1.x, checked before routing; undefined when nothing.
 * @see https://www.rfc-editor.org/rfc/rfc9112#section-3.2 (Host), §2.3 (version); RFC 9110 §10.1.1 (Expect)
 */
export function protocolError(req: Target): ApiError | undefined {
  if (!SERVED_VERSIONS.has(req.httpVersion)) {
    return new ApiError('httpVersionNotSupported', `HTTP/${req.httpVersion} is not served; use HTTP/1.1 (or HTTP/1.0).`, {
      headers: { Connection: 'close' },
    });
  }
  const { hosts, contentTypes } = occurrences(req);
  if (hosts > 1 || (hosts === 0 && req.httpVersion === '1.1')) {
    return new ApiError('badRequest', `An HTTP/1.1 request needs exactly one Host header; this one has ${hosts}.`, {
      headers: { Connection: 'close' },
    });
  }
  if (hosts === 1 && !HOST.test(req.headers.host ?? '')) {
    return new ApiError('badRequest', 'The Host header is not a valid host[:port].', { headers: { Connection: 'close' } });
  }
  if (contentTypes > 1) return new ApiError('badRequest', 'The request has more than one Content-Type header.');
  if (req.invalidTarget) return new ApiError('badRequest', req.invalidTarget);
  if (req.asteriskForm && req.method !== 'OPTIONS') {
    return new ApiError('badRequest', `The request-target * is only for OPTIONS, not ${req.method}.`);
  }
  const coding = req.headers['transfer-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'chunked') {
    // Node would read the body as if only chunked were applied. @see RFC 9112 §6.1
    return new ApiError('notImplemented', 'The only transfer coding this service reads is chunked.', { headers: { Connection: 'close' } });
  }
  const expect = req.headers.expect;
  if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') {
    return new ApiError('expectationFailed', 'The only expectation this service meets is Expect: 100-continue.');
  }
  return undefined;
}

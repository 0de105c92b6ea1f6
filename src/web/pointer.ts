// Pages for people that a terminal asks for too (/docs, /docs/changes): the HTML for a browser, a few
// lines of text/plain saying where to go for anyone else. Knows no page; each passes its own text.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import Negotiator from 'negotiator';
import { ApiError } from '../errors.js';
import { sendText } from '../http/messages.js';

/**
 * The two answers of a page: a browser names text/html; anything else (curl's *\/*, text/plain, none) gets the
 * text. Each also as it is sent, with its charset: Negotiator matches a type only with the parameters asked for.
 */
const PAGE_TYPES = ['text/plain', 'text/plain; charset=utf-8', 'text/html', 'text/html; charset=utf-8'];

/** Host header values fit to be repeated in a URL (a name or an IP literal, with a port); any other is left out. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

/** This service's absolute URL as the request reached it, or '' (paths stay relative) when its Host cannot be trusted to read as one. */
export function originOf(req: IncomingMessage): string {
  const host = req.headers.host;
  if (host === undefined || !HOST.test(host)) return '';
  return `${(req.socket as TLSSocket).encrypted ? 'https' : 'http'}://${host}`;
}

/**
 * A page for people that a terminal may ask for too: a browser (its Accept names text/html) gets the
 * HTML; curl (`*\/*`) and text/plain get `text`, a few lines saying where to go instead; an Accept
 * that rules out both is a 406 pointing at /openapi.json. Both vary by Accept (RFC 9110 §12.5.5).
 * Neither has an entity tag, as the page had none before: a conditional request gets the whole answer.
 */
export function pageOrPointer(
  html: string,
  headers: Record<string, string>,
  text: (origin: string) => string,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    // Set first, so that the 406 carries it too; a Vary set before (CORS: Origin) is kept.
    const held = res.getHeader('vary');
    res.setHeader('Vary', held === undefined ? 'Accept' : `${held}, Accept`);
    const type = new Negotiator(req).mediaType(PAGE_TYPES);
    const origin = originOf(req);
    if (type === undefined) {
      throw new ApiError('notAcceptable', `This page answers text/html or text/plain; the API's description is at ${origin}/openapi.json.`);
    }
    if (type.startsWith('text/html')) return sendText(res, 'text/html', html, headers);
    sendText(res, 'text/plain', text(origin));
  };
}

// The node:http server around the app: timeouts that bound slow clients, and requests Node itself
// would answer or drop (malformed, timed out, CONNECT) given a problem body, a request id and a log line.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { IdentifiedResponse, requestIdOf, SECURITY_HEADER_LINES } from './guards.js';

const KEEP_ALIVE_TIMEOUT_MS = 5000;
/** How long a refused client gets to read its answer before the socket is destroyed anyway. */
const LINGER_MS = 1000;

/** Where a refusal is logged: one warn line, as the request log would write it (no headers, no body). */
type RefusalLog = Pick<Logger, 'warn'> | undefined;

/**
 * Lets a socket whose side the server has ended close in stages (RFC 9112 §9.6): what the client
 * still sends is read and dropped until it closes its side, or for LINGER_MS, and only then is the
 * socket destroyed. Destroying at once would reset the connection while the client's unread bytes
 * are pending, and the client might never see the answer it was sent.
 */
function linger(socket: Duplex): void {
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Makes the close that follows the current response (`Connection: close`) a lingering one: for an
 * answer sent before the request's body was read (a 413), whose client is still uploading.
 */
export function lingerAfterResponse(socket: Socket): void {
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    linger(this);
  };
}

/**
 * Writes a problem answer on a raw socket and closes it for good, lingering (see linger). A request
 * pipelined before the refused bytes and still being answered is answered first: its answer is
 * written whole, then the refusal (or nothing more, when that answer closed the connection). A
 * socket whose current response has started otherwise is only destroyed: bytes written now would
 * corrupt that response.
 */
function refuse(log: RefusalLog, socket: Duplex, refusal: Refusal, givenId?: unknown): void {
  const current = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
  if (current && !current.writableFinished && current.req?.complete) {
    // Read whole and still being answered: the bytes refused came after it.
    current.once('close', () => setImmediate(() => refuse(log, socket, refusal, givenId)));
    return;
  }
  // A request cut off or malformed while its answer is already being written: only closing is left.
  if (!socket.writable || current?.headersSent) return void socket.destroy();
  const [status, title, detail, headerLines = ''] = refusal;
  const requestId = requestIdOf(givenId);
  const body = JSON.stringify({ type: 'about:blank', title, status, detail, instance: '' });
  linger(socket);
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\nX-Request-Id: ${requestId}\r\n${headerLines}${SECURITY_HEADER_LINES}\r\n${body}`,
  );
  log?.warn({ requestId, res: { status } }, `refused before routing: ${status} ${title}`);
}

/** The status, title and detail of an answer written on the raw socket, and its own header lines (each ending in CRLF). */
type Refusal = [number, string, string, string?];

/** The status, title and detail of a request Node's parser refused. */
const PARSE_FAILURES: Record<string, Refusal> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'The request was not received in time.'],
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'The request headers are larger than the server reads.'],
  HPE_INVALID_VERSION: [505, 'HTTP Version Not Supported', 'This service serves HTTP/1.1 (and HTTP/1.0).'],
  // The HTTP/2 connection preface (PRI * HTTP/2.0) sent in clear text.
  HPE_PAUSED_H2_UPGRADE: [505, 'HTTP Version Not Supported', 'This service serves HTTP/1.1 (and HTTP/1.0).'],
};

const UNREADABLE: Refusal = [400, 'Bad Request', 'The request could not be read as HTTP/1.1.'];
/**
 * CONNECT asks for a tunnel; this service is an origin server, not a proxy. Its target (a host and
 * port) is no resource here: the Allow every 405 carries is empty, which says it allows no method
 * (RFC 9110 §10.2.1).
 */
const TUNNEL: Refusal = [405, 'Method Not Allowed', 'CONNECT is not served: this is an origin server, not a proxy.', 'Allow: \r\n'];

/**
 * Creates (does not start) the HTTP server with the configured header and request timeouts;
 * answers refused on the raw socket are logged to `log` when it is given.
 */
export function createHttpServer(
  listener: RequestListener,
  config: Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs'>,
  log?: RefusalLog,
): Server {
  const server = createServer(
    {
      // Every response carries its request id and the security headers (see guards.ts).
      ServerResponse: IdentifiedResponse,
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
      // The app checks Host itself and answers a missing one with a problem body (Node's 400 is bare).
      requireHostHeader: false,
    },
    listener,
  );
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) =>
    refuse(log, socket, PARSE_FAILURES[error.code ?? ''] ?? UNREADABLE),
  );
  server.on('connect', (req: IncomingMessage, socket: Duplex) => refuse(log, socket, TUNNEL, req.headers['x-request-id']));
  // An Expect other than 100-continue goes to the app like any request; its guards answer 417.
  server.on('checkExpectation', listener);
  return server;
}

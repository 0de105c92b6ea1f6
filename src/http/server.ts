// The node:http server around the app: timeouts that bound slow clients, and requests Node itself
// would answer or drop (malformed, timed out, CONNECT) given a problem body, a request id and a log line.
import { type IncomingMessage, type RequestListener, Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { ProblemCode } from '../problem-codes.js';
import { announcesBody, continueWhenRead, inConnectionOrder, isClosing, linger, markClosing, queuedOn } from './connection.js';
import { IdentifiedResponse, requestIdOf, SECURITY_HEADER_LINES } from './guards.js';

const KEEP_ALIVE_TIMEOUT_MS = 5000;
/** Where a refusal is logged: one warn line, as the request log would write it (no headers, no body). */
type RefusalLog = Pick<Logger, 'warn'> | undefined;

/**
 * Writes a problem answer on a raw socket and closes it for good, lingering (see linger). A request
 * pipelined before the refused bytes and still being answered is answered first: its answer is
 * written whole, then the refusal (or nothing more, when that answer closed the connection). A
 * socket whose current response has started otherwise is only destroyed: bytes written now would
 * corrupt that response.
 */
function refuse(log: RefusalLog, socket: Duplex, refusal: Refusal, givenId?: unknown): void {
  // After an answer that closes the connection, what the client sent is neither run nor answered (RFC 9112
  // §9.6; Node's parser reports those bytes as an error): that answer's own close ends the connection. A
  // connection already gone (reset with requests still queued, which never get their turn) takes nothing.
  if (isClosing(socket) || socket.destroyed) return;
  const current = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
  const answering = current && !current.writableFinished;
  if ((answering && current.req?.complete) || queuedOn(socket) > 0) {
    // Requests read whole before the bytes refused are answered first, in order (pipelining): the refusal
    // waits for the answer in progress, then for each one queued behind it. Node reports every further
    // chunk as another error: one refusal waits, once.
    if (waiting.has(socket)) return;
    waiting.add(socket);
    const again = () =>
      setImmediate(() => {
        waiting.delete(socket);
        refuse(log, socket, refusal, givenId);
      });
    if (answering) current.once('close', again);
    else again();
    return;
  }
  // A request cut off or malformed while its answer is already being written: only closing is left. (An
  // answer written whole, to a request before this one on the connection, is no such answer.)
  if (!socket.writable || (current?.headersSent && !current.writableFinished)) return void socket.destroy();
  const [status, title, detail, code, headerLines = ''] = refusal;
  const requestId = requestIdOf(givenId);
  const body = JSON.stringify({ type: 'about:blank', title, status, detail, instance: '', code });
  linger(socket);
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      // Date: an origin server with a clock sends it on every 4xx (RFC 9110 §6.6.1), as Node does on its own answers.
      `Date: ${new Date().toUTCString()}\r\nConnection: close\r\nX-Request-Id: ${requestId}\r\n${headerLines}${SECURITY_HEADER_LINES}\r\n${body}`,
  );
  log?.warn({ requestId, res: { status } }, `refused before routing: ${status} ${title}`);
}

/** What Node's closeIdleConnections reads as an answer under way (one it does not close). */
const UNDER_WAY = { finished: false } as unknown as ServerResponse;

/** Sockets whose refusal waits for the answer in progress on them. */
const waiting = new WeakSet<Duplex>();

/** The status, title, detail and problem code of an answer written on the raw socket, and its own header lines (each ending in CRLF). */
type Refusal = [number, string, string, ProblemCode, string?];

/** The answer to a request of a version not served. */
const VERSION_NOT_SERVED: Refusal = [
  505,
  'HTTP Version Not Supported',
  'This service serves HTTP/1.1 (and HTTP/1.0).',
  'http-version-not-supported',
];

/** The status, title and detail of a request Node's parser refused. */
const PARSE_FAILURES: Record<string, Refusal> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'The request was not received in time.', 'request-timeout'],
  HPE_HEADER_OVERFLOW: [
    431,
    'Request Header Fields Too Large',
    'The request headers are larger than the server reads.',
    'headers-too-large',
  ],
  // The HTTP/2 connection preface (PRI * HTTP/2.0) sent in clear text.
  HPE_PAUSED_H2_UPGRADE: VERSION_NOT_SERVED,
};

const UNREADABLE: Refusal = [400, 'Bad Request', 'The request could not be read as HTTP/1.1.', 'bad-request'];

/** A well-formed request line (RFC 9112 §3: method SP target SP `HTTP/` DIGIT `.` DIGIT CRLF): one of a version not served. */
const OTHER_VERSION = /^[^ \r\n]+ [^ \r\n]+ HTTP\/\d\.\d\r\n/;

/**
 * What the parser's refusal answers: its own entry, or for a version it could not read, a 505 only when the
 * request line is well-formed and names another version (HTTP/3.0); a malformed line (a bare LF, a trailing
 * space, HTTP/1.10) is a 400.
 */
function refusalOf(error: NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number }): Refusal {
  if (error.code === 'HPE_INVALID_VERSION') {
    // The packet may hold requests before the failing one (pipelined): its line is the one the parser stopped in.
    const packet = error.rawPacket?.toString('latin1') ?? '';
    const line = packet.slice(packet.lastIndexOf('\n', (error.bytesParsed ?? 0) - 1) + 1);
    return OTHER_VERSION.test(line) ? VERSION_NOT_SERVED : UNREADABLE;
  }
  return PARSE_FAILURES[error.code ?? ''] ?? UNREADABLE;
}
/**
 * CONNECT asks for a tunnel; this service is an origin server, not a proxy. Its target (a host and
 * port) is no resource here: the Allow every 405 carries is empty, which says it allows no method
 * (RFC 9110 §10.2.1).
 */
const TUNNEL: Refusal = [
  405,
  'Method Not Allowed',
  'CONNECT is not served: this is an origin server, not a proxy.',
  'method-not-allowed',
  'Allow: \r\n',
];

/** A socket of the server, with the answer Node is writing on it. */
type Connection = Duplex & { _httpMessage?: ServerResponse | null };

/**
 * Node's closeIdleConnections (close() runs it too) destroys a connection whose answer has ended even while
 * that answer's bytes still wait in the socket for a slow reader: cut off mid-body. Such a connection is
 * spared (Node skips one whose answer it sees under way) and ended once its answer is written; what was
 * pipelined behind that answer is not served, the connection closing. Node judges every other one (one a
 * request is arriving on stays: that request is served). A subclass rather than a method set on the
 * instance, which made every request's reads of the server's settings slower (~5 % of a GET).
 */
class GracefulServer extends Server {
  private readonly sockets = new Set<Connection>();

  constructor(options: ServerOptions, listener: RequestListener) {
    super(options, listener);
    this.on('connection', (socket: Connection) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  override closeIdleConnections(): void {
    const writing = [...this.sockets].filter(({ _httpMessage: answer }) => answer?.writableEnded && !answer.writableFinished);
    const answers = writing.map((socket) => socket._httpMessage as ServerResponse);
    for (const socket of writing) socket._httpMessage = UNDER_WAY;
    try {
      super.closeIdleConnections();
    } finally {
      writing.forEach((socket, i) => {
        const answer = answers[i] as ServerResponse;
        socket._httpMessage = answer;
        markClosing(socket);
        answer.once('finish', () => socket.end());
      });
    }
  }
}

/**
 * Creates (does not start) the HTTP server with the configured header and request timeouts;
 * answers refused on the raw socket are logged to `log` when it is given.
 */
export function createHttpServer(
  listener: RequestListener,
  config: Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs'>,
  log?: RefusalLog,
): Server {
  const serve = inConnectionOrder(listener);
  const server = new GracefulServer(
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
    serve,
  );
  // A client that half-closes its connection once its request is sent (RFC 9112 §9.6 lets it) still gets the
  // answer: by default Node ends the connection at the client's FIN, dropping an answer that waits for the
  // database (a POST on PostgreSQL was committed and never answered). Node ends it after the last answer.
  (server as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Every header field reaches the guards, not only the first 2000 (Node's default drops the rest unseen: a
  // second Host, an Expect or a Content-Length past them would go unchecked). The header size bound still
  // bounds how many there can be.
  server.maxHeadersCount = 0;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => refuse(log, socket, refusalOf(error)));
  server.on('connect', (req: IncomingMessage, socket: Duplex) => refuse(log, socket, TUNNEL, req.headers['x-request-id']));
  // Expect: 100-continue: the 100 goes out when the body is read, so a request refused on its headers
  // (401, 404, 415…) gets its final answer instead, and the client never sends the body.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    // A request that announces no body has none to wait for (RFC 9110 §10.1.1): served as any other, its
    // connection kept (Node closes one whose client expected a 100 it was not sent).
    if (announcesBody(req)) continueWhenRead(req, res);
    else (res as ServerResponse & { _expect_continue: boolean })._expect_continue = false;
    serve(req, res);
  });
  // An Expect other than 100-continue goes to the app like any request; its guards answer 417.
  server.on('checkExpectation', serve);
  return server;
}

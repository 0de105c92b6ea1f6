// The node:http server around the app: timeouts that bound slow clients, and malformed requests
// (rejected by the HTTP parser before routing) answered with a problem body instead of silence.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from './config.js';

const KEEP_ALIVE_TIMEOUT_MS = 5000;

function rejectClient(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) return void socket.destroy();
  const [status, title] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large']
        : [400, 'Bad Request'];
  const body = JSON.stringify({ type: 'about:blank', title, status, detail: 'The request could not be read as HTTP/1.1.', instance: '' });
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n${body}`,
  );
}

/** Creates (does not start) the HTTP server with the configured header and request timeouts. */
export function createHttpServer(listener: RequestListener, config: Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs'>): Server {
  const server = createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
    },
    listener,
  );
  server.on('clientError', rejectClient);
  return server;
}

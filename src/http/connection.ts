// How a connection carries its requests: one after another (RFC 9112 §9.3.2), none after an answer that
// closes it, a close in stages (§9.6), and `100 Continue` only once the body is read.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** How long a refused client gets to read its answer before the socket is destroyed anyway. */
const LINGER_MS = 1000;

/**
 * Lets a socket whose side the server has ended close in stages (RFC 9112 §9.6): what the client
 * still sends is read and dropped until it closes its side, or for LINGER_MS, and only then is the
 * socket destroyed. Destroying at once would reset the connection while the client's unread bytes
 * are pending, and the client might never see the answer it was sent.
 */
export function linger(socket: Duplex): void {
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

/** Whether a request announced a body (chunks, or a length above zero). */
export const announcesBody = (req: IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length']) > 0;

/** Connections an answer has said it closes: what arrives on them after it is not served (RFC 9112 §9.6). */
const closing = new WeakSet<Duplex>();

/** Notes that the answer being written on `socket` closes it. */
export function markClosing(socket: Duplex | null): void {
  if (socket) closing.add(socket);
}

/** Whether an answer on `socket` has said it closes the connection (nothing after it is answered). */
export const isClosing = (socket: Duplex): boolean => closing.has(socket);

/**
 * The server's request listener around `serve`: a request pipelined behind one whose answer is still
 * being written waits until that answer is done (Node hands it its socket then), so that requests on a
 * connection run in the order they came, writes included (RFC 9112 §9.3.2); one that comes after an
 * answer that closes the connection is not served at all (its body is read and dropped).
 */
export function inConnectionOrder(serve: RequestListener): RequestListener {
  const start = (req: IncomingMessage, res: ServerResponse) => {
    if (closing.has(req.socket)) return void req.resume();
    serve(req, res);
  };
  return (req, res) => {
    if (res.socket !== null) return start(req, res);
    const socket = req.socket;
    // One packet can hold a thousand small requests, all parsed before reading stops: past MAX_QUEUED waiting,
    // the client is not waiting for its answers, and the connection is dropped (its memory bounded).
    if (queuedOn(socket) >= MAX_QUEUED) return void socket.destroy();
    queued.set(socket, queuedOn(socket) + 1);
    // Counted as output waiting to be written, Node's own flood guard stops reading the connection while
    // requests wait (a request that waits writes nothing, so a client that pipelines without reading its
    // answers would otherwise be read without bound) and reads on once they have been served.
    const pending = (res as PendingOutput)._onPendingData;
    pending?.(QUEUED_REQUEST_BYTES);
    res.once('socket', () => {
      queued.set(socket, queuedOn(socket) - 1);
      pending?.(-QUEUED_REQUEST_BYTES);
      start(req, res);
    });
  };
}

/** The most requests one connection may have waiting for their turn. */
const MAX_QUEUED = 256;

/**
 * What a request waiting for its turn counts for against the connection's output bound (the socket's
 * writableHighWaterMark, 16 KiB): past 16 waiting requests (and the rest of the packet being parsed), Node
 * reads no more from the connection until they have been answered.
 */
const QUEUED_REQUEST_BYTES = 1024;

/** Node's report of a response's buffered output to its connection (it pauses reading past the bound, resumes below it). */
type PendingOutput = ServerResponse & { _onPendingData?: (delta: number) => void };

/** Requests pipelined behind an answer in progress, not yet given the connection, per connection. */
const queued = new WeakMap<Duplex, number>();

/** How many requests on `socket` wait for the answer in progress before theirs (a refusal of what follows them waits too). */
export const queuedOn = (socket: Duplex): number => queued.get(socket) ?? 0;

/** The responses whose request asked to be told to send its body (`Expect: 100-continue`), by request. */
const awaitingContinue = new WeakMap<IncomingMessage, ServerResponse>();

/** Notes that `req` waits for `100 Continue` before it sends its body (Node then sends none by itself). */
export function continueWhenRead(req: IncomingMessage, res: ServerResponse): void {
  awaitingContinue.set(req, res);
}

/** Tells a client that waits for it to send the body, now that the body is to be read: once, and only if it waits. */
export function sendContinue(req: IncomingMessage): void {
  const res = awaitingContinue.get(req);
  if (res === undefined) return;
  awaitingContinue.delete(req);
  res.writeContinue();
}

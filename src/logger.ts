// The service's pino logger and its per-request log line: JSON lines on stdout at
// the configured level, human-readable on a terminal. Nothing else configures logging.
import { writeSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

/** Request lines are handed to the destination once this many characters are queued, or LOG_FLUSH_MS after the first. */
const LOG_BATCH_CHARS = 32768;
const LOG_FLUSH_MS = 100;

/**
 * JSON lines, or pino-pretty's colourful lines when stdout is a terminal (a person is reading).
 * JSON lines go through pino's asynchronous destination (sonic-boom), so logging never blocks a
 * request on stdout (a synchronous write per request line cost ~27% of throughput). pino flushes
 * what it holds synchronously when the process exits, whether by a graceful stop, process.exit or
 * a crash. Request lines are batched before that (see lineQueue).
 */
export function createLogger(config: Pick<Config, 'logLevel'>, pretty = Boolean(process.stdout.isTTY)): Logger {
  const options = { level: config.logLevel, base: { service: 'restable' } };
  if (pretty) return pino({ ...options, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } });
  return pino(options, pino.destination({ dest: 1, sync: false }));
}

/** 5xx answers that report the client's request or the load, not a fault: not implemented (501), unavailable (503), HTTP version (505). */
const CLIENT_CAUSED = new Set([501, 503, 505]);

/** The level of a finished request's line: 5xx errors, 4xx and CLIENT_CAUSED warnings, else info. */
function levelOf(status: number): 'error' | 'warn' | 'info' {
  if (status >= 500 && !CLIENT_CAUSED.has(status)) return 'error';
  return status >= 400 ? 'warn' : 'info';
}

/** Queues with request lines not yet handed to their destination, by their exit flush (see lineQueue). */
const PENDING = new Set<() => void>();
process.on('exit', () => {
  for (const flushAtExit of PENDING) flushAtExit();
});

/**
 * Request lines handed to the destination in batches of ~32 KiB, or 100 ms after the first line of
 * a batch, whichever comes first (and at exit): a line costs a string concatenation, and the
 * destination gets a few writes a second instead of one per line (each sonic-boom write measures
 * the buffer it appends to: ~2 µs a line at 30,000 lines/s, ~15% of a GET). A SIGKILL loses at most
 * the last 100 ms of request lines; lines of pino's own (start-up, errors) are not batched.
 */
function lineQueue(stream: SyncStream): (line: string) => void {
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const take = () => {
    PENDING.delete(flushAtExit);
    clearTimeout(timer);
    timer = undefined;
    const chunk = pending;
    pending = '';
    return chunk;
  };
  const flush = () => {
    const chunk = take();
    if (chunk !== '') stream.write(chunk);
  };
  /** At exit nothing asynchronous completes: what the destination holds, then these lines, written synchronously. */
  const flushAtExit = () => {
    const chunk = take();
    try {
      stream.flushSync();
      if (chunk !== '') writeSync(stream.fd, chunk);
    } catch {
      // stdout is gone (a closed pipe): nothing can be written any more
    }
  };
  return (line) => {
    pending += line;
    if (pending.length >= LOG_BATCH_CHARS) flush();
    else if (timer === undefined) {
      PENDING.add(flushAtExit);
      timer = setTimeout(flush, LOG_FLUSH_MS).unref();
    }
  };
}

/** A response whose line is pending: when it started (IdentifiedResponse declares the field). */
type Logged = ServerResponse & { startedAt: number };

/** pino's own destination (sonic-boom): a byte stream with a file descriptor that can be flushed synchronously. */
type SyncStream = Destination['stream'] & { flushSync: () => void; fd: number };

/** What a pino logger writes to, and its bindings as the JSON members it appends to every line. */
interface Destination {
  stream: { write: (line: string) => unknown };
  bindings: string;
}

/** The destination of a logger that writes JSON lines itself (a pino-pretty transport reads them too). */
function destinationOf(logger: Logger): Destination | undefined {
  const { streamSym, chindingsSym } = pino.symbols;
  const stream = (logger as unknown as Record<symbol, unknown>)[streamSym] as Destination['stream'] | undefined;
  const bindings = (logger as unknown as Record<symbol, unknown>)[chindingsSym];
  return typeof stream?.write === 'function' && typeof bindings === 'string' ? { stream, bindings } : undefined;
}

/**
 * One line per finished request: request id, method, path, status and duration (ms). Headers are
 * never logged, so tokens cannot leak. Costs nothing beyond a 'finish' listener when the line's
 * level is off (no child logger per request: that alone cost ~9% of GET throughput).
 *
 * The line is the one pino would write (same members, same order, the logger's bindings), put
 * together here and handed to pino's own destination: pino's generic serialization of the nested
 * `req`/`res` objects cost ~2.8 µs a line, ~10% of a GET's throughput; this costs a few string
 * concatenations. Only the path and the request id can hold characters JSON escapes.
 */
export function createRequestLogger(logger: Logger) {
  const destination = destinationOf(logger);
  // Only a byte stream (pino's sonic-boom destination) takes several lines in one write; any other stream gets one line a write.
  const stream = destination?.stream as Partial<SyncStream> & Destination['stream'];
  const queue =
    destination &&
    (typeof stream.flushSync === 'function' && typeof stream.fd === 'number'
      ? lineQueue(stream as SyncStream)
      : (line: string) => void stream.write(line));
  const write = (level: 'error' | 'warn' | 'info', req: IncomingMessage & { id?: string }, path: string, status: number, ms: number) => {
    if (!destination || !queue) {
      logger[level](
        { requestId: req.id, req: { method: req.method, path }, res: { status }, durationMs: ms },
        `${req.method} ${path} ${status}`,
      );
      return;
    }
    // A method is a token (no character JSON escapes); the path is escaped once and used twice.
    const quoted = JSON.stringify(path);
    queue(
      `{"level":${logger.levels.values[level]},"time":${Date.now()}${destination.bindings},"requestId":${JSON.stringify(req.id)},` +
        `"req":{"method":"${req.method}","path":${quoted}},"res":{"status":${status}},` +
        `"durationMs":${ms},"msg":"${req.method} ${quoted.slice(1, -1)} ${status}"}\n`,
    );
  };
  /** One listener for every response (no closure per request): the response knows its request and start. */
  function onFinish(this: Logged) {
    const status = this.statusCode;
    const level = levelOf(status);
    if (!logger.isLevelEnabled(level)) return;
    const req = this.req as IncomingMessage & { id?: string; originalUrl?: string };
    // The target as sent (an absolute-form URL or `*` is rewritten for routing before this runs).
    const target = req.originalUrl ?? req.url ?? '';
    const query = target.indexOf('?');
    write(level, req, query === -1 ? target : target.slice(0, query), status, Math.round((performance.now() - this.startedAt) * 100) / 100);
  }
  return (_req: IncomingMessage, res: ServerResponse) => {
    (res as Logged).startedAt = performance.now();
    res.on('finish', onFinish);
  };
}

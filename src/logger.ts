// The service's pino logger and its per-request log line: JSON lines on stdout at
// the configured level, human-readable on a terminal. Nothing else configures logging.
import { writeSync } from 'node:fs';
import { type IncomingMessage, METHODS, type ServerResponse } from 'node:http';
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';
import { IdentifiedResponse } from './http/guards.js';

/** Request lines wait at most this long before they are written (see LineBatch). */
const LOG_FLUSH_MS = 100;

/**
 * JSON lines, or pino-pretty's colourful lines when stdout is a terminal (a person is reading).
 * JSON lines go through pino's asynchronous destination (sonic-boom), so logging never blocks a
 * request on stdout (a synchronous write per request line cost ~27% of throughput). pino flushes
 * what it holds synchronously when the process exits, whether by a graceful stop, process.exit or
 * a crash. Request lines are batched before that (see LineBatch).
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

/** Batches with request lines not yet handed to their destination, by their exit flush (see LineBatch). */
const PENDING = new Set<() => void>();
process.on('exit', () => {
  for (const flushAtExit of PENDING) flushAtExit();
});

/**
 * Each HTTP method's name as a one-byte string of its own. The parser's method strings end up as V8
 * "thin" strings once something looks one up by name, and a thin string counts as two-byte: one in a
 * line made the whole batch two-byte, and every UTF-8 conversion of it slow.
 */
const METHOD_TEXT = new Map(METHODS.map((method) => [method, Buffer.from(method, 'latin1').toString('latin1')]));

/** Lines a batch holds before it is written: at ~210–240 bytes a line (the harness's log B/req), ~27–31 KB. */
const LINES_PER_BATCH = 128;

/**
 * The request lines of one destination, kept as their fields and turned into text a batch at a time:
 * written when LINES_PER_BATCH are waiting, LOG_FLUSH_MS after the first, or at exit. A request only
 * stores its fields in preallocated arrays (no string, no object); the lines are put together in one
 * loop at flush time, where that code runs hot: built one by one between requests, the same line cost
 * ~5–7 µs of a GET's ~45, formatted in a batch under 1 µs. The destination gets a few writes a second instead
 * of one per line. A SIGKILL loses at most the last 100 ms of request lines; pino's own lines (start-up,
 * errors) are not batched.
 */
class LineBatch {
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly levels = new Uint8Array(LINES_PER_BATCH);
  private readonly statuses = new Uint16Array(LINES_PER_BATCH);
  private readonly times = new Float64Array(LINES_PER_BATCH);
  private readonly durations = new Float64Array(LINES_PER_BATCH);
  private readonly ids: (string | undefined)[] = new Array(LINES_PER_BATCH).fill(undefined);
  private readonly methods: string[] = new Array(LINES_PER_BATCH).fill('');
  private readonly paths: string[] = new Array(LINES_PER_BATCH).fill('');
  private readonly flushAtExit = () => this.writeAtExit();

  constructor(
    private readonly stream: SyncStream,
    /** The logger's bindings as the JSON members that follow "time" on every line. */
    private readonly bindings: string,
  ) {}

  add(level: number, id: string | undefined, method: string, path: string, status: number, ms: number): void {
    const at = this.count++;
    this.levels[at] = level;
    this.times[at] = Date.now();
    this.ids[at] = id;
    this.methods[at] = method;
    this.paths[at] = path;
    this.statuses[at] = status;
    this.durations[at] = ms;
    if (this.count === LINES_PER_BATCH) this.flush();
    else if (this.timer === undefined) {
      PENDING.add(this.flushAtExit);
      this.timer = setTimeout(() => this.flush(), LOG_FLUSH_MS).unref();
    }
  }

  private flush(): void {
    const text = this.take();
    if (text !== '') this.stream.write(text);
  }

  /** At exit nothing asynchronous completes: what the destination holds, then these lines, written synchronously. */
  private writeAtExit(): void {
    const text = this.take();
    try {
      this.stream.flushSync();
      if (text !== '') writeSync(this.stream.fd, text);
    } catch {
      // stdout is gone (a closed pipe): nothing can be written any more
    }
  }

  /** The waiting lines as text (the members and order pino writes), and the batch emptied. */
  private take(): string {
    PENDING.delete(this.flushAtExit);
    clearTimeout(this.timer);
    this.timer = undefined;
    let text = '';
    for (let at = 0; at < this.count; at++) {
      // A method is a token (no character JSON escapes); the path is escaped once and used twice.
      const method = METHOD_TEXT.get(this.methods[at] as string) ?? (this.methods[at] as string);
      const path = JSON.stringify(this.paths[at]);
      const status = this.statuses[at];
      text +=
        `{"level":${this.levels[at]},"time":${this.times[at]}${this.bindings},"requestId":${JSON.stringify(this.ids[at])},` +
        `"req":{"method":"${method}","path":${path}},"res":{"status":${status}},` +
        `"durationMs":${this.durations[at]},"msg":"${method} ${path.slice(1, -1)} ${status}"}\n`;
    }
    this.count = 0;
    return text;
  }
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
 * never logged, so tokens cannot leak. Costs nothing beyond a hook run at 'finish' when the line's
 * level is off (no child logger per request: that alone cost ~9% of GET throughput).
 *
 * The line is the one pino would write (same members, same order, the logger's bindings), put
 * together by a LineBatch and handed to pino's own destination: pino's generic serialization of the
 * nested `req`/`res` objects cost ~2.8 µs a line, ~10% of a GET's throughput. Any other destination
 * (a test's stream, a transport) gets pino's own call.
 */
export function createRequestLogger(logger: Logger) {
  const destination = destinationOf(logger);
  // Only a byte stream (pino's sonic-boom destination) takes several lines in one write.
  const stream = destination?.stream as Partial<SyncStream> & Destination['stream'];
  const batch =
    destination && typeof stream.flushSync === 'function' && typeof stream.fd === 'number'
      ? new LineBatch(stream as SyncStream, destination.bindings)
      : undefined;
  /** One listener for every response (no closure per request): the response knows its request and start. */
  function onFinish(this: Logged) {
    const status = this.statusCode;
    const level = levelOf(status);
    if (!logger.isLevelEnabled(level)) return;
    const req = this.req as IncomingMessage & { id?: string; originalUrl?: string; path?: string };
    // The path as routed (set before any handler runs, which may rewrite req.url), without its query: an
    // absolute-form target (`http://user:password@host/path`) logs its path only, so no user info reaches
    // the log; the asterisk form logs `*`.
    let path = req.originalUrl === '*' ? '*' : req.path;
    if (path === undefined) {
      const target = req.url ?? '';
      const query = target.indexOf('?');
      path = query === -1 ? target : target.slice(0, query);
    }
    const ms = Math.round((performance.now() - this.startedAt) * 100) / 100;
    if (batch) batch.add(logger.levels.values[level] as number, req.id, req.method ?? '', path, status, ms);
    else
      logger[level](
        { requestId: req.id, req: { method: req.method, path }, res: { status }, durationMs: ms },
        `${req.method} ${path} ${status}`,
      );
  }
  return (_req: IncomingMessage, res: ServerResponse) => {
    (res as Logged).startedAt = performance.now();
    if (res instanceof IdentifiedResponse) res.whenFinished = onFinish;
    else res.on('finish', onFinish);
  };
}

// The open Server-Sent Events streams of GET /_changes in this process: one reader of the change log
// for all of them, each change serialized once, heartbeats, bounded buffers and a clean shutdown.
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ChangeEntry, ChangeLog } from '../engine/changes.js';
import { linger } from '../http/connection.js';

/** The headers of an event stream, the same on GET and HEAD. */
export const STREAM_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Accel-Buffering': 'no', // nginx: pass events on as they come
} as const;

/** A change as clients see it (docs/changes.md). */
export interface Change {
  seq: number;
  kind: string;
  id: unknown;
  op: string;
  at: string;
  element?: unknown;
}

export interface StreamOptions {
  heartbeatMs: number;
  maxStreams: number;
  /** Bytes a stream may hold unsent before it is closed. */
  bufferBytes: number;
  /** How often the log is read for changes committed by any process or instance. */
  pollMs: number;
}

interface Stream {
  res: ServerResponse;
  /** Only changes of these kinds, when set. */
  kinds?: ReadonlySet<string>;
  /** The seq after which the stream continues (the last one it was sent, or skipped by its filter). */
  position: number;
  /** The bytes its connection had handed to the network at the last heartbeat. */
  sentAtBeat: number;
  /** Heartbeats in a row at which bytes waited and none had left since the one before. */
  stalledBeats: number;
}

export interface ChangeStreams {
  /**
   * A seat for a stream about to open, or undefined when every seat is taken (CHANGES_MAX_STREAMS):
   * taken at once, so that requests waiting on the log meanwhile cannot all pass the bound. Release
   * it once the stream is open (or will not be).
   */
  reserve(): (() => void) | undefined;
  /** Starts an event stream on `res` (its headers not yet sent) with the changes after `position`; `newest` is the log's last seq now. */
  open(res: ServerResponse, position: number, newest: number, kinds: readonly string[] | undefined): void;
  /** Ends every stream (a graceful shutdown): clients reconnect, with Last-Event-ID, elsewhere or later. */
  closeAll(): void;
  /** How many streams are open. */
  size(): number;
}

/** A change as an event stream sends it, serialized once for every stream. */
interface Event {
  seq: number;
  kind: string;
  text: string;
}

/** Changes read from the log at a time (per stream when one catches up). */
const PAGE = 500;

/** Lets the event loop run (sockets write out) before the next page: on SQLite a whole backlog is read without one. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One Server-Sent Event per change: `id` its seq (what Last-Event-ID resumes from), `event` its op, `data` the change. */
const eventOf = (change: Change): Event => ({
  seq: change.seq,
  kind: change.kind,
  text: `id: ${change.seq}\nevent: ${change.op}\ndata: ${JSON.stringify(change)}\n\n`,
});

/**
 * Heartbeat intervals without a byte taken by the connection, while bytes wait, after which a stream is
 * closed (60 s at the default heartbeat): long enough for a slow reader's send buffer to drain by a
 * burst, short enough that a client that is gone does not hold its stream for long.
 */
const STALLED_INTERVALS = 6;

/**
 * The streams of one process. A single loop (never two at once) reads the changes after `head`
 * every pollMs (and when a stream opens), serializes each once and writes it to every stream that
 * wants it, an event at a time while the stream's unsent bytes stay under half of bufferBytes. A
 * stream that starts behind `head` (it resumes), or that fell behind so (its client reads slowly),
 * catches up from the log in pages, written the same way, as fast as its client reads them. A
 * stream whose client stops reading (its connection sends nothing for STALLED_INTERVALS heartbeat
 * intervals while bytes wait, or more than bufferBytes wait) is closed: its client resumes from the last event it
 * got, and the server holds nothing for it.
 */
export function createChangeStreams(
  log: ChangeLog,
  present: (entries: ChangeEntry[]) => Promise<Change[]>,
  options: StreamOptions,
  logger: Logger,
): ChangeStreams {
  const streams = new Set<Stream>();
  /** Seats taken by streams not open yet (see reserve). */
  let reserved = 0;
  /** The last seq the loop has read (undefined while no stream is open). */
  let head: number | undefined;
  let running = false;
  let again = false;
  /** Whether the last turn of the loop failed (the database unreachable): said once, until a turn works. */
  let failing = false;
  let poller: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  const drop = (stream: Stream) => {
    streams.delete(stream);
    if (streams.size > 0) return;
    clearInterval(poller);
    clearInterval(heartbeat);
    poller = heartbeat = undefined;
    head = undefined;
  };
  /** Closes a stream whose client is not reading (it resumes with Last-Event-ID); the server holds nothing for it. */
  const fellBehind = (stream: Stream) => {
    logger.warn({ unsent: stream.res.writableLength }, 'a change stream fell behind; closing it (the client resumes)');
    stream.res.destroy();
    drop(stream);
  };
  /**
   * Ends a stream whose next change was purged before it was sent: what was written still reaches a
   * client that reads it (within a second: a stalled one is not waited for), and its client reconnects
   * with Last-Event-ID and gets the 410.
   */
  const close = (stream: Stream) => {
    const { socket } = stream.res;
    stream.res.end();
    if (socket) linger(socket);
    drop(stream);
  };
  /** Writes to a stream, or closes it when its client has left more than the bound unread. */
  const write = (stream: Stream, text: string) => {
    if (stream.res.destroyed) return drop(stream);
    if (stream.res.writableLength > options.bufferBytes) return fellBehind(stream);
    stream.res.write(text);
  };
  /**
   * A comment line to every stream, which keeps proxies from closing idle ones. A stream whose
   * connection sent nothing for STALLED_INTERVALS heartbeat intervals in a row while bytes wait for it
   * has a client that stopped reading: it is closed. What "sent" can see is what the operating system
   * took: its send buffer (up to a few MB) fills with what a slow client has not read yet, and takes
   * more only once much of it has drained, so a slow reader shows progress in bursts.
   */
  const beat = () => {
    for (const stream of streams) {
      // What the connection has handed to the network: its bytesWritten also counts what it still buffers.
      const socket = stream.res.socket;
      const sent = socket ? socket.bytesWritten - socket.writableLength : 0;
      const stalled = stream.res.writableLength > 0 && sent === stream.sentAtBeat;
      stream.stalledBeats = stalled ? stream.stalledBeats + 1 : 0;
      if (stream.stalledBeats >= STALLED_INTERVALS) {
        fellBehind(stream);
        continue;
      }
      write(stream, ':\n\n');
      stream.sentAtBeat = sent;
    }
  };
  const wants = (stream: Stream, change: { seq: number; kind: string }) =>
    change.seq > stream.position && (!stream.kinds || stream.kinds.has(change.kind));
  /**
   * Writes the events a stream wants, in order, one at a time while its client keeps up (its unsent
   * bytes under half the bound): a page of large elements is never written whole past the bound. The
   * stream's position is the last event written or skipped; what is left it reads from the log later.
   */
  const sendWhileKeepingUp = (stream: Stream, events: Event[]) => {
    for (const event of events) {
      if (stream.res.writableLength > options.bufferBytes / 2 || !streams.has(stream)) break;
      if (wants(stream, event)) write(stream, event.text);
      stream.position = Math.max(stream.position, event.seq);
    }
  };

  /**
   * Sends a stream that is behind `upto` the changes it missed, read a page at a time and written an
   * event at a time while its client keeps up (its unsent bytes under half the bound); the rest waits
   * for the next turn of the loop. A stream whose next change was purged meanwhile is closed: its
   * client reconnects with Last-Event-ID and gets the 410.
   */
  const catchUp = async (stream: Stream, upto: number) => {
    while (stream.position < upto && streams.has(stream) && stream.res.writableLength <= options.bufferBytes / 2) {
      const entries = (await log.after(stream.position, PAGE, stream.kinds && [...stream.kinds])).filter((e) => e.seq <= upto);
      // Read after each page: while the oldest kept change still follows the position, the page missed nothing.
      if (stream.position < (await log.bounds()).floor) return close(stream);
      if (entries.length === 0) {
        stream.position = upto;
        break;
      }
      const changes = await present(entries);
      if (!streams.has(stream)) break;
      sendWhileKeepingUp(stream, changes.map(eventOf));
      await turn(); // the socket writes what it can before the next page is made
    }
  };

  const step = async () => {
    if (head === undefined) return;
    const from = head;
    for (const stream of streams) if (stream.position < from) await catchUp(stream, from);
    const entries = await log.after(from, PAGE);
    if (entries.length === 0) return;
    // Seqs have no gaps: a first one past `from + 1` means changes after `from` were purged before this read
    // (a retention shorter than a burst takes to send). A stream at a position before them would skip them.
    const first = (entries[0] as ChangeEntry).seq;
    if (first > from + 1) for (const stream of streams) if (stream.position >= from && stream.position < first - 1) close(stream);
    const changes = await present(entries);
    const events = changes.map(eventOf);
    const last = (entries.at(-1) as ChangeEntry).seq;
    for (const stream of streams) {
      // Still catching up: it reads these from the log later, at its pace (as one whose client reads slowly does).
      if (stream.position >= from) sendWhileKeepingUp(stream, events);
    }
    head = last;
    if (entries.length === PAGE) again = true;
  };
  const loop = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await step();
        await turn();
      } while (again && streams.size > 0);
      if (failing) logger.info('reading the change feed for its streams works again');
      failing = false;
    } catch (error) {
      // Once per outage, not every pollMs: the streams stay open and the next turns try again.
      if (!failing) logger.warn({ err: error }, 'reading the change feed for its streams failed; trying again every poll until it works');
      failing = true;
    } finally {
      running = false;
    }
  };

  return {
    reserve() {
      if (streams.size + reserved >= options.maxStreams) return undefined;
      reserved++;
      let held = true;
      return () => {
        if (held) reserved--;
        held = false;
      };
    },
    size: () => streams.size,
    open(res, position, newest, kinds) {
      const stream: Stream = { res, position, sentAtBeat: -1, stalledBeats: 0, ...(kinds && { kinds: new Set(kinds) }) };
      res.writeHead(200, STREAM_HEADERS);
      // The headers now, and how soon to reconnect: a client waits for neither the first change nor a heartbeat.
      res.write(`retry: 1000\n: changes after ${position}\n\n`);
      streams.add(stream);
      res.on('close', () => drop(stream));
      // A client that closes its side has left (an EventSource never half-closes while it listens): the
      // server accepts half-closed connections so that an answer still reaches its client, not streams.
      res.socket?.once('end', () => res.destroy());
      // From the log's end, never the stream's own position: one that starts behind catches up at its
      // client's pace, one that starts past the end only filters (and silences no other stream).
      head ??= newest;
      poller ??= setInterval(loop, options.pollMs).unref();
      heartbeat ??= setInterval(beat, options.heartbeatMs).unref();
      void loop();
    },
    closeAll() {
      for (const stream of streams) {
        stream.res.end();
        drop(stream);
      }
    },
  };
}

// GET /_changes (docs/changes.md): a page of the change log as JSON, or an endless Server-Sent Events
// stream of it; and GET /_changes/ticket, which lets a browser's EventSource authenticate.
import Negotiator from 'negotiator';
import type { Logger } from 'pino';
import type { Tickets } from '../auth/tickets.js';
import type { Config } from '../config.js';
import type { ChangeEntry, ChangeLog } from '../engine/changes.js';
import type { Store } from '../engine/store.js';
import { ApiError } from '../errors.js';
import { leaveInFlight } from '../http/load.js';
import { sendJson } from '../http/messages.js';
import { READ_METHODS, type Resource, wholeNumbersUpTo } from '../model/registry.js';
import { LIMIT, parseLimit } from '../request/list-query.js';
import type { QueryParameters } from '../request/query-string.js';
import { type Change, type ChangeStreams, createChangeStreams, STREAM_HEADERS } from './change-stream.js';
import type { Endpoint, Request, Response } from './compile.js';

export const CHANGES_PATH = '/_changes';
export const TICKET_PATH = '/_changes/ticket';
/** How often each process reads the log for its open streams (a change reaches them within this, plus the read). */
export const POLL_MS = 100;
const PARAMETERS = ['since', 'limit', 'kinds', 'ticket'];
const EVENT_STREAM = 'text/event-stream';
const CHARSET = 'charset=utf-8';

interface ChangesQuery {
  since?: number;
  /** As sent: a page holds LIMIT.default without it; an event stream refuses it. */
  limit?: number;
  kinds?: string[];
  ticket?: string;
}

const invalid = (path: string, message: string) =>
  new ApiError('badRequest', `Query parameter "${path}" ${message}.`, { errors: [{ path, message }], problemCode: 'bad-query' });

/** A seq as a client writes it: a canonical whole number from 0 to 2^53 - 1 (any a JSON number carries exactly). */
export const SEQ_PATTERN = wholeNumbersUpTo(Number.MAX_SAFE_INTEGER);
const SEQ = new RegExp(SEQ_PATTERN);

/** A seq as a client sends it (`since`, or the Last-Event-ID header). */
function seqOf(text: string, name: 'since' | 'Last-Event-ID'): number {
  // Any seq a JSON number carries exactly: one past the newest change is an empty page (or a quiet stream).
  if (SEQ.test(text) && Number.isSafeInteger(Number(text))) return Number(text);
  const message = `must be a change seq (a whole number from 0 to ${Number.MAX_SAFE_INTEGER}, without leading zeros)`;
  if (name === 'since') throw invalid(name, message);
  throw new ApiError('badRequest', `The Last-Event-ID header ${message}.`, { errors: [{ path: name, message }] });
}

/** The query of GET /_changes; anything else it carries is a 400. */
function parseQuery(query: QueryParameters, kinds: ReadonlyMap<string, Resource>): ChangesQuery {
  const values: Record<string, string> = {};
  for (const name in query) {
    const value = query[name];
    if (!PARAMETERS.includes(name)) throw invalid(name, 'is not a query parameter of /_changes (since, limit, kinds, ticket)');
    if (typeof value !== 'string') throw invalid(name, 'is given more than once');
    values[name] = value;
  }
  const parsed: ChangesQuery = {};
  if (values.since !== undefined) parsed.since = seqOf(values.since, 'since');
  // As a list's limit: canonical (`7`, not `07`), within the same bounds.
  if (values.limit !== undefined) parsed.limit = parseLimit(values.limit);
  if (values.kinds !== undefined) {
    const names = values.kinds.split(',');
    const unknown = names.find((name) => !kinds.has(name));
    if (unknown !== undefined) throw invalid('kinds', `names ${JSON.stringify(unknown)}, which is not a kind whose changes are recorded`);
    // As fields= and sort= refuse a name given twice (a client's mistake, not a wish).
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice !== undefined) throw invalid('kinds', `names ${JSON.stringify(twice)} twice`);
    parsed.kinds = names;
  }
  if (values.ticket !== undefined) parsed.ticket = values.ticket;
  return parsed;
}

/** Whether the client asks for the event stream (else JSON; neither: 406). */
function wantsStream(req: Request): boolean {
  const accept = req.headers.accept;
  if (accept === undefined) return false;
  // Each type also as it is sent, with its charset (a client may ask for either form).
  const type = new Negotiator(req).mediaType([
    'application/json',
    `application/json; ${CHARSET}`,
    EVENT_STREAM,
    `${EVENT_STREAM}; ${CHARSET}`,
  ]);
  if (type === undefined)
    throw new ApiError('notAcceptable', `/_changes answers application/json or ${EVENT_STREAM}; Accept rules out both.`);
  return type.startsWith(EVENT_STREAM);
}

/** The 503 of a stream asked for once the service is stopping. */
const shuttingDown = () =>
  new ApiError('unavailable', 'The service is shutting down; reconnect shortly.', {
    headers: { 'Retry-After': '1' },
    problemCode: 'not-ready',
  });

const gone = (since: number, floor: number) =>
  new ApiError(
    'gone',
    `Changes after ${since} are no longer kept (the oldest kept follows ${floor}); read the data afresh, then follow the feed from its end.`,
  );

export interface ChangesOptions {
  store: Store;
  log: ChangeLog;
  resources: Resource[];
  tickets: Tickets;
  config: Config;
  logger: Logger;
  /** Whether the process is stopping (new streams are refused). */
  stopping: () => boolean;
}

/** The endpoints of the feed, and its streams (closed at shutdown). */
export function changesEndpoints({ store, log, resources, tickets, config, logger, stopping }: ChangesOptions): {
  endpoints: (Endpoint & { summary: string; produces: string })[];
  streams: ChangeStreams;
  /** Whether a request authenticates with a ticket, which the feed itself checks (the guards let it through). */
  ticketed: (req: { method?: string; path?: string; query?: unknown }) => boolean;
} {
  const kinds = new Map(resources.filter((r) => !r.readOnlyKind && r.key.length > 0).map((r) => [r.name, r]));
  /** The changes as clients see them: each with its element's current representation, read once per kind for the whole page. */
  const present = async (entries: ChangeEntry[]): Promise<Change[]> => {
    const current = new Map<string, Map<string, unknown>>();
    for (const [name, resource] of kinds) {
      const wanted = entries.filter((e) => e.kind === name);
      if (wanted.length === 0) continue;
      const kind = store.of(resource);
      // The stored key is the representation's (a BLOB as base64): read back through the path form, as a request's id is.
      const ids = wanted.map((e) => resource.parseId(e.key.map((v) => encodeURIComponent(String(v))).join(',')));
      const plain = resource.key.length === 1 && resource.key[0]?.column.getSQLType().toLowerCase() !== 'blob';
      const rows = plain
        ? await kind.withKeys([...new Set(ids.filter((id) => id !== undefined))])
        : (await Promise.all(ids.map((id) => (id === undefined ? undefined : kind.get(id))))).filter((row) => row !== undefined);
      current.set(name, new Map(rows.map((row) => [JSON.stringify(resource.keyValues(resource.idOf(row))), row])));
    }
    return entries.map(({ seq, kind, key, op, at }) => {
      const element = current.get(kind)?.get(JSON.stringify(key));
      const change: Change = { seq, kind, id: key.length === 1 ? key[0] : key, op, at };
      if (element !== undefined) change.element = element;
      return change;
    });
  };
  const streams = createChangeStreams(
    log,
    present,
    {
      heartbeatMs: config.changesHeartbeatMs,
      maxStreams: config.changesMaxStreams,
      bufferBytes: config.changesStreamBufferBytes,
      pollMs: POLL_MS,
    },
    logger,
  );

  const page = async (res: Response, query: ChangesQuery) => {
    const { limit = LIMIT.default } = query;
    let since = query.since ?? (await log.bounds()).floor;
    let entries = await log.after(since, limit + 1, query.kinds);
    // Read after the page: when the oldest kept change still follows `since`, the page missed nothing.
    for (let { floor } = await log.bounds(); since < floor; { floor } = await log.bounds()) {
      if (query.since !== undefined) throw gone(since, floor);
      // No since given (from the oldest kept): a purge moved the oldest on while the page was read. Read again from
      // there: the client asked for no position that could be gone.
      since = floor;
      entries = await log.after(since, limit + 1, query.kinds);
    }
    const shown = entries.slice(0, limit);
    const headers: Record<string, string> = {};
    const last = shown.at(-1);
    if (entries.length > limit && last) {
      const kindsPart = query.kinds ? `&kinds=${query.kinds.map(encodeURIComponent).join(',')}` : '';
      headers.Link = `<${CHANGES_PATH}?since=${last.seq}&limit=${limit}${kindsPart}>; rel="next"`;
    }
    sendJson(res, 200, await present(shown), headers);
  };

  const stream = async (req: Request, res: Response, query: ChangesQuery) => {
    if (stopping()) throw shuttingDown();
    const release = streams.reserve();
    if (!release) {
      throw new ApiError('unavailable', `This process already serves ${config.changesMaxStreams} change streams; try again shortly.`, {
        headers: { 'Retry-After': '5' },
        problemCode: 'overloaded',
      });
    }
    try {
      const resumeFrom = req.headers['last-event-id'];
      const { floor, newest } = await log.bounds();
      // A stop that began meanwhile has closed the streams already: this one would outlive it.
      if (stopping()) throw shuttingDown();
      const position =
        typeof resumeFrom === 'string' && resumeFrom.trim() !== '' ? seqOf(resumeFrom.trim(), 'Last-Event-ID') : (query.since ?? newest);
      if (position < floor) throw gone(position, floor);
      if (req.method === 'HEAD') {
        res.writeHead(200, STREAM_HEADERS);
        res.end();
        return;
      }
      leaveInFlight(res); // bounded by CHANGES_MAX_STREAMS instead: a stream never ends on its own
      streams.open(res, position, newest, query.kinds);
    } finally {
      release();
    }
  };

  const feed = (req: Request, res: Response) => {
    // Every answer depends on Accept (a page, a stream, a 406, and their refusals): caches must key on it
    // (RFC 9110 §12.5.5). A Vary set before (CORS: Origin) is kept.
    const held = res.getHeader('vary');
    res.setHeader('Vary', held === undefined ? 'Accept' : `${held}, Accept`);
    const query = parseQuery(req.query, kinds);
    if (query.ticket !== undefined && !tickets.valid(query.ticket)) {
      // Without authentication a ticket opens nothing: a bad one is a bad parameter, never a 401 (docs/http-api.md#errors).
      if (!config.authToken) throw invalid('ticket', 'is not valid or has expired; get a new one from GET /_changes/ticket');
      throw new ApiError('unauthorized', 'The ticket is not valid or has expired; get a new one from GET /_changes/ticket.', {
        headers: { 'WWW-Authenticate': 'Bearer realm="restable", error="invalid_token"' },
      });
    }
    if (!wantsStream(req)) return page(res, query);
    // A stream has no pages: a limit would be ignored, so it is refused.
    if (query.limit !== undefined) throw invalid('limit', 'applies to JSON pages only; an event stream sends every change');
    return stream(req, res, query);
  };

  return {
    streams,
    ticketed: (req) =>
      (req.method === 'GET' || req.method === 'HEAD') &&
      (req.path === CHANGES_PATH || req.path === `${CHANGES_PATH}/`) &&
      // Given twice too: the feed refuses that with the 400 of any parameter given twice, before it reads a ticket.
      (req.query as QueryParameters | undefined)?.ticket !== undefined,
    endpoints: [
      {
        path: CHANGES_PATH,
        methods: READ_METHODS,
        handlers: { GET: feed },
        // The handler negotiates: JSON or an event stream.
        negotiates: false,
        ownQuery: true,
        produces: 'application/json',
        summary: 'The change feed: every committed create, update and delete, in commit order (JSON pages or Server-Sent Events)',
      },
      {
        path: TICKET_PATH,
        methods: READ_METHODS,
        handlers: {
          GET: (_req, res) => sendJson(res, 200, tickets.issue(), { 'Cache-Control': 'no-store' }),
        },
        produces: 'application/json',
        summary: 'A ticket that opens GET /_changes?ticket=… for 60 seconds without an Authorization header (for EventSource)',
      },
    ],
  };
}

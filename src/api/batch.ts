// POST /_batch (docs/bulk-and-batch.md): 1–100 operations on resource paths, run in order in one transaction of
// their own, each answered by the same compiled route as alone; the first failure rolls all back.
import { performance } from 'node:perf_hooks';
import type { Config } from '../config.js';
import { type MaybePromise, type Store, type Transaction, then } from '../engine/store.js';
import { ApiError, echo, type FieldError, nothingServedAt, type ProblemResponse, toProblem } from '../errors.js';
import { type JsonResponse, readJson, send, sendProblem } from '../http/messages.js';
import type { Id, Method } from '../model/registry.js';
import { fingerprintOf, parseIdempotencyKey } from '../request/idempotency.js';
import { type ParsedUrl, parseRequestUrl } from '../request/query-string.js';
import { LONE_SURROGATE, MAX_JSON_DEPTH } from '../request/validation.js';
import { bulkBodyLimit, type CompiledEndpoint, type Endpoint, type Request, type Response } from './compile.js';
import type { Match } from './routes.js';

/**
 * How deep a batch's JSON may nest, envelope included: an operation's body nested past MAX_JSON_DEPTH is
 * that operation's 400, up to this bound; past it the whole batch is refused before it is parsed.
 */
export const MAX_BATCH_DEPTH = 4 * MAX_JSON_DEPTH;
/** How many operations one batch holds. */
export const BATCH_OPERATIONS = { min: 1, max: 100 } as const;
export const BATCH_PATH = '/_batch';
/** The methods an operation may use (HEAD and OPTIONS say nothing a batch needs). */
export const BATCH_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** The most bytes of operation bodies one batch answers with (each read is bounded alone; a hundred of them are not). */
export const MAX_BATCH_RESULT_BYTES = 16 * 1024 * 1024;
/**
 * The request headers an operation may carry. Content-Type is held to what the same request takes alone
 * (a JSON type: application/merge-patch+json too on a PATCH); without it an operation is application/json.
 */
export const BATCH_HEADERS = ['If-Match', 'If-None-Match', 'Content-Type'] as const;
/** What a label looks like (it appears inside paths as `{label}`). */
export const LABEL = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
const MEMBERS = new Set(['method', 'path', 'body', 'headers', 'label']);
const WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);
/** The headers of an operation's answer that describe the HTTP message, not the answer: left out of its result. */
const MESSAGE_HEADERS = new Set(['content-type', 'content-length']);

/** One operation as the envelope gave it, checked. */
interface Operation {
  method: Method;
  /** The path as sent: `{label}` placeholders still in it. */
  path: string;
  body?: unknown;
  headers: Record<string, string>;
  label?: string;
}

/** What a label stands for once its operation ran: the created element's key, as a path segment and as a value. */
interface Created {
  segment: string;
  id: Id;
}

/** An operation's answer as the batch records it. */
interface Outcome {
  status: number;
  headers: Record<string, string>;
  /** The body's JSON text, or '' for none. */
  body: string;
}

/**
 * The first failing operation: it rolls the batch back, and its problem (with its index) is the
 * batch's answer. Its message is fixed: a store must never read a client's words (a path quoted in
 * a detail) as a database error.
 */
class Failure extends Error {
  constructor(
    readonly index: number,
    readonly problem: ProblemResponse,
  ) {
    super('an operation of the batch failed');
  }
}

/** A response that keeps what a compiled route writes (writeHead and end), for the batch's results. */
class Recorder {
  statusCode = 0;
  headersSent = false;
  readonly headers: Record<string, string> = {};
  body = '';

  writeHead(status: number, headers: Record<string, string | number> | (string | number)[] = {}): this {
    this.statusCode = status;
    this.headersSent = true;
    const keep = (name: string, value: string | number) => {
      if (!MESSAGE_HEADERS.has(name.toLowerCase())) this.headers[name] = String(value);
    };
    if (Array.isArray(headers)) for (let i = 0; i < headers.length; i += 2) keep(String(headers[i]), headers[i + 1] as string);
    else for (const name in headers) keep(name, headers[name] as string);
    return this;
  }

  end(body?: string): this {
    this.body = body ?? '';
    return this;
  }

  destroy(): this {
    return this;
  }
}

/** A control character (C0, DEL, C1): in no request-target. */
const CONTROL = /\p{Cc}/u;

/** A header value as a request line can carry it: visible Latin-1 characters, spaces and tabs. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** A `{label}` in a path. */
const PLACEHOLDER = /\{([^{}]*)\}/g;
/**
 * What may come before and after a `{label}`: it stands for a whole key (a segment, a part of a composite
 * key between commas, or a query value), never for digits glued to others (`/users/1{u}`).
 */
const BEFORE_KEY = ['/', ',', '='];
const AFTER_KEY = ['', '/', ',', '?', '&'];
/** A space, or a character beyond ASCII: a request-target carries them percent-encoded only (RFC 3986 §2.1). */
const UNENCODED = /[ \u0080-\u{10ffff}]/u;
/** The longest path an operation may have once its labels are filled in. */
const MAX_FILLED_PATH = 16 * 1024;

/** An operation's refusal as it answers alone (a problem body and its headers); anything unexpected is the batch's 500, logged. */
function refusalOf(error: unknown, instance: string): Outcome {
  const problem = toProblem(error, instance);
  if (problem.unexpected) throw error;
  return { status: problem.status, headers: problem.headers, body: JSON.stringify(problem.body) };
}

/** Calls `visit` on every `{"$ref": …}` object in a body (any other object with a `$ref` member is refused). */
function walkRefs(value: unknown, at: string, visit: (label: unknown, at: string) => void): void {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      walkRefs(item, `${at}/${i}`, visit);
    });
  } else if (value !== null && typeof value === 'object') {
    if (Object.hasOwn(value, '$ref')) {
      visit(Object.keys(value).length === 1 ? (value as { $ref: unknown }).$ref : undefined, at);
      return;
    }
    for (const [key, item] of Object.entries(value)) walkRefs(item, `${at}/${key}`, visit);
  }
}

/**
 * The body with every `{"$ref": label}` replaced by the key of the element that label created.
 * Members are defined, not assigned, so a member named `__proto__` stays a member, as JSON.parse made it.
 */
function resolveRefs(value: unknown, created: Map<string, Created>): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveRefs(item, created));
  if (value === null || typeof value !== 'object') return value;
  if (Object.hasOwn(value, '$ref')) return (created.get((value as { $ref: string }).$ref) as Created).id;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(out, key, { value: resolveRefs(item, created), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * Checks the envelope and every operation before anything runs: shapes, methods, headers, labels
 * (defined once, on a POST that creates one element, before any use) and that each path names a
 * resource route. Every problem is listed; any is a 400 and nothing runs.
 */
function parseEnvelope(document: unknown, routes: (path: string) => Match<CompiledEndpoint> | undefined): Operation[] {
  const errors: FieldError[] = [];
  // Paths hold the client's member names: each is echoed cut short, like any client text in an error.
  const fail = (path: string, message: string) => errors.push({ path: echo(path), message });
  const refuse = () =>
    new ApiError('badRequest', `The batch is malformed: ${errors[0]?.path || 'the body'} ${errors[0]?.message}.`, {
      errors,
      problemCode: 'bad-batch',
    });
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    fail('', 'must be an object with an "operations" array');
    throw refuse();
  }
  for (const key of Object.keys(document)) if (key !== 'operations') fail(key, 'is not a member of a batch');
  const list = (document as { operations?: unknown }).operations;
  if (!Array.isArray(list)) fail('operations', 'must be an array of operations');
  else if (list.length < BATCH_OPERATIONS.min || list.length > BATCH_OPERATIONS.max) {
    fail('operations', `must hold ${BATCH_OPERATIONS.min} to ${BATCH_OPERATIONS.max} operations (it holds ${list.length})`);
  }
  if (errors.length > 0) throw refuse();
  const labels = new Map<string, number>();
  const operations = (list as unknown[]).map((raw, i): Operation => {
    const at = `operations/${i}`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      fail(at, 'must be an object');
      return { method: 'GET', path: '', headers: {} };
    }
    const op = raw as Record<string, unknown>;
    for (const key of Object.keys(op)) if (!MEMBERS.has(key)) fail(`${at}/${key}`, 'is not a member of an operation');
    const method = op.method as Method;
    if (!(BATCH_METHODS as readonly unknown[]).includes(method)) fail(`${at}/method`, `must be one of ${BATCH_METHODS.join(', ')}`);
    if (WITH_BODY.has(method) && !Object.hasOwn(op, 'body')) fail(`${at}/body`, `is required for ${method}`);
    if (!WITH_BODY.has(method) && Object.hasOwn(op, 'body')) fail(`${at}/body`, `is not allowed for ${method}`);
    const headers: Record<string, string> = {};
    if (op.headers !== undefined) {
      if (op.headers === null || typeof op.headers !== 'object' || Array.isArray(op.headers)) fail(`${at}/headers`, 'must be an object');
      else {
        for (const [name, value] of Object.entries(op.headers)) {
          const known = BATCH_HEADERS.find((h) => h.toLowerCase() === name.toLowerCase());
          if (!known) fail(`${at}/headers/${name}`, `is not a header an operation may carry (${BATCH_HEADERS.join(', ')})`);
          else if (typeof value !== 'string') fail(`${at}/headers/${name}`, 'must be a string');
          // What a header line can carry alone: no control character but tab, nothing beyond Latin-1 (RFC 9110 §5.5).
          else if (!FIELD_VALUE.test(value)) fail(`${at}/headers/${name}`, 'holds a character no header value can carry');
          else if (Object.hasOwn(headers, known.toLowerCase())) fail(`${at}/headers/${name}`, `is ${known} given twice`);
          else headers[known.toLowerCase()] = value;
        }
      }
    }
    const label = op.label;
    let defines = false;
    if (label !== undefined) {
      if (typeof label !== 'string' || !LABEL.test(label)) fail(`${at}/label`, `must match ${LABEL.source}`);
      else if (labels.has(label)) fail(`${at}/label`, `"${label}" is already the label of operation ${labels.get(label)}`);
      else if (method !== 'POST' || Array.isArray(op.body)) fail(`${at}/label`, 'may only name a POST that creates one element');
      else defines = true;
    }
    const path = op.path;
    if (typeof path !== 'string' || !path.startsWith('/')) fail(`${at}/path`, 'must be a path starting with /');
    // A lone surrogate has no UTF-8 form, and no request-target holds a control character: alone, such a
    // target could not be sent at all (RFC 9112 §3.2).
    else if (LONE_SURROGATE.test(path)) fail(`${at}/path`, 'holds a lone UTF-16 surrogate, which is not Unicode text');
    else if (CONTROL.test(path)) fail(`${at}/path`, 'holds a control character, which no request-target carries');
    else if (UNENCODED.test(path)) {
      fail(`${at}/path`, 'holds a space or a character beyond ASCII, which a request-target carries percent-encoded (%20, %C3%A9)');
    } else {
      for (const placeholder of path.matchAll(PLACEHOLDER)) {
        const name = placeholder[1] as string;
        const end = placeholder.index + placeholder[0].length;
        if (!labels.has(name)) fail(`${at}/path`, `{${echo(name)}} names no label of an earlier operation`);
        else if (!BEFORE_KEY.includes(path[placeholder.index - 1] as string) || !AFTER_KEY.includes(path[end] ?? '')) {
          fail(`${at}/path`, `{${echo(name)}} must stand alone for a key: a whole path segment, key part (between commas) or query value`);
          break; // once: the rest of the path is no better
        }
      }
      // With each `{label}` standing for a key, the path must be one of the resources' routes.
      const pathname = path.split('?')[0] as string;
      const probe = pathname.replace(PLACEHOLDER, '1');
      if (probe.includes('{') || probe.includes('}')) fail(`${at}/path`, 'has a malformed {label}');
      else if (pathname.replace(/\/$/, '') === BATCH_PATH) fail(`${at}/path`, 'is a batch: batches do not nest');
      else if (!routes(probe)?.value.endpoint.resource) fail(`${at}/path`, 'is not a resource path');
    }
    walkRefs(op.body, `${at}/body`, (ref, where) => {
      if (typeof ref !== 'string') fail(where, 'a $ref must be an object {"$ref": "<label>"} and nothing else');
      else if (!labels.has(ref)) fail(where, `"$ref": ${JSON.stringify(echo(ref))} names no label of an earlier operation`);
    });
    // Defined after its own path and body were checked: an operation cannot refer to itself.
    if (defines) labels.set(label as string, i);
    return { method, path: path as string, body: op.body, headers, label: label as string | undefined };
  });
  if (errors.length > 0) throw refuse();
  return operations;
}

export interface BatchOptions {
  store: Store;
  config: Config;
  /** The route of a path (the app's route table). */
  routes: (path: string) => Match<CompiledEndpoint> | undefined;
}

/** The `/_batch` endpoint: POST runs a batch; every other method is a 405 as anywhere. */
export function batchEndpoint({ store, config, routes }: BatchOptions): Endpoint {
  const limit = bulkBodyLimit(config);

  /** Answers one operation through its compiled route, as the request `outer` would be answered alone. */
  const perform = (outer: Request, op: Operation, tx: Transaction, created: Map<string, Created>): MaybePromise<Outcome> => {
    const target = op.path.replace(PLACEHOLDER, (_, label: string) => (created.get(label) as Created).segment);
    if (target.length > MAX_FILLED_PATH) {
      const error = new ApiError('badRequest', `The path is longer than ${MAX_FILLED_PATH} characters once its labels are filled in.`, {
        problemCode: 'bad-batch',
      });
      return refusalOf(error, op.path);
    }
    const headers: Record<string, string> = { 'content-type': 'application/json', ...op.headers, accept: 'application/json' };
    const req = { method: op.method, url: target, headers, id: outer.id } as unknown as Request & { _parsedUrl?: ParsedUrl };
    const url = parseRequestUrl(req);
    req.path = url.pathname;
    req.search = url.search;
    req.query = url.query;
    req.operation = { body: created.size > 0 ? resolveRefs(op.body, created) : op.body, tx };
    const res = new Recorder();
    const recorded = (): Outcome => ({ status: res.statusCode, headers: res.headers, body: res.body });
    const failed = (error: unknown): Outcome => refusalOf(error, req.path);
    const match = routes(req.path);
    try {
      // Checked before the batch ran; a path that names no route once its labels are filled in is a 404 as alone.
      if (!match) throw nothingServedAt(req.path);
      const answer = (match.value.byMethod.get(op.method) ?? match.value.otherwise)(req, res as unknown as Response, match.segment);
      if (answer instanceof Promise) return answer.then(recorded, failed);
      return recorded();
    } catch (error) {
      return failed(error);
    }
  };

  /** What a label stands for, read from its POST's answer (its Location names the element). */
  const createdBy = (outcome: Outcome): Created | undefined => {
    const location = outcome.headers.Location;
    const match = location === undefined ? undefined : routes(location);
    const segment = match?.segment;
    const id = segment === undefined ? undefined : match?.value.endpoint.target?.parseId(segment);
    return segment === undefined || id === undefined ? undefined : { segment, id };
  };

  /** Runs the operations from `i` on, in order; throws the first failure (or the time limit) to roll all back. */
  const run = (
    outer: Request,
    operations: Operation[],
    tx: Transaction,
    started: number,
    outcomes: Outcome[] = [],
    created = new Map<string, Created>(),
    bytes = 0,
  ): MaybePromise<Outcome[]> => {
    const i = outcomes.length;
    if (i === operations.length) return outcomes;
    const refuse = (detail: string) => {
      throw new Failure(
        i,
        toProblem(
          new ApiError('unprocessable', `${detail}; it was rolled back. Send fewer operations per batch.`, {
            problemCode: 'batch-too-large',
          }),
          BATCH_PATH,
        ),
      );
    };
    if (i > 0 && performance.now() - started > config.batchTimeoutMs) {
      refuse(`The batch ran longer than BATCH_TIMEOUT_MS (${config.batchTimeoutMs} ms) before operation ${i}`);
    }
    const op = operations[i] as Operation;
    return then(perform(outer, op, tx, created), (outcome) => {
      if (outcome.status >= 400) {
        const problem = JSON.parse(outcome.body);
        // Retry-After (a 503, a 429) still holds for the batch; Allow and the like are the operation path's own.
        const retry = outcome.headers['Retry-After'];
        throw new Failure(i, { status: outcome.status, headers: retry ? { 'Retry-After': retry } : {}, body: problem, unexpected: false });
      }
      if (op.label !== undefined) {
        const made = createdBy(outcome);
        if (!made) throw new Error(`operation ${i} (${op.method} ${op.path}) created no element its label can name`);
        created.set(op.label, made);
      }
      outcomes.push(outcome);
      const answered = bytes + Buffer.byteLength(outcome.body);
      if (answered > MAX_BATCH_RESULT_BYTES) refuse(`The batch's answer grew past ${MAX_BATCH_RESULT_BYTES} bytes at operation ${i}`);
      return run(outer, operations, tx, started, outcomes, created, answered);
    }) as MaybePromise<Outcome[]>; // a promise of a promise settles as the inner one
  };

  /** The batch's 200: each result's body is the operation's JSON text as it is (no parse and re-serialize). */
  const resultsOf = (outcomes: Outcome[]): JsonResponse => {
    const results = outcomes.map(
      ({ status, headers, body }) => `{"status":${status},"headers":${JSON.stringify(headers)},"body":${body === '' ? 'null' : body}}`,
    );
    return { status: 200, headers: {}, body: `{"results":[${results.join(',')}]}` };
  };

  const post = (req: Request, res: Response) => {
    const key = parseIdempotencyKey(req.headers['idempotency-key']);
    // Each operation's body is checked as alone (nesting, Unicode) when it runs, so that a refusal is the
    // operation's; the envelope is only bounded in depth, for the walks that follow.
    return readJson(req, limit, ['application/json'], { arrayLimit: limit, levels: MAX_BATCH_DEPTH, envelope: true }).then((document) => {
      const operations = parseEnvelope(document, routes);
      const once = key === undefined ? undefined : { key, fingerprint: fingerprintOf('POST', BATCH_PATH, document) };
      const work = (tx: Transaction) => then(run(req, operations, tx, performance.now()), resultsOf);
      return store.batch(work, once).then(
        ({ response, replayed }) => send(res, response, replayed ? { 'Idempotent-Replayed': 'true' } : undefined),
        (error: unknown) => {
          if (!(error instanceof Failure)) throw error;
          const { problem, index } = error;
          sendProblem(res, { ...problem, body: { ...problem.body, operation: index } as ProblemResponse['body'] });
        },
      );
    });
  };

  return { path: BATCH_PATH, methods: ['POST', 'OPTIONS'], handlers: { POST: post } };
}

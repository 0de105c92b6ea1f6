// The only reader of process.env: one table of variables, each parsed and validated once at start-up.
// A bad value is a ConfigError whose message is the single line main.ts prints before exiting 1: the
// value, what the variable accepts (read off its schema: see `accepted`) and what the variable is for.
import { z } from 'zod';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * A whole number written as plain decimal digits (at most 10; no `0x10`, `1e3`, `+5`, `2.0` or spaces),
 * within bounds; `accepted` reads the bounds back for the error message.
 */
const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,10}$/)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
const port = wholeNumber(0, 65535);
const positiveInt = wholeNumber(1, 2 ** 31 - 1);
const token = z
  .string()
  .regex(/^[\x21-\x7e]{16,}$/)
  .optional()
  .describe('at least 16 visible ASCII characters');
/** scheme://host[:port], the host a name, an IPv4 address or a bracketed IPv6 one (http://[::1]:3000). */
const ORIGIN = /^(https?:\/\/)([a-z0-9.-]+|\[[0-9a-f:.]+\])(:\d{1,5})?$/i;
/** A dotted-quad IPv4 address, each part 0–255. */
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
/** One label of a host name (RFC 1123): 1–63 letters, digits and hyphens, no hyphen at either end. */
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;
/**
 * Whether an origin's host (not bracketed) is a host name or an IPv4 address: `..`, `-` or
 * `999.999.999.999` are neither, and no browser sends them. A last label of digits only makes it an
 * IPv4 address, as a URL parser reads it.
 */
function isHostOrIPv4(host: string): boolean {
  const labels = host.split('.');
  if (/^\d+$/.test(labels[labels.length - 1] as string)) return IPV4.test(host);
  return host.length <= 253 && labels.every((label) => LABEL.test(label));
}
/** A port of an origin (`:8080`, or none) that a connection can have: 1–65535. */
const isPortOf = (port: string) => port === '' || (Number(port.slice(1)) >= 1 && Number(port.slice(1)) <= 65535);
/**
 * An origin as a browser's Origin header carries it (lower case; an IPv6 address in its shortest form,
 * `[0:0::1]` as `[::1]`), or undefined when it is none.
 */
function canonicalOrigin(origin: string): string | undefined {
  const [, scheme, host, port = ''] = ORIGIN.exec(origin) ?? [];
  if (scheme === undefined || host === undefined || !isPortOf(port)) return undefined;
  if (!host.startsWith('[')) return isHostOrIPv4(host) ? origin.toLowerCase() : undefined;
  if (!URL.canParse(`http://${host}`)) return undefined;
  return `${scheme.toLowerCase()}${new URL(`http://${host}`).hostname}${port}`;
}
const origins = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    if (raw === undefined) return undefined;
    if (raw.trim() === '*') return '*' as const;
    const list = raw
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean)
      .map(canonicalOrigin);
    if (list.length === 0 || !list.every((o) => o !== undefined)) {
      ctx.addIssue({ code: 'custom', message: 'not an origin list' });
      return z.NEVER;
    }
    return list;
  })
  .describe(
    '* or a comma-separated list of origins: http:// or https://, a host name, an IPv4 address or an IPv6 one in brackets, an optional port (1–65535)',
  );

/**
 * Every variable: its name, default, documentation and parser. `doc` is the one text of what a variable is for:
 * printed with a refusal, and the Meaning column of docs/configuration.md (`npm run docs:config` writes it;
 * test/docs/configuration.test.ts fails while the page is not what it writes).
 */
export const VARIABLES = {
  port: { env: 'PORT', default: '3000', doc: 'TCP port to listen on (0 picks a free one)', schema: port },
  host: {
    env: 'HOST',
    default: '127.0.0.1',
    doc: 'interface to bind; the container image sets `0.0.0.0`. A name that resolves to no address stops start-up with one line before the database is opened (also with `WORKERS`); one that resolves but cannot be bound (or a `PORT` in use) after the migrations ran. When no name server answers (offline: `EAI_AGAIN`), the line says so and suggests an IP address',
    // A blank one would reach the listen call as a name that resolves to nothing.
    schema: z
      .string()
      .regex(/^\S+$/)
      // An IPv6 address as URLs write it (`[::1]`) is the address.
      .transform((host) => (/^\[[^\]]*\]$/.test(host) ? host.slice(1, -1) : host))
      .describe('a host name or IP address (an IPv6 one with or without brackets), without white space'),
  },
  databasePath: {
    env: 'DATABASE_PATH',
    default: 'data/app.db',
    doc: "SQLite file, created with its folder on first start. `:memory:` is SQLite's in-memory database, lost at exit; with `WORKERS` above 1 it is refused (each worker would have its own)",
    // SQLite opens a temporary database for a blank name, which loses every write at exit; white space at
    // either end would name another file than the one meant. (`:memory:`, asked for by name, is SQLite's own.)
    schema: z
      .string()
      .regex(/^\S(?:[\s\S]*\S)?$/)
      .describe('a file path, without white space at either end'),
  },
  databaseSynchronous: {
    env: 'DATABASE_SYNCHRONOUS',
    default: 'FULL',
    doc: 'SQLite `synchronous` (in capitals): `FULL` (an acknowledged write survives power loss), `NORMAL` (survives a crash of the process; the last commits may be lost if the machine loses power), `OFF`, `EXTRA`',
    schema: z.enum(['OFF', 'NORMAL', 'FULL', 'EXTRA']),
  },
  databaseAdopt: {
    env: 'DATABASE_ADOPT',
    default: 'false',
    doc: "true: migrate and serve a database that holds tables the schema does not declare and none of its migrations, adding the schema's tables beside them; false: such a database is refused at start (npm run introspect serves its own tables)",
    schema: z
      .enum(['true', 'false'])
      .transform((value) => value === 'true')
      .describe('true or false'),
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    default: undefined,
    doc: '`postgres://user:password@host:port/database`: serve from PostgreSQL (15 or newer) instead of SQLite (docs/scaling-out.md); unset: SQLite at `DATABASE_PATH`',
    schema: z
      .string()
      .refine((raw) => /^postgres(ql)?:\/\/./.test(raw) && URL.canParse(raw))
      .optional()
      .describe('a postgres:// or postgresql:// URL'),
  },
  pgPoolSize: {
    env: 'PG_POOL_SIZE',
    default: '10',
    doc: "PostgreSQL connections each process may open; instances × `WORKERS` × this must stay below the server's `max_connections` (the service does not check it)",
    schema: wholeNumber(1, 1000),
  },
  pgConnectTimeoutMs: {
    env: 'PG_CONNECT_TIMEOUT_MS',
    default: '5000',
    doc: 'how long a request waits for a PostgreSQL connection (a new one, or a free one of a busy pool) before a 503',
    schema: positiveInt,
  },
  pgStatementTimeoutMs: {
    env: 'PG_STATEMENT_TIMEOUT_MS',
    default: '30000',
    doc: 'PostgreSQL cancels a statement running longer (`statement_timeout`); the request gets a 503',
    schema: positiveInt,
  },
  pgIdleTimeoutMs: {
    env: 'PG_IDLE_TIMEOUT_MS',
    default: '30000',
    doc: 'an idle PostgreSQL connection is closed after this long',
    schema: positiveInt,
  },
  maxBodyBytes: {
    env: 'MAX_BODY_BYTES',
    default: '1048576',
    doc: 'largest request body, in bytes (413 above); at most `MAX_BODY_BYTES_IN_FLIGHT`, so a value above 16777216 needs that raised too (else start-up stops)',
    schema: positiveInt,
  },
  maxBulkBodyBytes: {
    env: 'MAX_BULK_BODY_BYTES',
    default: '8388608',
    doc: 'largest body of a bulk create (a JSON array POSTed to a collection or related path) or of a `POST /_batch`, in bytes (413 above); a value above `MAX_BODY_BYTES_IN_FLIGHT` is lowered to it, one below `MAX_BODY_BYTES` raised to it',
    schema: positiveInt,
  },
  batchTimeoutMs: {
    env: 'BATCH_TIMEOUT_MS',
    default: '1000',
    doc: 'how long a `POST /_batch` may run in its transaction: checked before each operation, a batch past it is rolled back and answered 422 (one operation already running finishes first)',
    schema: positiveInt,
  },
  changesRetentionHours: {
    env: 'CHANGES_RETENTION_HOURS',
    default: '24',
    doc: 'how long the change feed keeps a change, in hours; older ones are purged, and a `since` before the oldest kept is a 410',
    schema: z
      .string()
      .regex(/^\d{1,10}(\.\d{1,6})?$/) // leading zeros allowed, as in the whole numbers above
      .transform(Number)
      .pipe(z.number().positive().max(87600))
      .describe('a number above 0 and at most 87600, in decimal digits with at most 6 after the point (0.5, not .5)'),
  },
  changesMaxStreams: {
    env: 'CHANGES_MAX_STREAMS',
    default: '1000',
    doc: 'Server-Sent Events streams of `GET /_changes` one process holds open at once; past it 503 with `Retry-After` (streams do not count toward `MAX_IN_FLIGHT`)',
    schema: wholeNumber(1, 100000),
  },
  changesStreamBufferBytes: {
    env: 'CHANGES_STREAM_BUFFER_BYTES',
    default: '1048576',
    doc: 'bytes a change stream may leave unsent for a slow client: events are written while less than half of it waits, and past it the stream is closed (the client resumes with `Last-Event-ID`)',
    schema: wholeNumber(4096, 2 ** 31 - 1),
  },
  changesHeartbeatMs: {
    env: 'CHANGES_HEARTBEAT_MS',
    default: '10000',
    doc: 'how often an idle change stream gets a comment line that keeps proxies from closing it',
    schema: wholeNumber(100, 15000),
  },
  logLevel: {
    env: 'LOG_LEVEL',
    default: 'info',
    doc: 'the level of the log lines written (docs/operations.md, "Logs")',
    schema: z.enum(LOG_LEVELS),
  },
  authToken: {
    env: 'AUTH_TOKEN',
    default: undefined,
    doc: 'bearer token required on every path but `/healthz`, `/readyz`, `/openapi.json` and `/docs`; unset: no authentication',
    schema: token,
  },
  authReadToken: {
    env: 'AUTH_READ_TOKEN',
    default: undefined,
    doc: 'a second bearer token that may only GET, HEAD and OPTIONS (needs `AUTH_TOKEN`, must differ from it)',
    schema: token,
  },
  corsOrigins: {
    env: 'CORS_ORIGINS',
    default: undefined,
    doc: "origins allowed to read answers in a browser (`https://app.example.com,http://localhost:5173,http://[::1]:3000`), compared with the `Origin` header as browsers write it: so give no port when it is the scheme's default (`https://a.example:443` never matches, browsers send `https://a.example`); case does not matter (browsers write lower case), nor how an IPv6 address is spelled (`[0:0::1]` is taken as `[::1]`); unset: no CORS headers",
    schema: origins,
  },
  headersTimeoutMs: {
    env: 'HEADERS_TIMEOUT_MS',
    default: '10000',
    doc: 'time a client has to send its request headers (slow-loris guard); unset: 10000, or `REQUEST_TIMEOUT_MS` when that is less; at most `REQUEST_TIMEOUT_MS` (a larger value set explicitly stops start-up)',
    schema: positiveInt,
  },
  requestTimeoutMs: {
    env: 'REQUEST_TIMEOUT_MS',
    default: '30000',
    doc: 'time a client has to send its whole request; `REQUEST_TIMEOUT_MS=5000` alone gives `HEADERS_TIMEOUT_MS` 5000 too',
    schema: positiveInt,
  },
  maxInFlight: {
    env: 'MAX_IN_FLIGHT',
    default: '256',
    doc: 'requests one process handles at once; past it a request is answered 503 with `Retry-After: 1` at once',
    schema: positiveInt,
  },
  maxBodyBytesInFlight: {
    env: 'MAX_BODY_BYTES_IN_FLIGHT',
    default: '16777216',
    doc: 'request-body bytes one process holds while reading bodies, counted as they arrive; at least `MAX_BODY_BYTES` (else start-up stops; and it bounds `MAX_BULK_BODY_BYTES`); past it 503',
    schema: positiveInt,
  },
  rateLimit: {
    env: 'RATE_LIMIT',
    default: '0',
    doc: 'requests per client in each `RATE_LIMIT_WINDOW_S` (per token when authenticated, else per address); `0`: no rate limit',
    schema: wholeNumber(0, 2 ** 31 - 1),
  },
  rateLimitWindowS: {
    env: 'RATE_LIMIT_WINDOW_S',
    default: '60',
    doc: 'the rate-limit window, in seconds',
    schema: wholeNumber(1, 86400),
  },
  workers: {
    env: 'WORKERS',
    default: '1',
    doc: 'processes serving the same port and database file (node:cluster; reads scale with cores): the primary migrates once, forks them, replaces one that dies once the service has served (after 1 s, so a worker that cannot start is not re-forked in a tight loop) and stops them all on SIGTERM; a worker that fails before any has served (a bad `HOST`, a port in use) stops start-up with its one line and exit code 1',
    schema: wholeNumber(1, 64),
  },
  shutdownTimeoutMs: {
    env: 'SHUTDOWN_TIMEOUT_MS',
    default: '10000',
    doc: 'on SIGTERM/SIGINT, how long requests in flight may take before their connections are closed',
    schema: positiveInt,
  },
  cursorSecret: {
    env: 'CURSOR_SECRET',
    default: undefined,
    doc: 'key that signs paging cursors; give every process serving the database the same one. Unset: a random key is made once and kept in the database. Changing it invalidates cursors already handed out',
    schema: z
      .string()
      .regex(/^[\x21-\x7e]{32,}$/)
      .optional()
      .describe('at least 32 visible ASCII characters'),
  },
} as const;

type Variables = typeof VARIABLES;
export type Config = { [K in keyof Variables]: z.output<Variables[K]['schema']> };

/**
 * What a variable accepts, in words, read off its schema: its description when it has one, else the
 * options of an enum or the bounds of a whole number (`an integer from 1 to 64`).
 */
export function accepted(schema: z.ZodType): string {
  if (schema.description) return schema.description;
  if (schema instanceof z.ZodEnum) return `one of ${schema.options.join(', ')}`;
  if (schema instanceof z.ZodPipe && schema.out instanceof z.ZodNumber && schema.out.isInt)
    return `an integer from ${schema.out.minValue} to ${schema.out.maxValue}`;
  throw new Error('a configuration schema without a description of what it accepts');
}

/** A configuration value that cannot be used; `message` is one line naming the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Reads and validates the configuration from an environment (process.env by default).
 * @throws {ConfigError} on the first bad or unsupported value
 */
export function parseConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config: Record<string, unknown> = {};
  for (const [key, variable] of Object.entries(VARIABLES)) {
    const raw = env[variable.env] === undefined || env[variable.env] === '' ? variable.default : env[variable.env];
    const result = variable.schema.safeParse(raw);
    if (!result.success) {
      const secret = variable.env.startsWith('AUTH_') || variable.env === 'CURSOR_SECRET' || variable.env === 'DATABASE_URL';
      const shown = secret ? '(hidden)' : JSON.stringify(raw);
      throw new ConfigError(`${variable.env}=${shown} is invalid: expected ${accepted(variable.schema)}. ${variable.env}: ${variable.doc}`);
    }
    config[key] = result.data;
  }
  // Left unset, the headers' timeout follows a shorter request timeout (node:http refuses a longer one).
  if (!env.HEADERS_TIMEOUT_MS) config.headersTimeoutMs = Math.min(config.headersTimeoutMs as number, config.requestTimeoutMs as number);
  const parsed = config as Config;
  if (parsed.authReadToken && !parsed.authToken) throw new ConfigError('AUTH_READ_TOKEN is set without AUTH_TOKEN; set both or neither');
  if (parsed.authReadToken && parsed.authReadToken === parsed.authToken)
    throw new ConfigError('AUTH_READ_TOKEN must differ from AUTH_TOKEN');
  if (parsed.maxBodyBytesInFlight < parsed.maxBodyBytes)
    throw new ConfigError(
      `MAX_BODY_BYTES_IN_FLIGHT (${parsed.maxBodyBytesInFlight}) must be at least MAX_BODY_BYTES (${parsed.maxBodyBytes}), or no body of the largest size could ever be read`,
    );
  // Each process would open a database of its own: a write made through one would be missing from the others.
  if (parsed.workers > 1 && !parsed.databaseUrl && parsed.databasePath === ':memory:')
    throw new ConfigError(
      `DATABASE_PATH=:memory: cannot be shared by WORKERS=${parsed.workers}: each worker would serve an in-memory database of its own; use a file, or WORKERS=1`,
    );
  if (parsed.headersTimeoutMs > parsed.requestTimeoutMs)
    throw new ConfigError(
      `HEADERS_TIMEOUT_MS (${parsed.headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${parsed.requestTimeoutMs})`,
    );
  return parsed;
}

/** The pool settings of a PostgreSQL configuration. */
export function postgresOptions(config: Config) {
  return {
    poolSize: config.pgPoolSize,
    connectTimeoutMs: config.pgConnectTimeoutMs,
    statementTimeoutMs: config.pgStatementTimeoutMs,
    idleTimeoutMs: config.pgIdleTimeoutMs,
  };
}

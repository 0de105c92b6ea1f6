// The only reader of process.env: one table of variables, each parsed and validated once at start-up.
// A bad value is a ConfigError whose message is the single line main.ts prints before exiting 1.
import { z } from 'zod';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** A whole number written as plain decimal digits (no `0x10`, `1e3`, `+5` or spaces), within bounds. */
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
  .regex(/^[\x21-\x7e]{16,}$/, 'at least 16 visible ASCII characters')
  .optional();
const ORIGIN = /^https?:\/\/[a-z0-9.-]+(:\d{1,5})?$/i;
const origins = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    if (raw === undefined) return undefined;
    if (raw.trim() === '*') return '*' as const;
    const list = raw
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean);
    if (list.length === 0 || !list.every((o) => ORIGIN.test(o))) {
      ctx.addIssue({ code: 'custom', message: 'not an origin list' });
      return z.NEVER;
    }
    return list.map((o) => o.toLowerCase());
  });

/** Every variable: its name, default, documentation and parser. The README table mirrors this. */
export const VARIABLES = {
  port: { env: 'PORT', default: '3000', doc: 'TCP port to listen on (0 picks a free one)', schema: port },
  host: { env: 'HOST', default: '127.0.0.1', doc: 'interface to bind; the container sets 0.0.0.0', schema: z.string().min(1) },
  databasePath: {
    env: 'DATABASE_PATH',
    default: 'data/app.db',
    doc: 'SQLite file, created with its folder on first start',
    schema: z.string().min(1),
  },
  databaseSynchronous: {
    env: 'DATABASE_SYNCHRONOUS',
    default: 'FULL',
    doc: 'SQLite synchronous level: FULL (an acknowledged write survives power loss), NORMAL (survives a process crash), OFF or EXTRA',
    schema: z.enum(['OFF', 'NORMAL', 'FULL', 'EXTRA']),
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    default: undefined,
    doc: 'postgres://user:password@host:port/database to serve from PostgreSQL (15 or newer) instead of SQLite; unset: SQLite at DATABASE_PATH',
    schema: z
      .string()
      .refine((raw) => /^postgres(ql)?:\/\/./.test(raw) && URL.canParse(raw), 'a postgres:// URL')
      .optional(),
  },
  pgPoolSize: {
    env: 'PG_POOL_SIZE',
    default: '10',
    doc: "PostgreSQL connections each process may open (processes × instances × this must stay under the server's max_connections)",
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
    doc: 'PostgreSQL cancels a statement that runs longer (statement_timeout); the request gets a 503',
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
    doc: 'largest accepted request body, in bytes (413 above)',
    schema: positiveInt,
  },
  maxBulkBodyBytes: {
    env: 'MAX_BULK_BODY_BYTES',
    default: '8388608',
    doc: 'largest accepted body of a bulk create (a JSON array POSTed to a collection or related path) or of a POST /_batch, in bytes (413 above; never more than MAX_BODY_BYTES_IN_FLIGHT, never less than MAX_BODY_BYTES)',
    schema: positiveInt,
  },
  batchTimeoutMs: {
    env: 'BATCH_TIMEOUT_MS',
    default: '1000',
    doc: 'longest time a POST /_batch may run inside its transaction (holding the write lock); one still running then is rolled back and answered 422',
    schema: positiveInt,
  },
  changesRetentionHours: {
    env: 'CHANGES_RETENTION_HOURS',
    default: '24',
    doc: 'how long the change feed keeps a change, in hours (a decimal such as 0.5 allowed; at most 87600); older ones are purged and a since before them is a 410',
    schema: z
      .string()
      .regex(/^\d{1,6}(\.\d{1,6})?$/)
      .transform(Number)
      .pipe(z.number().positive().max(87600)),
  },
  changesMaxStreams: {
    env: 'CHANGES_MAX_STREAMS',
    default: '1000',
    doc: 'Server-Sent Events streams of GET /_changes one process holds open at once; past it 503 with Retry-After (streams do not count toward MAX_IN_FLIGHT)',
    schema: wholeNumber(1, 100000),
  },
  changesStreamBufferBytes: {
    env: 'CHANGES_STREAM_BUFFER_BYTES',
    default: '1048576',
    doc: 'bytes a change stream may hold unsent for a slow client; past it the stream is closed (the client resumes with Last-Event-ID)',
    schema: wholeNumber(4096, 2 ** 31 - 1),
  },
  changesHeartbeatMs: {
    env: 'CHANGES_HEARTBEAT_MS',
    default: '10000',
    doc: 'how often an idle change stream gets a comment line that keeps proxies from closing it (100 to 15000)',
    schema: wholeNumber(100, 15000),
  },
  logLevel: { env: 'LOG_LEVEL', default: 'info', doc: `one of ${LOG_LEVELS.join(', ')}`, schema: z.enum(LOG_LEVELS) },
  authToken: {
    env: 'AUTH_TOKEN',
    default: undefined,
    doc: 'bearer token for every request but the probes and the documentation (at least 16 visible ASCII characters); unset: no authentication',
    schema: token,
  },
  authReadToken: {
    env: 'AUTH_READ_TOKEN',
    default: undefined,
    doc: 'a second bearer token limited to GET, HEAD and OPTIONS (needs AUTH_TOKEN)',
    schema: token,
  },
  corsOrigins: {
    env: 'CORS_ORIGINS',
    default: undefined,
    doc: '"*" or a comma-separated list of origins such as https://app.example.com; unset: no CORS headers',
    schema: origins,
  },
  headersTimeoutMs: {
    env: 'HEADERS_TIMEOUT_MS',
    default: '10000',
    doc: 'time a client has to send all request headers (slow-loris guard)',
    schema: positiveInt,
  },
  requestTimeoutMs: { env: 'REQUEST_TIMEOUT_MS', default: '30000', doc: 'time a client has to send a whole request', schema: positiveInt },
  maxInFlight: {
    env: 'MAX_IN_FLIGHT',
    default: '256',
    doc: 'requests handled at once by one process; past it a request is answered 503 with Retry-After at once',
    schema: positiveInt,
  },
  maxBodyBytesInFlight: {
    env: 'MAX_BODY_BYTES_IN_FLIGHT',
    default: '16777216',
    doc: 'request-body bytes one process holds while reading bodies, counted as they arrive; past it 503',
    schema: positiveInt,
  },
  rateLimit: {
    env: 'RATE_LIMIT',
    default: '0',
    doc: 'requests per client (per token when authenticated, else per address) in each RATE_LIMIT_WINDOW_S; 0: no limit',
    schema: wholeNumber(0, 2 ** 31 - 1),
  },
  rateLimitWindowS: {
    env: 'RATE_LIMIT_WINDOW_S',
    default: '60',
    doc: 'the rate-limit window, in seconds (1 to 86400)',
    schema: wholeNumber(1, 86400),
  },
  workers: {
    env: 'WORKERS',
    default: '1',
    doc: 'processes serving the same port and database (node:cluster); reads scale with cores',
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
    doc: 'key that signs paging cursors (at least 32 visible ASCII characters), the same for every process serving the database; unset: a random key made once and kept in the database',
    schema: z
      .string()
      .regex(/^[\x21-\x7e]{32,}$/, 'at least 32 visible ASCII characters')
      .optional(),
  },
} as const;

type Variables = typeof VARIABLES;
export type Config = { [K in keyof Variables]: z.output<Variables[K]['schema']> };

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
      throw new ConfigError(`${variable.env}=${shown} is invalid: expected ${variable.doc}`);
    }
    config[key] = result.data;
  }
  const parsed = config as Config;
  if (parsed.authReadToken && !parsed.authToken) throw new ConfigError('AUTH_READ_TOKEN is set without AUTH_TOKEN; set both or neither');
  if (parsed.authReadToken && parsed.authReadToken === parsed.authToken)
    throw new ConfigError('AUTH_READ_TOKEN must differ from AUTH_TOKEN');
  if (parsed.maxBodyBytesInFlight < parsed.maxBodyBytes)
    throw new ConfigError('MAX_BODY_BYTES_IN_FLIGHT must be at least MAX_BODY_BYTES, or no body of the largest size could ever be read');
  if (parsed.headersTimeoutMs > parsed.requestTimeoutMs) throw new ConfigError('HEADERS_TIMEOUT_MS must not exceed REQUEST_TIMEOUT_MS');
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

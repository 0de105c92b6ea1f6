// Opens a PostgreSQL connection pool (node-postgres) with the settings the service relies on, and
// drains it at shutdown. Like client.ts for SQLite, it owns no global handle.
import { createRequire } from 'node:module';
import type pg from 'pg';
import { pgColumnKey } from './tables.js';

/** node-postgres, loaded on first use: a SQLite service never pays for it (~6 MB of RSS). */
let driver: typeof pg | undefined;
function nodePostgres(): typeof pg {
  driver ??= createRequire(import.meta.url)('pg') as typeof pg;
  return driver;
}

export interface PostgresOptions {
  /** Connections the pool may open (each instance: size × instances must fit max_connections). */
  poolSize: number;
  /** How long to wait for a connection (a new one, or a free one from a full pool) before a 503. */
  connectTimeoutMs: number;
  /** The server cancels a statement running longer than this (statement_timeout). */
  statementTimeoutMs: number;
  /** An idle connection is closed after this long. */
  idleTimeoutMs: number;
}

export const POSTGRES_DEFAULTS: PostgresOptions = {
  poolSize: 10,
  connectTimeoutMs: 5000,
  statementTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
};

export interface PostgresHandle {
  engine: 'postgres';
  pool: pg.Pool;
  /** The URL without its password, for logs. */
  url: string;
}

/**
 * Values as the API reads them: int8 (COUNT(*), bigint keys) as JS numbers (keys and counts stay
 * far below 2^53; the API refuses unsafe integers); the other types restable declares (integers,
 * reals, booleans, bytea, json and jsonb) as node-postgres parses them; and every other type as the
 * text PostgreSQL sends: dates and times (drizzle's columns decode them, as its node-postgres driver
 * does), and what an introspected database's columns without a declared type hold (arrays, intervals,
 * points…), which go back the way they came (as text PostgreSQL parses: nativeText in src/engine/postgres/tables.ts).
 */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    const { builtins, getTypeParser } = nodePostgres().types;
    switch (oid) {
      case builtins.INT8:
        return (value: string) => Number(value);
      case builtins.INT2:
      case builtins.INT4:
      case builtins.OID:
      case builtins.FLOAT4:
      case builtins.FLOAT8:
      case builtins.BOOL:
      case builtins.BYTEA:
      case builtins.JSON:
      case builtins.JSONB:
        return getTypeParser(oid, format as 'text');
      default:
        return (value: string) => value;
    }
  },
} as pg.CustomTypesConfig;

/**
 * The session's output formats, whatever the database or role sets: dates and times are served as the text
 * PostgreSQL writes (columns of types restable does not declare), so a `DateStyle` of `SQL, DMY` or a
 * `TimeZone` whose abbreviation PostgreSQL reads back as another zone (`IST`) would make a GET's value
 * differ from what it means, and a PUT of it change the row. ISO dates, UTC offsets, ISO intervals.
 */
const SESSION_OPTIONS = '-c DateStyle=ISO,YMD -c TimeZone=UTC -c IntervalStyle=postgres';

/**
 * The URL and the startup `options` every connection sends: SESSION_OPTIONS, after those the URL gives, so
 * that they are the ones in force (PGOPTIONS is not read: the service's own options take its place). node-postgres takes a URL's `options` over its own setting, so
 * options the URL gives are extended in the URL itself.
 */
function withSessionOptions(url: string): { connectionString: string; options?: string } {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL node-postgres reads query parameters from (a socket path): nothing there to extend.
  }
  const given = parsed?.searchParams.get('options');
  if (!parsed || given === null || given === undefined) return { connectionString: url, options: SESSION_OPTIONS };
  parsed.searchParams.set('options', `${given} ${SESSION_OPTIONS}`);
  return { connectionString: parsed.toString() };
}

/** Checkouts (a query or a transaction each) a connection serves before the pool replaces it: bounds what it accumulates. */
const MAX_USES = 10_000;

/** Query parameters of a connection URL that node-postgres reads as secrets. */
const SECRET_PARAMETERS = ['password', 'sslpassword'];

/** The URL with its passwords masked (in its user info, and given as query parameters), safe to log. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const name of SECRET_PARAMETERS) if (parsed.searchParams.has(name)) parsed.searchParams.set(name, '***');
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}

/**
 * A pool over `url`. Connections open lazily; an idle connection that the server drops (a restart)
 * is reported on the pool's `error` event, which is listened to here so it never crashes the
 * process: the next query gets a new connection, or fails with a connection error (a 503).
 */
export function openPostgres(url: string, options: PostgresOptions = POSTGRES_DEFAULTS): PostgresHandle {
  const pool = new (nodePostgres().Pool)({
    ...withSessionOptions(url),
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    idleTimeoutMillis: options.idleTimeoutMs,
    statement_timeout: options.statementTimeoutMs,
    application_name: 'restable',
    // Each connection prepares the statements it runs; a new one now and then starts with none.
    maxUses: MAX_USES,
    types,
  });
  pool.on('error', () => {
    // An idle client lost its connection; the pool has removed it already.
  });
  // A connection PostgreSQL ends (a restart, pg_terminate_backend) emits 'error' on its client, also while it is
  // checked out between two queries, where the pool listens no more (it hands a client out synchronously, in the
  // middle of reading a packet that may hold that very error): an 'error' event nobody listens for ends the
  // process. Every client listens from its first connection on; the query under way, or the next one, fails
  // on its own (a 503), and the pool drops the broken client when it comes back.
  pool.on('connect', (client) => client.on('error', () => {}));
  return { engine: 'postgres', pool, url: redactUrl(url) };
}

/**
 * The type of every column of the current schema's tables and views, by pgColumnKey, as PostgreSQL spells it
 * (`uuid`, `text[]`, `timestamp with time zone`, an enum's name, quoted where SQL needs it): for toPgTables.
 */
export async function readPgColumnTypes({ pool }: PostgresHandle): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ table: string; column: string; type: string }>(
    `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
       FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0 AND NOT a.attisdropped`,
  );
  return new Map(rows.map((row) => [pgColumnKey(row.table, row.column), row.type]));
}

/** Waits for checked-out connections to be released, then closes every connection. */
export async function closePostgres({ pool }: PostgresHandle): Promise<void> {
  if (!pool.ended) await pool.end();
}

/** Whether a database handle is PostgreSQL's (else it is SQLite's DatabaseHandle). */
export function isPostgres(handle: object): handle is PostgresHandle {
  return (handle as { engine?: string }).engine === 'postgres';
}

// Boot only: config → open db → migrate → create app → listen; the graceful stop on SIGTERM/SIGINT;
// with WORKERS > 1, a cluster primary that migrates once and supervises the serving workers.
// A start-up failure prints one line and exits 1; nothing else in src/ calls process.exit.
import cluster from 'node:cluster';
import { lookup } from 'node:dns/promises';
import { isIPv6 } from 'node:net';
import type { Logger } from 'pino';
import { createApp } from './app.js';
import { type Config, ConfigError, parseConfig, postgresOptions } from './config.js';
import * as schema from './db/schema.js';
import { refuseForeignPostgres, refuseForeignSqlite } from './engine/adopt.js';
import { loadPostgresStore } from './engine/backend.js';
import { installPgOn, installSqlite } from './engine/changes.js';
import { applyPgMigrations, pgChangedMigrations } from './engine/postgres/migrate.js';
import { closePostgres, isPostgres, openPostgres, type PostgresHandle } from './engine/postgres/pool.js';
import { firstNames, missingFrom, pgColumns, sqliteColumns } from './engine/schema-gap.js';
import { closeDatabase, type DatabaseHandle, DatabaseOpenError, openDatabase } from './engine/sqlite/connection.js';
import { applyMigrations, changedMigrations, MigrationError } from './engine/sqlite/migrate.js';
import { unavailableFrom } from './engine/sqlite/store.js';
import { refuseUnwritable } from './engine/sqlite/writable.js';
import { startRateLimitPrimary } from './http/load.js';
import { createHttpServer } from './http/server.js';
import { createLogger } from './logger.js';
import { createRegistry, type Registry, RegistryError } from './model/registry.js';

/** The port is taken or the host cannot be bound; one line for the user. */
class ListenError extends Error {
  override name = 'ListenError';
}

type Database = DatabaseHandle | PostgresHandle;

/**
 * Closes either engine's handle (PostgreSQL: waits for connections in use, then ends the pool); for
 * SQLite, returns why its WAL could not be checkpointed, if it could not.
 */
async function close(database: Database): Promise<string | undefined> {
  if (isPostgres(database)) await closePostgres(database);
  else return closeDatabase(database);
  return undefined;
}

/** `host:port`, an IPv6 address bracketed as in a URL (`[::1]:3000`). */
const hostPort = ({ host, port }: { host: string; port: number }) => `${isIPv6(host) ? `[${host}]` : host}:${port}`;

/** Says which applied migrations were edited after they ran: served all the same, but the files no longer say what the database holds. */
function warnChanged(logger: Logger, database: string, changed: string[]): void {
  if (changed.length === 0) return;
  logger.warn(
    { database, changed },
    `${changed.length} applied migration(s) changed since they ran (another file than the one applied): a database migrated from these files would differ from this one`,
  );
}

/**
 * Says what the migrations did; when the schema declares tables or columns that the database still lacks
 * (no migration made them: one was not generated), says that instead of "up to date", in one warning line.
 */
function reportMigrated(logger: Logger, fields: Record<string, unknown>, applied: string[], missing: string[]): void {
  if (applied.length > 0) logger.info({ ...fields, applied }, `applied ${applied.length} migration(s)`);
  if (missing.length > 0) {
    logger.warn(
      { ...fields, missing },
      `the schema declares what no migration made (${firstNames(missing)}): run npm run db:generate, then restart; until then /readyz answers 503`,
    );
  } else if (applied.length === 0) logger.info({ ...fields, applied }, 'database is up to date');
}

/** Connects to PostgreSQL and applies its pending migrations (one instance at a time: an advisory lock). */
async function migratePostgres(url: string, config: Config, logger: Logger, registry: Registry): Promise<PostgresHandle> {
  const database = openPostgres(url, postgresOptions(config));
  try {
    await refuseForeignPostgres(database, registry.resources, config.databaseAdopt);
    const { applied } = await applyPgMigrations(database, undefined, (client) => installPgOn(client, registry.resources));
    await loadPostgresStore(database);
    reportMigrated(logger, { database: database.url }, applied, missingFrom(registry.resources, await pgColumns(database.pool)));
    warnChanged(logger, database.url, await pgChangedMigrations(database));
    return database;
  } catch (error) {
    await closePostgres(database);
    if (error instanceof MigrationError) throw error;
    throw new DatabaseOpenError(`cannot use the PostgreSQL database ${database.url}: ${(error as Error).message}`);
  }
}

/**
 * Opens the database and applies pending migrations, logging what was applied; the change feed's
 * triggers are made in the migrations' transaction (on the tables they made, too). Refuses first a
 * database of other tables that this schema never migrated (DATABASE_ADOPT), and a SQLite file or
 * folder this process cannot write.
 */
async function migrate(config: Config, logger: Logger, registry: Registry): Promise<Database> {
  if (config.databaseUrl) return migratePostgres(config.databaseUrl, config, logger, registry);
  // Before the file is opened: opening turns it to WAL, and a refused file is left as it was.
  refuseForeignSqlite(config.databasePath, registry.resources, config.databaseAdopt);
  refuseUnwritable(config.databasePath);
  const database = openDatabase(config.databasePath, config.databaseSynchronous);
  try {
    const { applied, backup } = await applyMigrations(database, undefined, undefined, (sqlite) =>
      installSqlite(sqlite, registry.resources),
    );
    const missing = missingFrom(registry.resources, sqliteColumns(database.sqlite, registry.resources));
    reportMigrated(logger, { database: config.databasePath, backup }, applied, missing);
    warnChanged(logger, config.databasePath, changedMigrations(database));
    return database;
  } catch (error) {
    closeDatabase(database);
    throw error;
  }
}

/**
 * Why HOST could not be looked up: no name server answered (EAI_AGAIN: offline, or DNS not up yet), which
 * says nothing of HOST itself, or the answer was that it names no address (ENOTFOUND).
 */
const unresolved = (code: string | undefined) =>
  code === 'EAI_AGAIN' ? 'no name server answered for HOST: check the network, or give HOST as an IP address' : 'HOST names no address';

/**
 * What is refused before any database is opened, migrated or backed up (by one process, or by the
 * cluster primary before it forks): a HOST that names no address, and a schema the service cannot
 * serve (colliding routes, a table named like a service path). Returns the schema's registry.
 */
async function checkBeforeMigrating(config: Config): Promise<Registry> {
  await lookup(config.host).catch((error: NodeJS.ErrnoException) => {
    throw new ListenError(`cannot listen on ${hostPort(config)}: ${error.code ?? error.message} (${unresolved(error.code)})`);
  });
  return createRegistry(schema);
}

/**
 * A second signal this soon after the first is the first one delivered twice, not a person asking again: a
 * terminal's Ctrl-C reaches its whole process group, so a watcher (`npm run dev`'s tsx watch) and this process
 * both get it, and the watcher relays it.
 */
const REPEATED_SIGNAL_MS = 200;

/** Serves HTTP in this process until told to stop (a signal, or the cluster primary). */
async function serve(config: Config, logger: Logger): Promise<void> {
  const registry = await checkBeforeMigrating(config);
  const database = await migrate(config, logger, registry);
  let app: ReturnType<typeof createApp>;
  try {
    app = createApp({ database, config, logger, schema, registry });
  } catch (error) {
    await close(database);
    // The store's statements and the change feed's triggers are made here: SQLite may refuse (locked, read-only).
    if (unavailableFrom(error)) {
      throw new DatabaseOpenError(`cannot set up the database for serving: ${(error as Error).message}`, { cause: error });
    }
    throw error;
  }
  try {
    await app.ready;
  } catch (error) {
    app.close();
    await close(database);
    throw new DatabaseOpenError(`cannot set up the database for serving: ${(error as Error).message}`);
  }
  const server = createHttpServer(app.handler, config, logger);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, resolve);
    });
  } catch (error) {
    app.close();
    await close(database);
    const { code, message } = error as NodeJS.ErrnoException;
    throw new ListenError(`cannot listen on ${hostPort(config)}: ${code ?? message}`);
  }
  /**
   * Stop accepting, answer /readyz with 503, let requests in flight finish (bounded), then
   * checkpoint the WAL, close the database and exit 0. A second signal stops at once.
   */
  let stopping = false;
  let stopBegan = 0;
  let stopped = false;
  const stop = (reason: string) => {
    // Once stopped, nothing is left to drop: a late signal (a watcher's relay of the same Ctrl-C) ends the process
    // as the graceful stop did, should anything still hold the event loop open.
    if (stopped) process.exit(process.exitCode ?? 0);
    if (stopping && performance.now() - stopBegan < REPEATED_SIGNAL_MS) return;
    if (stopping) {
      logger.warn({ reason }, 'second signal: stopping now, dropping requests in flight');
      if (!isPostgres(database)) closeDatabase(database); // PostgreSQL rolls back what the dropped connections held
      process.exit(1);
    }
    stopping = true;
    stopBegan = performance.now();
    logger.info({ reason, graceMs: config.shutdownTimeoutMs }, 'stopping: no new connections, finishing requests in flight');
    app.beginShutdown();
    const force = setTimeout(() => {
      logger.warn('requests still in flight after the grace period; closing their connections');
      server.closeAllConnections();
    }, config.shutdownTimeoutMs).unref();
    server.close(async () => {
      clearTimeout(force);
      app.close();
      const unchecked = await close(database);
      stopped = true;
      if (isPostgres(database)) logger.info('stopped: connection pool drained and closed');
      else if (unchecked)
        logger.warn(
          { reason: unchecked },
          'stopped: database closed; its WAL could not be checkpointed (it is replayed at the next start)',
        );
      else logger.info('stopped: database checkpointed and closed');
      process.exitCode = 0;
      if (cluster.isWorker) process.disconnect();
    });
    server.closeIdleConnections();
  };
  if (cluster.isWorker) {
    // The primary coordinates stopping; a terminal's Ctrl-C also reaches workers, so ignore it here.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => {});
    process.on('message', (message) => message === 'shutdown' && stop('primary'));
    process.on('disconnect', () => stopping || stop('primary gone'));
  } else {
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  }
  // Said last: whoever waits for this line (a test, a supervisor) may signal at once, and the line is
  // written by another thread, which may run before this one registers its handlers.
  const address = server.address();
  const where = typeof address === 'object' && address ? `http://${hostPort({ host: config.host, port: address.port })}` : String(address);
  logger.info({ address: where, database: isPostgres(database) ? database.url : config.databasePath }, `restable listening on ${where}`);
}

/** How long the primary waits before replacing a worker that died. */
const REFORK_DELAY_MS = 1000;

/** The cluster primary: migrates once, forks the workers, replaces crashed ones, stops them all. */
async function supervise(config: Config, logger: Logger): Promise<void> {
  const registry = await checkBeforeMigrating(config);
  await close(await migrate(config, logger, registry));
  if (config.rateLimit) startRateLimitPrimary();
  let stopping = false;
  /** Whether a worker has served: until one has, a worker that dies means start-up itself fails. */
  let listened = false;
  let failed = false;
  cluster.on('listening', (worker) => {
    listened = true;
    // A worker still starting when the stop began had no handler for the primary's word yet: told again now.
    if (stopping) worker.send('shutdown');
  });
  // Workers start together and fail alike (a bad HOST): the first one's line is printed, once.
  let reported = false;
  cluster.on('message', (_worker, message: { startFailure?: unknown }) => {
    if (typeof message?.startFailure !== 'string') return;
    if (listened) logger.error(message.startFailure);
    else if (!reported) console.error(message.startFailure);
    reported = true;
  });
  cluster.on('exit', (worker, code, signal) => {
    if (!listened && !stopping) {
      // The worker said why (a bad HOST, a port in use): a new one would only fail again, forever.
      stopping = true;
      failed = true;
      process.exitCode = 1;
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGKILL');
    } else if (!stopping) {
      // After a pause: a worker that cannot start (its database unreachable) must not be re-forked in a tight loop.
      logger.error({ pid: worker.process.pid, code, signal }, `a worker died; starting another in ${REFORK_DELAY_MS} ms`);
      setTimeout(() => stopping || cluster.fork(), REFORK_DELAY_MS);
    } else if (Object.keys(cluster.workers ?? {}).length === 0 && !failed) {
      logger.info('all workers stopped');
      process.exitCode = hurried ? 1 : 0;
    }
  });
  for (let i = 0; i < config.workers; i++) cluster.fork();
  logger.info({ workers: config.workers }, `started ${config.workers} workers`);
  /** A second signal: each worker is told again, which stops it at once (exit 1), as one process stops. */
  let hurried = false;
  const stop = (signal: string) => {
    if (stopping && (hurried || failed)) return;
    if (stopping) {
      hurried = true;
      process.exitCode = 1;
      logger.warn({ signal }, 'second signal: stopping the workers now, dropping requests in flight');
    } else {
      stopping = true;
      logger.info({ signal }, 'stopping the workers');
    }
    for (const worker of Object.values(cluster.workers ?? {})) worker?.send('shutdown');
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

async function main(): Promise<void> {
  const config = parseConfig();
  const logger = createLogger(config).child(cluster.isWorker ? { worker: cluster.worker?.id } : {});
  if (config.workers > 1 && cluster.isPrimary) return supervise(config, logger);
  return serve(config, logger);
}

main().catch((error: unknown) => {
  const expected = [ConfigError, RegistryError, MigrationError, DatabaseOpenError, ListenError];
  if (!expected.some((kind) => error instanceof kind)) throw error;
  const line = `restable: ${(error as Error).message}`;
  // A worker's line goes to the primary, which prints it once for all of them.
  if (cluster.isWorker && process.send) process.send({ startFailure: line }, () => process.exit(1));
  else {
    console.error(line);
    process.exit(1);
  }
});

// Boot only: config → open db → migrate → create app → listen; and the graceful stop on
// SIGTERM/SIGINT. A start-up failure prints one line and exits 1; nothing else calls process.exit.
import { createApp } from './app.js';
import { ConfigError, parseConfig } from './config.js';
import { closeDatabase, openDatabase } from './db/client.js';
import { applyMigrations, MigrationError } from './db/migrate.js';
import { createLogger } from './logger.js';
import { RegistryError } from './resources.js';
import { createHttpServer } from './server.js';

async function start(): Promise<void> {
  const config = parseConfig();
  const logger = createLogger(config);
  const database = openDatabase(config.databasePath);
  let app: ReturnType<typeof createApp>;
  try {
    const { applied, backup } = await applyMigrations(database);
    logger.info(
      { database: config.databasePath, applied, backup },
      applied.length ? `applied ${applied.length} migration(s)` : 'database is up to date',
    );
    app = createApp({ database, config, logger });
  } catch (error) {
    closeDatabase(database);
    throw error;
  }

  const server = createHttpServer(app.handler, config);
  server.listen(config.port, config.host, () => {
    const address = server.address();
    const where = typeof address === 'object' && address ? `http://${config.host}:${address.port}` : String(address);
    logger.info({ address: where, database: config.databasePath }, `restable listening on ${where}`);
  });

  /**
   * Stop accepting, answer /readyz with 503, let requests in flight finish (bounded), then
   * checkpoint the WAL, close the database and exit 0. A second signal stops at once.
   */
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: stopping now, dropping requests in flight');
      closeDatabase(database);
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, graceMs: config.shutdownTimeoutMs }, 'stopping: no new connections, finishing requests in flight');
    app.beginShutdown();
    const force = setTimeout(() => {
      logger.warn('requests still in flight after the grace period; closing their connections');
      server.closeAllConnections();
    }, config.shutdownTimeoutMs).unref();
    server.close(() => {
      clearTimeout(force);
      app.close();
      closeDatabase(database);
      logger.info('stopped: database checkpointed and closed');
      logger.flush?.();
      process.exitCode = 0;
    });
    server.closeIdleConnections();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

start().catch((error: unknown) => {
  if (!(error instanceof ConfigError || error instanceof RegistryError || error instanceof MigrationError)) throw error;
  console.error(`restable: ${error.message}`);
  process.exit(1);
});

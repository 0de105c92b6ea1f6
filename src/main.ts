// Boot only: config → open db → migrate → create app → listen; and a clean stop on SIGINT/SIGTERM.
// Any start-up failure prints one line and exits 1; nothing else in src/ calls process.exit.
import { createApp } from './app.js';
import { ConfigError, parseConfig } from './config.js';
import { closeDatabase, openDatabase } from './db/client.js';
import { applyMigrations } from './db/migrate.js';
import { createLogger } from './logger.js';
import { RegistryError } from './resources.js';
import { createHttpServer } from './server.js';

/** How long in-flight requests may take to finish after a stop signal. */
const SHUTDOWN_GRACE_MS = 10_000;

function start(): void {
  const config = parseConfig();
  const logger = createLogger(config);
  const database = openDatabase(config.databasePath);
  const applied = applyMigrations(database);
  logger.info(
    { database: config.databasePath, applied },
    applied.length ? `applied ${applied.length} migration(s)` : 'database is up to date',
  );

  const app = createApp({ database, config, logger });
  const server = createHttpServer(app.handler, config);
  server.listen(config.port, config.host, () => {
    const address = server.address();
    const where = typeof address === 'object' && address ? `http://${config.host}:${address.port}` : String(address);
    logger.info({ address: where, database: config.databasePath }, `restable listening on ${where}`);
  });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: no new connections, finishing requests in flight');
    const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    server.close(() => {
      clearTimeout(force);
      app.close();
      closeDatabase(database);
      logger.info('stopped');
      process.exitCode = 0;
    });
    server.closeIdleConnections();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

try {
  start();
} catch (error) {
  if (!(error instanceof ConfigError || error instanceof RegistryError)) throw error;
  console.error(`restable: ${error.message}`);
  process.exit(1);
}

// Creates the service's pino logger: JSON lines on stdout at the configured level.
// Errors are serialized with their cause chain; nothing else in the code configures logging.
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

export function createLogger(config: Pick<Config, 'logLevel'>): Logger {
  return pino({ level: config.logLevel, base: { service: 'restable' } });
}

// The service's pino logger and its per-request log line (pino-http): JSON lines on stdout at
// the configured level, human-readable on a terminal. Nothing else configures logging.
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { type Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import type { Config } from './config.js';

/** JSON lines, or pino-pretty's colourful lines when stdout is a terminal (a person is reading). */
export function createLogger(config: Pick<Config, 'logLevel'>, pretty = Boolean(process.stdout.isTTY)): Logger {
  const options = { level: config.logLevel, base: { service: 'restable' } };
  return pretty ? pino({ ...options, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } }) : pino(options);
}

/**
 * One line per finished request: request id, method, path, status and duration (ms). Headers are
 * never logged, so tokens cannot leak. 5xx lines are errors, 4xx and 503 (not ready) warnings.
 */
export function createRequestLogger(logger: Logger) {
  return pinoHttp({
    logger,
    genReqId: (req: IncomingMessage & { id?: string }) => req.id ?? '',
    quietReqLogger: true,
    customAttributeKeys: { reqId: 'requestId', responseTime: 'durationMs' },
    serializers: {
      req: (req: { method: string; url: string }) => ({ method: req.method, path: req.url.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ status: res.statusCode }),
    },
    wrapSerializers: false,
    customLogLevel: (_req: IncomingMessage, res: ServerResponse, error?: Error) =>
      error || (res.statusCode >= 500 && res.statusCode !== 503) ? 'error' : res.statusCode >= 400 ? 'warn' : 'info',
    customSuccessMessage: (req: IncomingMessage, res: ServerResponse) => `${req.method} ${req.url?.split('?')[0]} ${res.statusCode}`,
    customErrorMessage: (req: IncomingMessage, res: ServerResponse) => `${req.method} ${req.url?.split('?')[0]} ${res.statusCode}`,
  });
}

// The only reader of process.env: one table of variables, each parsed and validated once at start-up.
// A bad value is a ConfigError whose message is the single line main.ts prints before exiting 1.
import { z } from 'zod';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Variables that are reserved by the contract but whose feature has not landed yet. */
const NOT_YET_SUPPORTED = ['AUTH_TOKEN', 'AUTH_READ_TOKEN', 'CORS_ORIGINS'] as const;

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce
  .number()
  .int()
  .min(1)
  .max(2 ** 31 - 1);

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
  maxBodyBytes: {
    env: 'MAX_BODY_BYTES',
    default: '1048576',
    doc: 'largest accepted request body, in bytes (413 above)',
    schema: positiveInt,
  },
  logLevel: { env: 'LOG_LEVEL', default: 'info', doc: `one of ${LOG_LEVELS.join(', ')}`, schema: z.enum(LOG_LEVELS) },
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
  for (const name of NOT_YET_SUPPORTED) {
    if (env[name] !== undefined) {
      throw new ConfigError(`${name} is reserved for a feature this version does not have yet; unset it to start`);
    }
  }
  const config: Record<string, unknown> = {};
  for (const [key, variable] of Object.entries(VARIABLES)) {
    const raw = env[variable.env] === undefined || env[variable.env] === '' ? variable.default : env[variable.env];
    const result = variable.schema.safeParse(raw);
    if (!result.success) {
      throw new ConfigError(`${variable.env}=${JSON.stringify(raw)} is invalid: expected ${variable.doc}`);
    }
    config[key] = result.data;
  }
  return config as Config;
}

// Unit suite of the configuration (src/config.ts): what each refusal says and the rules between
// variables (the page that documents them is checked by config-doc.test.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { accepted, ConfigError, parseConfig, VARIABLES } from '../../src/config.js';

/** The message of the ConfigError parseConfig throws for `env`. */
function refusal(env: Record<string, string>): string {
  try {
    parseConfig(env);
  } catch (error) {
    assert.instance(error, ConfigError);
    return (error as Error).message;
  }
  throw new Error(`${JSON.stringify(env)} was accepted`);
}

const test = suite('configuration');

test('a value out of range is refused in one line that states the range it broke', () => {
  const cases: [string, string, string][] = [
    ['PORT', '65536', 'an integer from 0 to 65535'],
    ['MAX_BODY_BYTES', '0', 'an integer from 1 to 2147483647'],
    ['CHANGES_MAX_STREAMS', '0', 'an integer from 1 to 100000'],
    ['CHANGES_STREAM_BUFFER_BYTES', '4095', 'an integer from 4096 to 2147483647'],
    ['WORKERS', '65', 'an integer from 1 to 64'],
    ['BATCH_TIMEOUT_MS', '0', 'an integer from 1 to 2147483647'],
    ['MAX_IN_FLIGHT', '0', 'an integer from 1 to 2147483647'],
    ['PG_POOL_SIZE', '1001', 'an integer from 1 to 1000'],
    ['SHUTDOWN_TIMEOUT_MS', '2147483648', 'an integer from 1 to 2147483647'],
    ['CHANGES_HEARTBEAT_MS', '99', 'an integer from 100 to 15000'],
    ['RATE_LIMIT_WINDOW_S', '86401', 'an integer from 1 to 86400'],
    ['CHANGES_RETENTION_HOURS', '.5', 'a number above 0 and at most 87600, in decimal digits with at most 6 after the point (0.5, not .5)'],
    [
      'CHANGES_RETENTION_HOURS',
      '0.5.',
      'a number above 0 and at most 87600, in decimal digits with at most 6 after the point (0.5, not .5)',
    ],
    [
      'CHANGES_RETENTION_HOURS',
      '000',
      'a number above 0 and at most 87600, in decimal digits with at most 6 after the point (0.5, not .5)',
    ],
    ['LOG_LEVEL', 'loud', 'one of fatal, error, warn, info, debug, trace, silent'],
    ['DATABASE_SYNCHRONOUS', 'full', 'one of OFF, NORMAL, FULL, EXTRA'],
  ];
  for (const [name, value, range] of cases) {
    const message = refusal({ [name]: value });
    assert.ok(message.startsWith(`${name}=${JSON.stringify(value)} is invalid: expected ${range}. ${name}: `), message);
    assert.not.match(message, /\n/);
  }
  // At the bound itself, accepted.
  assert.is(parseConfig({ WORKERS: '64', PG_POOL_SIZE: '1000', CHANGES_STREAM_BUFFER_BYTES: '4096' }).workers, 64);
  assert.is(parseConfig({ SHUTDOWN_TIMEOUT_MS: '2147483647' }).shutdownTimeoutMs, 2 ** 31 - 1);
  // Leading zeros, as in every whole number.
  assert.is(parseConfig({ CHANGES_RETENTION_HOURS: '024' }).changesRetentionHours, 24);
  assert.is(parseConfig({ CHANGES_RETENTION_HOURS: '000.5' }).changesRetentionHours, 0.5);
});

test('every variable says what it accepts', () => {
  for (const variable of Object.values(VARIABLES)) assert.ok(accepted(variable.schema).length > 0, variable.env);
});

test('a blank HOST is refused at once, not at listen', () => {
  for (const host of [' ', '\t', ' localhost']) {
    assert.ok(refusal({ HOST: host }).startsWith(`HOST=${JSON.stringify(host)} is invalid: expected a host name or IP address`));
  }
  assert.is(parseConfig({ HOST: '' }).host, '127.0.0.1');
  assert.is(parseConfig({ HOST: '::1' }).host, '::1');
  // Written as in a URL, an IPv6 address is the address.
  assert.is(parseConfig({ HOST: '[::1]' }).host, '::1');
});

test('secrets are never printed, not even a bad one', () => {
  for (const name of ['AUTH_TOKEN', 'AUTH_READ_TOKEN', 'CURSOR_SECRET', 'DATABASE_URL']) {
    const message = refusal({ [name]: 'short secret' });
    assert.ok(message.startsWith(`${name}=(hidden) is invalid: expected `), message);
    assert.not.match(message, /short secret/);
  }
});

test('HEADERS_TIMEOUT_MS left unset follows a shorter REQUEST_TIMEOUT_MS; set above it, it is refused', () => {
  const alone = parseConfig({ REQUEST_TIMEOUT_MS: '5000' });
  assert.is(alone.headersTimeoutMs, 5000);
  assert.is(alone.requestTimeoutMs, 5000);
  assert.is(parseConfig({}).headersTimeoutMs, 10000);
  assert.is(parseConfig({ REQUEST_TIMEOUT_MS: '60000' }).headersTimeoutMs, 10000);
  assert.is(parseConfig({ REQUEST_TIMEOUT_MS: '5000', HEADERS_TIMEOUT_MS: '' }).headersTimeoutMs, 5000);
  assert.is(
    refusal({ REQUEST_TIMEOUT_MS: '5000', HEADERS_TIMEOUT_MS: '6000' }),
    'HEADERS_TIMEOUT_MS (6000) must not exceed REQUEST_TIMEOUT_MS (5000)',
  );
  assert.is(
    refusal({ MAX_BODY_BYTES: '20000000' }),
    'MAX_BODY_BYTES_IN_FLIGHT (16777216) must be at least MAX_BODY_BYTES (20000000), or no body of the largest size could ever be read',
  );
});

test('CORS_ORIGINS takes IPv6 literal origins, written as browsers write them', () => {
  const { corsOrigins } = parseConfig({
    CORS_ORIGINS:
      'http://[::1]:3000, HTTP://[0:0::1], https://[::FFFF:127.0.0.1]:8443,http://App.Example.com,http://127.0.0.1:5173,http://localhost,https://x-1.a9.example:8443',
  });
  assert.equal(corsOrigins, [
    'http://[::1]:3000',
    'http://[::1]',
    'https://[::ffff:7f00:1]:8443',
    'http://app.example.com',
    'http://127.0.0.1:5173',
    'http://localhost',
    'https://x-1.a9.example:8443',
  ]);
  for (const bad of [
    'http://[::g]:3000',
    'http://[]',
    'http://[::1',
    'http://::1',
    'ftp://[::1]',
    'http://[::1]/',
    'http://a.example:99999',
    'http://a.example:0',
    'http://..',
    'http://-',
    'http://a..example',
    'http://-a.example',
    'http://a-.example',
    'http://999.999.999.999',
    'http://1.2.3',
    'http://a.example.5',
    `http://${'a'.repeat(64)}.example`,
  ]) {
    assert.match(refusal({ CORS_ORIGINS: bad }), /^CORS_ORIGINS=.* is invalid: expected \* or a comma-separated list of origins/, bad);
  }
});

test('DATABASE_PATH: white space at either end, or a blank one, is refused (SQLite would open another file, or a temporary database)', () => {
  for (const bad of [' ', '  app.db', 'app.db ', '\tdata/app.db']) {
    assert.match(
      refusal({ DATABASE_PATH: bad }),
      /^DATABASE_PATH=.* is invalid: expected a file path, without white space at either end/,
      JSON.stringify(bad),
    );
  }
  assert.is(parseConfig({ DATABASE_PATH: 'my data/app.db' }).databasePath, 'my data/app.db');
});

test('DATABASE_PATH=:memory: is refused with WORKERS > 1 (each worker would have a database of its own), taken with one', () => {
  assert.is(
    refusal({ DATABASE_PATH: ':memory:', WORKERS: '2' }),
    'DATABASE_PATH=:memory: cannot be shared by WORKERS=2: each worker would serve an in-memory database of its own; use a file, or WORKERS=1',
  );
  assert.is(parseConfig({ DATABASE_PATH: ':memory:' }).databasePath, ':memory:');
  assert.is(parseConfig({ DATABASE_PATH: ':memory:', WORKERS: '2', DATABASE_URL: 'postgres://h/db' }).workers, 2);
});

test.run();

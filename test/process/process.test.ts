// The real entry points as processes: data survives a restart, SIGTERM/SIGINT stop cleanly with
// exit 0, a bad configuration stops start-up with one line and exit 1, and `migrate` reports.
// They serve the tests' pet shop (see spawnService), whatever src/db/schema.ts holds.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  installPetShopWith,
  PET_SHOP_MIGRATION_TAGS,
  type Process,
  ROOT,
  request,
  runScript,
  runService,
  spawnService,
  tempDir,
} from '../support/helpers.js';

const test = suite('process');

/** The request log lines a spawned service wrote, parsed (pino's own lines and anything on stderr left out). */
const requestLines = (service: Process) =>
  service
    .output()
    .split('\n')
    .filter((line) => line.includes('"requestId"'))
    .map((line) => JSON.parse(line));

test('data survives a restart; SIGTERM and SIGINT end the process with exit code 0', async () => {
  const temp = tempDir();
  const env = { DATABASE_PATH: join(temp.dir, 'data', 'app.db') };
  const services: Process[] = [];
  try {
    const first = await spawnService(env);
    services.push(first);
    const made = await request(first.url, 'POST', '/users', { body: { name: 'Kept', email: 'kept@example.com' } });
    assert.is(made.status, 201);
    assert.is(await first.stop('SIGTERM'), 0);

    const second = await spawnService(env);
    services.push(second);
    const read = await request(second.url, 'GET', made.headers.get('location') as string);
    assert.is(read.status, 200);
    assert.equal(read.body, made.body);
    assert.is(await second.stop('SIGINT'), 0);
    assert.match(second.output(), /database is up to date/);
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    temp.remove();
  }
});

test('the request log: one whole JSON line per request on stdout, escaped where it must be', async () => {
  const temp = tempDir();
  const service = await spawnService({ DATABASE_PATH: join(temp.dir, 'app.db') });
  try {
    const asked = [
      { id: 'plain-1', path: '/users/1' },
      { id: 'quote"and\\backslash', path: '/users/2' },
      { id: 'plain-3', path: '/users/%C3%A9t%C3%A9' },
      { id: 'plain-4', path: '/no-such-collection' },
    ];
    for (const { id, path } of asked) {
      const reply = await request(service.url, 'GET', path, { headers: { 'X-Request-Id': id } });
      assert.is(reply.status, 404);
    }
    // Lines go out in batches (every 100 ms, or 128 lines); a graceful stop writes what is left.
    assert.is(await service.stop('SIGTERM'), 0);
    const lines = requestLines(service);
    for (const { id, path } of asked) {
      const line = lines.find((l) => l.requestId === id);
      assert.ok(line, `a line for ${id}`);
      assert.is(line.level, 40);
      assert.type(line.time, 'number');
      assert.is(line.service, 'restable');
      assert.equal(line.req, { method: 'GET', path });
      assert.equal(line.res, { status: 404 });
      assert.type(line.durationMs, 'number');
      assert.is(line.msg, `GET ${path} 404`);
      assert.equal(Object.keys(line), ['level', 'time', 'service', 'requestId', 'req', 'res', 'durationMs', 'msg']);
    }
  } finally {
    await service.stop();
    temp.remove();
  }
});

test('the request log: more requests than a batch holds, each with exactly one line', async () => {
  const temp = tempDir();
  const service = await spawnService({ DATABASE_PATH: join(temp.dir, 'app.db') });
  try {
    // 300 requests, 50 at a time: full batches of 128 lines are written as they fill, the rest at the stop.
    const ids = Array.from({ length: 300 }, (_, i) => `many-${i}`);
    for (let start = 0; start < ids.length; start += 50) {
      const replies = await Promise.all(
        ids.slice(start, start + 50).map((id) => request(service.url, 'GET', '/users', { headers: { 'X-Request-Id': id } })),
      );
      for (const reply of replies) assert.is(reply.status, 200);
    }
    assert.is(await service.stop('SIGTERM'), 0);
    const lines = requestLines(service).filter((line) => line.requestId.startsWith('many-'));
    assert.equal(lines.map((line) => line.requestId).sort(), [...ids].sort());
    for (const line of lines) {
      assert.is(line.level, 30);
      assert.equal(line.req, { method: 'GET', path: '/users' });
      assert.equal(line.res, { status: 200 });
    }
  } finally {
    await service.stop();
    temp.remove();
  }
});

test('bad configuration stops start-up with one clear line and exit code 1', async () => {
  for (const [name, value] of [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['MAX_BODY_BYTES', '0'],
    ['LOG_LEVEL', 'loud'],
    ['AUTH_TOKEN', 'secret'],
    ['AUTH_READ_TOKEN', 'read-token-without-full-one'],
    ['CORS_ORIGINS', 'ftp://files.example.com'],
    ['HEADERS_TIMEOUT_MS', '-5'],
    ['SHUTDOWN_TIMEOUT_MS', 'soon'],
    ['PORT', '0x10'],
    ['MAX_BODY_BYTES', '1e3'],
    ['RATE_LIMIT', '1e2'],
    ['MAX_IN_FLIGHT', ' 12'],
    ['WORKERS', '2.0'],
    ['WORKERS', '65'],
    ['HOST', ' '],
  ] as const) {
    const { code, output } = await runService({ [name]: value, DATABASE_PATH: ':memory:' });
    assert.is(code, 1, `${name}=${value}`);
    const lines = output.trim().split('\n');
    assert.is(lines.length, 1, output);
    assert.match(lines[0] as string, new RegExp(`^restable: ${name}`));
    assert.not.match(output, /secret/);
  }
});

test('SIGTERM to `npm start` reaches the service: it stops gracefully and leaves nothing listening', async () => {
  const temp = tempDir();
  const database = join(temp.dir, 'app.db');
  // npm runs the script through sh, which `exec` replaces by node: the signal npm passes on reaches the service.
  // --ignore-scripts: prestart would build dist/ again, under the other suites' feet.
  const npm = spawn('npm', ['start', '--silent', '--ignore-scripts'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_PATH: database, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    let output = '';
    const url = await new Promise<string>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk;
        const match = /listening on (http:\/\/[\d.:]+)/.exec(output);
        if (match) resolve(match[1] as string);
      };
      npm.stdout.on('data', onData);
      npm.stderr.on('data', onData);
      npm.on('exit', (code) => reject(new Error(`npm start exited with ${code}:\n${output}`)));
    });
    assert.is((await request(url, 'GET', '/healthz')).status, 200);
    // npm exits once its child has; 'close' comes after the last of the child's output (never, while an orphan holds it).
    const closed = new Promise((resolve) => npm.on('close', resolve));
    npm.kill('SIGTERM');
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    assert.match(output, /"reason":"SIGTERM"/);
    assert.match(output, /stopped: database checkpointed and closed/);
    const gone = await request(url, 'GET', '/healthz').then(
      () => false,
      () => true,
    );
    assert.ok(gone, 'the service still answers after npm start was told to stop');
  } finally {
    if (npm.exitCode === null) npm.kill('SIGKILL');
    // Without `exec`, the service outlives npm: found by its database's path in its environment, it is stopped here.
    for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
      try {
        if (readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`DATABASE_PATH=${database}\0`)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already, or not ours to read
      }
    }
    temp.remove();
  }
});

/**
 * The refusal of a HOST that is no address (999.1.1.1 is looked up as a name): a name server's answer that it
 * names none, or, offline, that no name server answered; either says which, in one line.
 */
const NO_ADDRESS =
  /^restable: cannot listen on 999\.1\.1\.1:0: (ENOTFOUND \(HOST names no address\)|EAI_AGAIN \(no name server answered for HOST: check the network, or give HOST as an IP address\))$/;

test('a database that cannot be opened, or an address that cannot be bound, is one line and exit code 1', async () => {
  const temp = tempDir();
  const occupant = await spawnService({ DATABASE_PATH: join(temp.dir, 'a.db') });
  try {
    const port = new URL(occupant.url).port;
    const cases: [Record<string, string>, RegExp][] = [
      [{ DATABASE_PATH: temp.dir }, /^restable: cannot open the database .*: unable to open database file$/],
      [{ DATABASE_PATH: '/etc/passwd' }, /^restable: cannot open the database \/etc\/passwd: file is not a database$/],
      [
        { DATABASE_PATH: join(temp.dir, 'b.db'), PORT: port },
        new RegExp(`^restable: cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE$`),
      ],
      [{ DATABASE_PATH: join(temp.dir, 'c.db'), HOST: '999.1.1.1' }, NO_ADDRESS],
      // With workers, a worker that cannot listen before any has served stops start-up (it is not re-forked forever).
      [{ DATABASE_PATH: join(temp.dir, 'd.db'), HOST: '999.1.1.1', WORKERS: '2' }, NO_ADDRESS],
      // A directory that cannot be made (node's recursive mkdirSync never returns under /proc).
      [{ DATABASE_PATH: '/proc/restable-nowhere/x.db' }, /^restable: cannot open the database \/proc\/restable-nowhere\/x\.db: /],
    ];
    for (const [env, line] of cases) {
      const { code, output } = await runService({ LOG_LEVEL: 'silent', ...env });
      assert.is(code, 1, JSON.stringify(env));
      assert.match(output.trim(), line);
      assert.is(output.trim().split('\n').length, 1, output);
    }
    // A database another process holds the write lock of (up to date, so nothing to migrate): the feed's triggers
    // cannot be made, and start-up stops with one line, not a stack trace.
    const locked = join(temp.dir, 'g.db');
    assert.is(await (await spawnService({ DATABASE_PATH: locked })).stop('SIGTERM'), 0);
    const holder = new Database(locked);
    holder.exec('BEGIN IMMEDIATE');
    try {
      const { code, output } = await runService({ LOG_LEVEL: 'silent', DATABASE_PATH: locked });
      assert.is(code, 1, output);
      assert.is(output.trim(), 'restable: cannot set up the database for serving: database is locked');
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    // A HOST that names no address is refused before the database is made, even at the default log level.
    for (const workers of ['1', '2']) {
      const { code, output } = await runService({ DATABASE_PATH: join(temp.dir, `e${workers}.db`), HOST: '999.1.1.1', WORKERS: workers });
      assert.is(code, 1);
      assert.is(output.trim().split('\n').length, 1, output);
      assert.not.ok(existsSync(join(temp.dir, `e${workers}.db`)), `WORKERS=${workers}`);
    }
    // Passwords in DATABASE_URL, in its user info or as query parameters, are never printed.
    const secret = await runService({ DATABASE_URL: 'postgres://u:SECRET1@127.0.0.1:1/db?password=SECRET2&sslpassword=SECRET3' });
    assert.is(secret.code, 1);
    assert.match(
      secret.output,
      /^restable: cannot use the PostgreSQL database postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/db\?password=\*\*\*&sslpassword=\*\*\*: /,
    );
    assert.not.match(secret.output, /SECRET/);
    // A schema the service cannot serve is refused before a database is made or migrated for it.
    const colliding = await installPetShopWith(
      "import { sqliteTable as collidingTable, integer as collidingInteger } from 'drizzle-orm/sqlite-core';\n" +
        "export const healthz = collidingTable('healthz', { id: collidingInteger('id').primaryKey() });",
    );
    const refused = await runScript('main.js', { DATABASE_PATH: join(temp.dir, 'f.db') }, [], colliding);
    assert.is(refused.code, 1);
    assert.match(refused.output.trim(), /^restable: table "healthz" collides with the service path \/healthz; rename the table$/);
    assert.not.ok(existsSync(join(temp.dir, 'f.db')));
    // npm run migrate refuses it alike, in one line (no stack trace), before the file is made.
    const migrateRefused = await runScript('cli/migrate.js', { DATABASE_PATH: join(temp.dir, 'f.db') }, [], colliding);
    assert.is(migrateRefused.code, 1);
    assert.match(migrateRefused.output.trim(), /^migrate: table "healthz" collides with the service path \/healthz; rename the table$/);
    assert.not.ok(existsSync(join(temp.dir, 'f.db')));
  } finally {
    await occupant.stop();
    temp.remove();
  }
});

test('`npm run migrate` applies pending migrations and says which, then finds nothing to do', async () => {
  const temp = tempDir();
  const run = async () => {
    const { code, output } = await runScript('cli/migrate.js', { DATABASE_PATH: join(temp.dir, 'm.db') });
    assert.is(code, 0, output);
    return { stdout: output };
  };
  try {
    const first = await run();
    const list = PET_SHOP_MIGRATION_TAGS.map((tag) => `\n  ${tag}`).join('');
    assert.ok(first.stdout.includes(`applied ${PET_SHOP_MIGRATION_TAGS.length} migration(s):${list}`), first.stdout);
    const second = await run();
    assert.match(second.stdout, /up to date, nothing to apply/);
  } finally {
    temp.remove();
  }
});

test.run();

// `npm run dev` on a temp copy of the project: it serves from source, restarts on an edit of the schema, says which
// migration is missing and the command that writes it, and stops cleanly on SIGTERM.
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ROOT, withTempDir } from '../support/helpers.js';

/** The files `npm run dev` reads, copied; node_modules linked. */
function projectCopy(dir: string): void {
  for (const name of ['src', 'migrations', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, name), join(dir, name), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

/** `npm run dev` in `dir`, in a process group of its own as a terminal runs it, and its output so far. */
function startDev(dir: string): {
  child: ChildProcess;
  output: () => string;
  waitFor: (pattern: RegExp, from?: number) => Promise<RegExpExecArray>;
} {
  const child = spawn('npm', ['run', 'dev'], {
    cwd: dir,
    detached: true,
    env: { PATH: process.env.PATH, PORT: '0', DATABASE_PATH: join(dir, 'app.db') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk;
    for (const listener of listeners) listener();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  /** The first match of `pattern` in the output after offset `from`, once it is there. */
  const waitFor = (pattern: RegExp, from = 0) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output.slice(from));
        if (match) {
          listeners.delete(check);
          resolve(match);
        }
      };
      const kill = setTimeout(() => reject(new Error(`no ${pattern} within 90 s:\n${output}`)), 90_000);
      listeners.add(check);
      child.once('exit', () => reject(new Error(`npm run dev exited before ${pattern}:\n${output}`)));
      check();
      kill.unref();
    });
  return { child, output: () => output, waitFor };
}

const LISTENING = /restable listening on (http:\/\/[\d.:]+)/;

const dev = suite('npm run dev');

dev('serves from source, restarts on a schema edit saying what migration is missing, and stops on a Ctrl-C', async () => {
  await withTempDir(async (dir) => {
    projectCopy(dir);
    const { child, output, waitFor } = startDev(dir);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const first = (await waitFor(LISTENING))[1] as string;
      assert.is((await fetch(`${first}/pets`)).status, 200);
      // tsx watch starts the service only once its watchers are ready: the edit below is seen.
      const schema = join(dir, 'src', 'db', 'schema.ts');
      const from = output().length;
      writeFileSync(schema, readFileSync(schema, 'utf8').replace("ownerId: integer('owner_id')", "reader: text('reader'),\n    $&"));
      const second = (await waitFor(LISTENING, from))[1] as string;
      const drift = await waitFor(
        /dev: src\/db\/schema\.ts declares what no migration makes yet \(PostgreSQL and SQLite: (.*)\): (.*)\n/,
        from,
      );
      assert.is(drift[1], 'ALTER TABLE "pets" ADD COLUMN "reader" text;');
      assert.is(drift[2], 'run `npm run db:generate -- --name <what_changed>`; dev restarts by itself and applies it');
      // The source it serves is the edited one: the document lists the new field.
      const document = await (await fetch(`${second}/openapi.json`)).text();
      assert.match(document, '"reader"');
    } finally {
      // What a terminal's Ctrl-C does: SIGINT to the whole group, tsx watch and the service, which tsx watch relays it to too.
      process.kill(-(child.pid as number), 'SIGINT');
    }
    // npm's own exit on a signal is npm's (it ends by the signal): what counts is how the service stopped.
    await waitFor(/stopped: database checkpointed and closed/);
    await exited;
    assert.not.match(output(), 'second signal', 'the relayed signal is not taken for a second Ctrl-C');
  });
});

dev.run();

// The compiled service (dist/main.js) as a benchmark's own child process: started on a database the
// caller names, resolved once it listens, stopped with SIGTERM (and never left behind by this process).
import { spawn } from 'node:child_process';
import { START_ARGV } from './processes.js';

/**
 * Starts dist/main.js with `database` (DATABASE_PATH or DATABASE_URL) on a free port at LOG_LEVEL=info,
 * and resolves with its base URL once it listens. The request log goes on, unread.
 */
export async function startService(database: Record<string, string>): Promise<{ base: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, START_ARGV, {
    env: { ...process.env, ...database, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // A failed check ends this process: the service must not outlive it (it would hold the terminal's pipes open).
  const orphan = () => child.kill('SIGTERM');
  process.once('exit', orphan);
  child.once('exit', () => process.off('exit', orphan));
  const base = await new Promise<string>((resolve, reject) => {
    let out = '';
    const listen = (chunk: Buffer) => {
      out += chunk;
      const match = /listening on (http:\/\/[\d.:]+)/.exec(out);
      if (match) {
        child.stdout.off('data', listen);
        child.stdout.resume();
        resolve(match[1] as string);
      }
    };
    child.stdout.on('data', listen);
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  });
  return { base, stop: () => new Promise((resolve) => child.once('exit', () => resolve()).kill('SIGTERM')) };
}

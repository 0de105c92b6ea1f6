// What the development commands (generate, introspect) share: a refusal whose message says it all,
// and running a command's main as its own process: one line and exit code 1 on a refusal.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A failure its message explains in full (printed as one line, exit code 1). */
export class UsageError extends Error {}

/**
 * Runs `main` when `moduleUrl` is the script node was started with; a UsageError or a bad argument
 * is printed as `<name>: <message>`, anything else with its stack.
 */
export async function runAsCommand(moduleUrl: string, name: string, main: () => Promise<number>): Promise<void> {
  if (!process.argv[1] || resolve(process.argv[1]) !== fileURLToPath(moduleUrl)) return;
  try {
    process.exitCode = await main();
  } catch (error) {
    const badArgument = (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS');
    console.error(badArgument || error instanceof UsageError ? `${name}: ${(error as Error).message}` : error);
    process.exitCode = 1;
  }
}

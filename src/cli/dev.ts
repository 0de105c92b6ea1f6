// `npm run dev`, run by `tsx watch` (which restarts it on a change to src/ or migrations/): the service from source,
// and beside it, in a process of its own so that serving does not wait, the check that the migrations make the schema.
// Development only (drizzle-kit, tsx): never built into dist/.
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shortened, shownPath } from '../engine/sqlite/migrate.js';

/** The first statement a drift's migration would run that says what is missing (not drizzle-kit's PRAGMA around a rebuild). */
const telling = (statements: string[]) => statements.find((s) => !/^\s*PRAGMA\b/i.test(s)) ?? statements[0] ?? '';

/** Prints one line when the schema declares what no migration makes yet, with the command that writes the migration. */
async function reportDrift(): Promise<void> {
  const { checkDrift, DEFAULTS, loadSchema } = await import('./generate.js');
  const drifts = await checkDrift({
    schema: await loadSchema(DEFAULTS.schema),
    pgFolder: DEFAULTS.out,
    sqliteFolder: dirname(DEFAULTS.out),
  });
  const [first] = drifts;
  if (!first) return;
  console.error(
    `dev: ${shownPath(DEFAULTS.schema)} declares what no migration makes yet (${drifts.map((d) => d.backend).join(' and ')}: ${shortened(telling(first.statements), 80)}): ` +
      'run `npm run db:generate -- --name <what_changed>`; dev restarts by itself and applies it',
  );
}

if (process.argv.includes('--check')) {
  await reportDrift();
} else {
  const check = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--check'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  // A restart (tsx watch's SIGTERM) may come before the check is done: it goes with the service it was for.
  process.on('exit', () => check.kill());
  await import('../main.js');
}

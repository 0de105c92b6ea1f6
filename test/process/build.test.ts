// `npm run build` (scripts/build.mjs) on a temp copy of the project: nothing compiled when nothing changed, and
// never a stale dist/ after a change: an edit (even one dated before the build), a deleted source, a deleted output.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ROOT, withTempDir } from '../support/helpers.js';

/** A copy of what the build reads (and dist/, so that tsc's incremental build starts from the project's own). */
function projectCopy(dir: string): void {
  for (const name of ['src', 'scripts', 'tsconfig.json', 'tsconfig.build.json', 'package.json'])
    cpSync(join(ROOT, name), join(dir, name), { recursive: true });
  if (existsSync(join(ROOT, 'dist'))) cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
}

function build(dir: string): { code: number | null; output: string } {
  const run = spawnSync(process.execPath, [join(dir, 'scripts', 'build.mjs')], { cwd: dir, encoding: 'utf8', timeout: 180_000 });
  return { code: run.status, output: run.stdout + run.stderr };
}

const UP_TO_DATE = 'build: dist/ is up to date (no source changed since it was built)';

const skipping = suite('npm run build skips what has not changed, and rebuilds whatever has');

skipping(
  'a second build compiles nothing; an edit, a failed build, a deleted source and a deleted output are each built again',
  async () => {
    await withTempDir(async (dir) => {
      projectCopy(dir);
      assert.is(build(dir).code, 0);
      const again = build(dir);
      assert.is(again.code, 0, again.output);
      assert.is(again.output.trim(), UP_TO_DATE);

      // An edit dated before the last build (a checkout or an archive may do that) counts: content is compared, not time.
      const quote = join(dir, 'src', 'engine', 'quote.ts');
      writeFileSync(quote, `${readFileSync(quote, 'utf8')}\nexport const EDITED = 'edited';\n`);
      utimesSync(quote, new Date('2001-01-01'), new Date('2001-01-01'));
      // With a type error beside it: a build that fails is never taken for up to date.
      const extra = join(dir, 'src', 'extra.ts');
      writeFileSync(extra, 'export const extra: number = "text";\n');
      const failed = build(dir);
      assert.is.not(failed.code, 0, failed.output);
      assert.match(failed.output, "src/extra.ts(1,14): error TS2322: Type 'string' is not assignable to type 'number'.");
      assert.is.not(build(dir).code, 0, 'the same sources fail again rather than being skipped');

      writeFileSync(extra, 'export const extra = 1;\n');
      const fixed = build(dir);
      assert.is(fixed.code, 0, fixed.output);
      assert.match(readFileSync(join(dir, 'dist', 'engine', 'quote.js'), 'utf8'), "export const EDITED = 'edited';");
      assert.ok(existsSync(join(dir, 'dist', 'extra.js')));

      // A deleted source takes its compiled file along, so that nothing can run it; an output deleted behind the
      // build's back is compiled again (tsc's own incremental record would take it for emitted).
      rmSync(extra);
      rmSync(join(dir, 'dist', 'main.js'));
      const rebuilt = build(dir);
      assert.is(rebuilt.code, 0, rebuilt.output);
      assert.match(rebuilt.output, 'build: removed 2 file(s) no source compiles to any more: dist/extra.js, dist/extra.js.map');
      assert.not.ok(existsSync(join(dir, 'dist', 'extra.js')));
      assert.ok(existsSync(join(dir, 'dist', 'main.js')));
      assert.is(build(dir).output.trim(), UP_TO_DATE);
    });
  },
);

skipping.run();

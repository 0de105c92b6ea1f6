// `npm run build`: compiles src/ into dist/ (tsconfig.build.json) only when an input changed since the last good build,
// judged by content, not by time; removes from dist/ what no source compiles to any more, so that no stale file is run.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONFIG = join(ROOT, 'tsconfig.build.json');
/** Besides the sources, what the output depends on: the compiler options and package.json's "type" (ES modules or not). */
const SETTINGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((name) => join(ROOT, name));

/** The build's options and inputs, as tsc reads tsconfig.build.json. */
function parseBuild() {
  const host = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  };
  const config = ts.getParsedCommandLineOfConfigFile(CONFIG, {}, host);
  if (!config || config.errors.length) throw new Error(`cannot read ${CONFIG}`);
  return config;
}

/** Every file under `dir` (none when it does not exist). */
function filesUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** The sha256 of each input and setting, and the compiler's version: equal digests compile to equal outputs. */
function digestOf(config) {
  const files = Object.fromEntries(
    [...config.fileNames, ...SETTINGS]
      .sort()
      .map((path) => [relative(ROOT, path), createHash('sha256').update(readFileSync(path)).digest('hex')]),
  );
  return JSON.stringify({ typescript: ts.version, files });
}

/** Removes the files of `outDir` that are not the build's outputs (nor its bookkeeping, `keep`); returns them. */
function removeOthers(outDir, expected, keep) {
  const others = filesUnder(outDir).filter((path) => !expected.has(path) && !keep.includes(path));
  for (const path of others) rmSync(path);
  return others.map((path) => relative(ROOT, path));
}

function build() {
  const config = parseBuild();
  const { outDir, tsBuildInfoFile } = config.options;
  const manifest = join(outDir, '.build-inputs.json');
  const expected = new Set(config.fileNames.flatMap((file) => ts.getOutputFileNames(config, file, false)));
  const orphans = removeOthers(outDir, expected, [tsBuildInfoFile, manifest]);
  if (orphans.length) console.log(`build: removed ${orphans.length} file(s) no source compiles to any more: ${orphans.join(', ')}`);
  const missing = [...expected].filter((path) => !existsSync(path));
  const digest = digestOf(config);
  if (missing.length === 0 && existsSync(manifest) && readFileSync(manifest, 'utf8') === digest) {
    console.log(`build: ${relative(ROOT, outDir)}/ is up to date (no source changed since it was built)`);
    return 0;
  }
  rmSync(manifest, { force: true });
  // tsc's incremental build trusts its own record of what it emitted: an output deleted since would stay missing.
  if (missing.length) rmSync(tsBuildInfoFile, { force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const { status } = spawnSync(process.execPath, [tsc, '-p', CONFIG], { stdio: 'inherit' });
  // tsc also compiles an excluded file that an included one imports (for its types): not part of what ships.
  const pulledIn = removeOthers(outDir, expected, [tsBuildInfoFile, manifest]);
  if (pulledIn.length)
    console.log(
      `build: removed ${pulledIn.join(', ')}: compiled only because an included file imports them, but tsconfig.build.json excludes them`,
    );
  // Recorded only after a build without errors: a failed one is tried again the next time, whatever changed.
  if (status === 0) writeFileSync(manifest, digest);
  return status ?? 1;
}

process.exitCode = build();

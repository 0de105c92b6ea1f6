// `npm run db:generate [-- --name <what_changed>]`: drizzle-kit's SQLite migration, then the PostgreSQL one
// (drizzle-kit's API over toPgTables, in drizzle-kit's folder format), then each engine's search index
// migration when `searchable()` declarations changed; each folder written to is proven by applying its whole chain to a
// new database (src/cli/prove.ts) before anything is written to the real folders; `--check` exits 1 when any of them drifts.
// Development only (run through tsx): drizzle-kit is a devDependency, so nothing the service loads imports this.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  type DrizzleSnapshotJSON,
  type DrizzleSQLiteSnapshotJSON,
  generateDrizzleJson,
  generateMigration,
  generateSQLiteDrizzleJson,
  generateSQLiteMigration,
} from 'drizzle-kit/api';
import { is } from 'drizzle-orm';
import { getTableConfig, getViewConfig, type PgColumn, type PgTable, PgView } from 'drizzle-orm/pg-core';
import * as internal from '../db/internal-schema.js';
import { pgSearchStatements, type SearchState, searchChanges, searchStateOf, sqliteSearchStatements } from '../db/search.js';
import { toPgTables } from '../engine/postgres/tables.js';
import { MigrationError, StatementError, shortened } from '../engine/sqlite/migrate.js';
import { createRegistry, RegistryError, type Resource } from '../model/registry.js';
import { commitStage, copyOf, discardStage, realPathOf, type Stage, type StagedFile, stagedFiles, stageFolders } from './staging.js';
import { runAsCommand, UsageError } from './usage.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What `npm run db:generate` works on when no option says otherwise. */
export const DEFAULTS = { schema: join(ROOT, 'src/db/schema.ts'), out: join(ROOT, 'migrations/pg') };

/** drizzle-kit writes this between statements; drizzle's migrator splits on it. */
const BREAKPOINT = '--> statement-breakpoint\n';

/** One migration in drizzle-kit's meta/_journal.json. */
export interface JournalEntry {
  idx: number;
  version: string;
  when: number;
  tag: string;
  breakpoints: boolean;
}

interface Journal {
  version: string;
  dialect: string;
  entries: JournalEntry[];
}

/** A schema module and the two migration folders generated from it (with the internal tables). */
export interface SchemaMigrations {
  /** The schema's exports (the internal tables are added here, not by the caller). */
  schema: Record<string, unknown>;
  /** The PostgreSQL migrations (migrations/pg). */
  pgFolder: string;
  /** drizzle-kit's SQLite migrations (migrations/). */
  sqliteFolder: string;
}

/** A backend whose migrations do not produce the schema: the statements a new migration would hold. */
export interface Drift {
  backend: 'PostgreSQL' | 'SQLite';
  folder: string;
  statements: string[];
}

/** The exports of a schema module, loaded by path (TypeScript through tsx). */
export async function loadSchema(path: string): Promise<Record<string, unknown>> {
  return { ...(await import(pathToFileURL(resolve(path)).href)) };
}

function readJournal(folder: string, dialect: string): Journal {
  const path = join(folder, 'meta', '_journal.json');
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Journal) : { version: '7', dialect, entries: [] };
}

/** The snapshot drizzle-kit wrote with the newest migration in `folder`, if it holds any. */
function latestSnapshot<T>(folder: string): T | undefined {
  const meta = join(folder, 'meta');
  if (!existsSync(meta)) return undefined;
  const newest = readdirSync(meta)
    .filter((f) => f.endsWith('_snapshot.json'))
    .sort()
    .at(-1);
  return newest ? (JSON.parse(readFileSync(join(meta, newest), 'utf8')) as T) : undefined;
}

/**
 * Names both added and removed (tables, or a table's columns) make drizzle-kit ask whether one
 * was renamed: a prompt that would hang a check. Such a pair is drift whatever the answer.
 */
function renameQuestion(prev: { tables: object }, cur: { tables: object }): string | undefined {
  const prevTables = prev.tables as Record<string, { columns: object }>;
  const curTables = cur.tables as Record<string, { columns: object }>;
  const added = (from: object, to: object) => Object.keys(to).filter((k) => !(k in from));
  const [addedTables, removedTables] = [added(prevTables, curTables), added(curTables, prevTables)];
  if (addedTables.length && removedTables.length)
    return `tables added (${addedTables.join(', ')}) and removed (${removedTables.join(', ')})`;
  for (const [name, table] of Object.entries(curTables)) {
    const before = prevTables[name];
    if (!before) continue;
    const [addedColumns, removedColumns] = [added(before.columns, table.columns), added(table.columns, before.columns)];
    if (addedColumns.length && removedColumns.length)
      return `${name}: columns added (${addedColumns.join(', ')}) and removed (${removedColumns.join(', ')})`;
  }
  return undefined;
}

/** The first table or column of `tables` whose name holds `"` (drizzle-kit writes `"k"q"`), as `table "…"` or `column "…" of "…"`. */
function nameWithQuote(tables: Record<string, PgTable | PgView>): string | undefined {
  for (const table of Object.values(tables)) {
    const view = is(table, PgView) ? getViewConfig(table) : undefined;
    const { name, columns } = view
      ? { name: view.name, columns: Object.values(view.selectedFields as Record<string, PgColumn>) }
      : getTableConfig(table as PgTable);
    if (name.includes('"')) return `table "${name}"`;
    const column = columns.find((c) => c.name.includes('"'));
    if (column) return `column "${column.name}" of "${name}"`;
  }
  return undefined;
}

/**
 * The PostgreSQL snapshot of `schema` (chained to `folder`'s newest) and the statements that take
 * `folder` there. A check answers drizzle-kit's rename question itself instead of prompting.
 */
async function pgDiff(schema: Record<string, unknown>, folder: string, check = false, withInternal = true) {
  const committed = latestSnapshot<DrizzleSnapshotJSON>(folder);
  const prev = committed ?? generateDrizzleJson({});
  const tables = toPgTables(withInternal ? { ...schema, ...internal } : schema);
  const quoted = nameWithQuote(tables);
  if (quoted) {
    throw new UsageError(
      `${quoted} holds a double quote, which drizzle-kit's PostgreSQL statements would not escape: rename it for PostgreSQL`,
    );
  }
  const cur = generateDrizzleJson(tables, committed?.id);
  const question = renameQuestion(prev, cur);
  if (question && check) return { cur, statements: [`-- ${question}`] };
  if (question && !canAsk()) throw cannotAsk(question);
  return { cur, statements: await generateMigration(prev, cur) };
}

/** The SQLite statements that take `folder` to `schema`, or the rename question drizzle-kit would ask first. */
async function sqliteDiff(schema: Record<string, unknown>, folder: string): Promise<{ question?: string; statements: string[] }> {
  const prev = latestSnapshot<DrizzleSQLiteSnapshotJSON>(folder) ?? (await generateSQLiteDrizzleJson({}));
  const cur = await generateSQLiteDrizzleJson({ ...schema, ...internal });
  const question = renameQuestion(prev, cur);
  return question ? { question, statements: [`-- ${question}`] } : { statements: await generateSQLiteMigration(prev, cur) };
}

/** The refusal of a rename question where nobody can answer it (no terminal). */
const cannotAsk = (question: string) =>
  new UsageError(`${question}: drizzle-kit has to ask whether that is a rename; run the command in a terminal`);
const canAsk = () => Boolean(process.stdin.isTTY && process.stdout.isTTY);

/**
 * Compares the schema (with the internal tables) with the newest snapshot of each migrations
 * folder, as `drizzle-kit generate` would; changes nothing. Empty: both sets are up to date.
 */
export async function checkDrift({ schema, pgFolder, sqliteFolder }: SchemaMigrations): Promise<Drift[]> {
  const drifts: Drift[] = [];
  const pg = [...(await pgDiff(schema, pgFolder, true)).statements, ...searchDiff(schema, pgFolder, 'postgresql')];
  if (pg.length) drifts.push({ backend: 'PostgreSQL', folder: pgFolder, statements: pg });
  const sqlite = [...(await sqliteDiff(schema, sqliteFolder)).statements, ...searchDiff(schema, sqliteFolder, 'sqlite')];
  if (sqlite.length) drifts.push({ backend: 'SQLite', folder: sqliteFolder, statements: sqlite });
  return drifts;
}

/**
 * Appends a migration to `folder` as drizzle-kit does: `NNNN_<name>.sql`, `meta/NNNN_snapshot.json`
 * (chained by id/prevId), `meta/_journal.json`. Returns its tag.
 */
function appendMigration(folder: string, dialect: string, name: string, statements: string[], snapshot: { version: string }): string {
  const journal = readJournal(folder, dialect);
  const last = journal.entries.at(-1);
  const idx = last ? last.idx + 1 : 0;
  const prefix = String(idx).padStart(4, '0');
  const tag = `${prefix}_${name}`;
  mkdirSync(join(folder, 'meta'), { recursive: true });
  writeFileSync(join(folder, 'meta', `${prefix}_snapshot.json`), JSON.stringify(snapshot, null, 2));
  writeFileSync(join(folder, `${tag}.sql`), statements.join(BREAKPOINT));
  // `when` orders the migrations and is what the database records: it must grow even within one millisecond.
  journal.entries.push({ idx, version: snapshot.version, when: Math.max(Date.now(), (last?.when ?? 0) + 1), tag, breakpoints: true });
  writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify(journal, null, 2));
  return tag;
}

/**
 * Writes the PostgreSQL migration that takes `folder`'s newest snapshot to `schema`.
 * Without `withInternal`, restable's own tables are left out (a baseline of a database that lacks them).
 * @returns the new migration's tag and statements, or no tag when the schema has not changed
 */
export async function generatePgMigration(schema: Record<string, unknown>, folder: string, name: string, withInternal = true) {
  const { cur, statements } = await pgDiff(schema, folder, false, withInternal);
  if (statements.length === 0) return { tag: undefined, statements };
  return { tag: appendMigration(folder, 'postgresql', name, statements, cur), statements };
}

/** Where a migrations folder records the search indexes its migrations build (drizzle-kit's snapshots know none). */
const searchStatePath = (folder: string) => join(folder, 'search.json');

function readSearchState(folder: string): SearchState {
  const path = searchStatePath(folder);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as SearchState) : {};
}

const SEARCH_ENGINES = { sqlite: sqliteSearchStatements, postgresql: pgSearchStatements } as const;

/** The statements that take `folder`'s search indexes to what `schema` declares. */
function searchDiff(schema: Record<string, unknown>, folder: string, dialect: keyof typeof SEARCH_ENGINES): string[] {
  return searchChanges(readSearchState(folder), searchStateOf(schema), SEARCH_ENGINES[dialect]);
}

/**
 * Writes the migration that builds, rebuilds or removes search indexes (src/db/search.ts) when the
 * schema's `searchable()` declarations differ from what `folder`'s migrations built; its snapshot
 * repeats the newest one (the tables are unchanged), as drizzle-kit's `--custom` migrations do.
 */
export function generateSearchMigration(
  schema: Record<string, unknown>,
  folder: string,
  dialect: keyof typeof SEARCH_ENGINES,
  name: string,
) {
  const statements = searchDiff(schema, folder, dialect);
  if (statements.length === 0) return { tag: undefined, statements };
  const newest = latestSnapshot<{ id: string; version: string }>(folder);
  if (!newest) throw new UsageError(`${folder} has no migration yet: generate the tables' migration before their search index`);
  const snapshot = { ...newest, id: randomUUID(), prevId: newest.id };
  const tag = appendMigration(
    folder,
    dialect,
    name,
    statements.map((statement) => `${statement};\n`),
    snapshot,
  );
  writeFileSync(searchStatePath(folder), `${JSON.stringify(searchStateOf(schema), null, 2)}\n`);
  return { tag, statements };
}

/**
 * A copy of the drizzle-kit config `config` whose `out` is `folder` (drizzle-kit reads `out` relative to the
 * working directory, as the schema paths, which stay as they are): drizzle-kit writes into the scratch copy.
 */
async function stagedConfig(config: string, folder: string, stage: Stage): Promise<string> {
  const settings = (await import(pathToFileURL(resolve(config)).href)).default as Record<string, unknown>;
  const path = join(stage.root, 'drizzle.config.ts');
  writeFileSync(path, `export default ${JSON.stringify({ ...settings, out: relative(process.cwd(), folder) })};\n`);
  return path;
}

/**
 * Runs `drizzle-kit generate` (SQLite) with a config; returns the tag it wrote, if any, and its output, which
 * names the scratch copy: shown only when something went wrong, unless it asks a question, which needs the terminal.
 */
function generateSqlite(config: string, sqliteFolder: string, name: string | undefined, asks: boolean) {
  const before = readJournal(sqliteFolder, 'sqlite').entries.length;
  const bin = join(dirname(createRequire(import.meta.url).resolve('drizzle-kit/api')), 'bin.cjs');
  const args = [bin, 'generate', '--config', config, ...(name ? ['--name', name] : [])];
  const run = spawnSync(process.execPath, args, { stdio: asks ? 'inherit' : 'pipe', encoding: 'utf8' });
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  if (run.status !== 0) {
    process.stderr.write(output);
    throw new UsageError(`drizzle-kit generate failed (exit code ${run.status})`);
  }
  const entries = readJournal(sqliteFolder, 'sqlite').entries;
  return { tag: entries.length > before ? entries.at(-1)?.tag : undefined, output };
}

/**
 * drizzle-kit's SQLite migration for `schema`. A rename question is refused where nobody can answer it (drizzle-kit
 * would fail on its prompt with a stack trace), as PostgreSQL's is; and drizzle-kit exits 0 on some failures (a
 * path it cannot read), so a changed schema it wrote nothing for is refused too.
 */
async function writeSqliteMigration(schema: Record<string, unknown>, config: string, sqliteFolder: string, name?: string) {
  const { question, statements } = await sqliteDiff(schema, sqliteFolder);
  if (question && !canAsk()) throw cannotAsk(question);
  const { tag, output } = generateSqlite(config, sqliteFolder, name, Boolean(question));
  if (!tag && !question && statements.length > 0) {
    process.stderr.write(output);
    throw new UsageError('drizzle-kit generate wrote no migration for a schema that changed: see its output above');
  }
  return tag;
}

const shown = (path: string) => relative(process.cwd(), path) || '.';

/** Where a run writes (the scratch copies), and how: with a drizzle-kit config, drizzle-kit writes the SQLite migration. */
interface Targets {
  sqliteFolder: string;
  pgFolder: string;
  sqliteConfig?: string;
  name?: string;
}

/** Writes the migrations the schema needs: drizzle-kit's SQLite one (with a config), the PostgreSQL one, then each engine's search index. */
async function writeMigrations(schema: Record<string, unknown>, { sqliteFolder, pgFolder, sqliteConfig, name }: Targets): Promise<void> {
  const sqliteTag = sqliteConfig ? await writeSqliteMigration(schema, sqliteConfig, sqliteFolder, name) : undefined;
  // Without --name, the PostgreSQL migration is named like the SQLite one drizzle-kit just wrote.
  await generatePgMigration(schema, pgFolder, name ?? sqliteTag?.replace(/^\d+_/, '') ?? 'schema_change');
  // The search indexes follow the tables they index (a new searchable table is created just before).
  const searchName = name ?? 'search';
  if (sqliteConfig) generateSearchMigration(schema, sqliteFolder, 'sqlite', searchName);
  generateSearchMigration(schema, pgFolder, 'postgresql', searchName);
}

/** A chain that did not apply to its scratch database. */
interface ProofFailure {
  engine: 'SQLite' | 'PostgreSQL';
  folder: string;
  error: unknown;
}

/** The kinds the service would serve from `schema`, whose change-feed triggers the proof installs as a start does. */
function resourcesOf(schema: Record<string, unknown>): Resource[] {
  try {
    return createRegistry(schema).resources;
  } catch (error) {
    if (!(error instanceof RegistryError)) throw error;
    console.error(
      `generate: warning: the service would refuse this schema (${error.message}); proving the migrations without the change feed`,
    );
    return [];
  }
}

/**
 * Applies the whole chain of each folder this run wrote a migration to (`added`: the files it added) to a
 * new database of its engine, with the service's migrator; a migration that cannot run is found here, not
 * at the next start. Returns the chains that failed.
 */
async function proveWritten(
  schema: Record<string, unknown>,
  added: string[],
  { sqliteFolder, pgFolder }: Targets,
  stage: Stage,
): Promise<ProofFailure[]> {
  const wroteTo = (folder: string) => added.some((path) => dirname(path) === folder && path.endsWith('.sql'));
  const chains = [
    { engine: 'SQLite', folder: sqliteFolder, prove: 'proveSqlite' },
    { engine: 'PostgreSQL', folder: pgFolder, prove: 'provePostgres' },
  ] as const;
  if (!chains.some((c) => wroteTo(c.folder))) return [];
  const resources = resourcesOf(schema);
  // Loaded here: the drift check (db:check, npm run dev) does not pay for PGlite.
  const provers = await import('./prove.js');
  const failures: ProofFailure[] = [];
  for (const { engine, folder, prove } of chains) {
    if (!wroteTo(folder)) continue;
    try {
      const { applied, on } = await provers[prove](folder, resources);
      console.log(
        `${engine}: proved: the ${applied.length} migration(s) of ${shown(realPathOf(stage, folder))} apply in order to ${on}, the change feed's triggers too`,
      );
    } catch (error) {
      if (!(error instanceof MigrationError)) throw error;
      failures.push({ engine, folder, error });
    }
  }
  return failures;
}

/** The command that runs this one, as the user typed it (`npm run db:generate`, or the tests' db:generate:test). */
const command = () =>
  `npm run ${process.env.npm_lifecycle_event?.startsWith('db:generate') ? process.env.npm_lifecycle_event : 'db:generate'}`;

/**
 * drizzle-kit's rebuild of a SQLite table (create `__new_<table>`, copy the rows, drop, rename: how it
 * changes what ALTER TABLE cannot, such as a CHECK) that copies a column the old table does not have yet: a
 * column added in the same change. The table and the column, when `refused` is that.
 */
export function rebuildOfNewColumn({ statement, reason }: StatementError): { table: string; column: string } | undefined {
  const table = /^INSERT INTO [`"]__new_([^`"]+)[`"]/.exec(statement)?.[1];
  const column = /no such column: "?([^"\s]+)"?/.exec(reason)?.[1];
  return table && column ? { table, column } : undefined;
}

/** What to do about a refused statement, for the person who just changed `schemaPath`. */
function remedy(refused: StatementError, schemaPath: string, writtenNow: boolean): string {
  const rebuild = rebuildOfNewColumn(refused);
  if (rebuild && writtenNow) {
    return [
      `why: drizzle-kit rebuilds the table ${rebuild.table} (SQLite cannot add a CHECK or change a constraint in place) and copies "${rebuild.column}" from the old table, which does not have that column yet`,
      `what to do: make the change in two migrations. Take the new check() (or the other constraint change) of ${rebuild.table} out of ${shown(schemaPath)}, keep the new column(s), run \`${command()} -- --name add_${rebuild.column}\`; then put the check back and run \`${command()} -- --name <the_check>\``,
    ].join('\n');
  }
  if (writtenNow) {
    return `what to do: change ${shown(schemaPath)} so that this statement can run on a new database (or make the change in smaller steps, one migration each), then run \`${command()}\` again`;
  }
  return "what to do: that migration, committed before this run, fails on a new database whatever the change: if no database has applied it, remove it (its .sql, its snapshot, its journal entry) and generate it again; this run's migration is not kept, as it could not be proven";
}

/** The refused statement behind a migrator's one-line MigrationError, when a statement was refused. */
function refusedStatementOf(error: unknown): StatementError | undefined {
  for (let cause = error; cause; cause = (cause as { cause?: unknown }).cause) if (cause instanceof StatementError) return cause;
  return undefined;
}

/** The report of a chain that failed: which file, which statement, the database's reason, what to do. */
function explainFailure({ engine, folder, error }: ProofFailure, schemaPath: string, added: string[], stage: Stage): string {
  const refused = refusedStatementOf(error);
  const real = (path: string) => shown(realPathOf(stage, path));
  if (!refused) return `generate: the ${engine} migrations of ${real(folder)} do not apply to a new database: ${(error as Error).message}`;
  const writtenNow = added.includes(refused.file);
  const file = real(refused.file);
  return [
    `generate: ${file}${writtenNow ? ', generated just now,' : ''} cannot run: ${engine} refused the statement at ${file}:${refused.line}`,
    `  ${shortened(refused.statement, 200)}`,
    `  ${refused.reason}`,
    remedy(refused, schemaPath, writtenNow),
  ].join('\n');
}

/** The migrations the run generated (its .sql files, by engine), as `SQLite: migrations/0004_x.sql (7 statement(s))`. */
function reportGenerated(files: StagedFile[], { sqliteFolder, pgFolder }: Targets): void {
  for (const { staged, real } of files) {
    if (!staged.endsWith('.sql')) continue;
    const engine = dirname(staged) === sqliteFolder ? 'SQLite' : dirname(staged) === pgFolder ? 'PostgreSQL' : undefined;
    if (!engine) continue;
    const statements = readFileSync(staged, 'utf8')
      .split('--> statement-breakpoint')
      .filter((s) => s.trim()).length;
    console.log(`${engine}: generated ${shown(real)} (${statements} statement(s))`);
  }
}

/**
 * Generates into scratch copies of the folders, proves each chain it added to, and only then copies what it
 * wrote into the real folders; a run that fails leaves them as they were.
 */
async function generateProven(schema: Record<string, unknown>, folders: Targets, schemaPath: string): Promise<number> {
  const { sqliteFolder, pgFolder } = folders;
  const stage = stageFolders([sqliteFolder, pgFolder]);
  try {
    const sqliteConfig = folders.sqliteConfig && (await stagedConfig(folders.sqliteConfig, copyOf(stage, sqliteFolder), stage));
    const staged = { ...folders, sqliteFolder: copyOf(stage, sqliteFolder), pgFolder: copyOf(stage, pgFolder), sqliteConfig };
    await writeMigrations(schema, staged);
    const files = stagedFiles(stage);
    if (files.length === 0) {
      console.log(`no schema changes, nothing written to ${shown(sqliteFolder)} or ${shown(pgFolder)}`);
      return 0;
    }
    reportGenerated(files, staged);
    const added = files.map((f) => f.staged);
    const failures = await proveWritten(schema, added, staged, stage);
    for (const failure of failures) console.error(explainFailure(failure, schemaPath, added, stage));
    if (failures.length) {
      console.error(
        `generate: nothing was written to ${shown(sqliteFolder)} or ${shown(pgFolder)}: the migrations were generated and tried in a scratch copy`,
      );
      return 1;
    }
    console.log(`wrote ${commitStage(stage).map(shown).join(', ')}`);
    return 0;
  } finally {
    discardStage(stage);
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      schema: { type: 'string', default: DEFAULTS.schema },
      out: { type: 'string', default: DEFAULTS.out },
      'sqlite-out': { type: 'string' },
      'sqlite-config': { type: 'string' },
      name: { type: 'string' },
      check: { type: 'boolean', default: false },
    },
  });
  const pgFolder = resolve(values.out);
  // drizzle-kit's `out` holds the PostgreSQL folder: migrations/ and migrations/pg.
  const sqliteFolder = resolve(values['sqlite-out'] ?? dirname(pgFolder));
  if (values.name !== undefined && !/^[\w-]+$/.test(values.name)) throw new UsageError('--name may hold letters, digits, _ and - only');
  const schema = await loadSchema(values.schema);

  if (values.check) {
    const drifts = await checkDrift({ schema, pgFolder, sqliteFolder });
    for (const { backend, folder, statements } of drifts) {
      console.error(`${backend} migrations in ${shown(folder)} drift from ${shown(values.schema)}; a new migration would run:`);
      console.error(statements.map((s) => `  ${s.trim().replace(/\n\s*/g, ' ')}`).join('\n'));
    }
    if (drifts.length) {
      console.error(
        'generate the missing migration(s) (npm run db:generate -- --name <what_changed>, or db:generate:test) and commit them',
      );
      return 1;
    }
    console.log(`${shown(values.schema)}: the SQLite and PostgreSQL migrations match the schema`);
    return 0;
  }

  return generateProven(schema, { sqliteFolder, pgFolder, sqliteConfig: values['sqlite-config'], name: values.name }, values.schema);
}

await runAsCommand(import.meta.url, 'generate', main);

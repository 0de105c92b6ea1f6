// `npm run copy-to-postgres -- --from <sqlite file> --to <postgres url>`: copies every table of the schema
// (resources, idempotency keys, the cursor secret) into a migrated, empty PostgreSQL database, in one transaction.
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { getTableColumns } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import type { PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import type pg from 'pg';
import * as internalSchema from '../db/internal-schema.js';
import * as userSchema from '../db/schema.js';
import { continueFeedInPg, installPgOn } from '../engine/changes.js';
import { applyPgMigrations } from '../engine/postgres/migrate.js';
import { closePostgres, openPostgres, POSTGRES_DEFAULTS, redactUrl } from '../engine/postgres/pool.js';
import { toPgTables } from '../engine/postgres/tables.js';
import { ident } from '../engine/quote.js';
import { MigrationError, migrationStatus } from '../engine/sqlite/migrate.js';
import { createRegistry } from '../model/registry.js';
import { CopyError, parentsFirst, type Row, treeOrder } from './copy-order.js';

/** Rows per INSERT: far below PostgreSQL's 65,535 bound parameters per statement, whatever the width. */
const rowsPerInsert = (columns: number) => Math.max(1, Math.min(500, Math.floor(30_000 / columns)));

/** Reads a table's rows with better-sqlite3 and decodes each value as drizzle's SQLite column does (booleans, dates, JSON). */
function* readRows(sqlite: Database.Database, table: SQLiteTable): Generator<Row> {
  const columns = Object.entries(getTableColumns(table)) as [string, SQLiteColumn][];
  const statement = sqlite
    .prepare(`SELECT ${columns.map(([, c]) => ident(c.name)).join(', ')} FROM ${ident(getTableConfig(table).name)}`)
    .raw();
  for (const values of statement.iterate() as Iterable<unknown[]>) {
    const row: Row = {};
    columns.forEach(([key, column], i) => {
      const value = values[i];
      row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
    });
    yield row;
  }
}

/** The highest key SQLite ever handed out per AUTOINCREMENT table (deleted rows included), so none is reused. */
function autoincrementHighs(sqlite: Database.Database): Map<string, number> {
  const exists = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'").get();
  if (!exists) return new Map();
  const rows = sqlite.prepare('SELECT name, seq FROM sqlite_sequence').all() as { name: string; seq: number }[];
  return new Map(rows.map((row) => [row.name, Number(row.seq)]));
}

/** Inserts one table's rows in batches through its derived pg table (drizzle encodes each value for PostgreSQL). */
async function insertRows(db: NodePgDatabase, table: PgTable, rows: Iterable<Row>, width: number): Promise<number> {
  const size = rowsPerInsert(width);
  let batch: Row[] = [];
  let count = 0;
  for (const row of rows) {
    batch.push(row);
    if (batch.length === size) {
      await db.insert(table).values(batch as never);
      count += batch.length;
      batch = [];
    }
  }
  if (batch.length > 0) await db.insert(table).values(batch as never);
  return count + batch.length;
}

/** Moves each identity sequence past the largest key copied (and past any key SQLite handed out before). */
async function advanceSequences(client: pg.PoolClient, tables: string[], highs: Map<string, number>): Promise<void> {
  const { rows } = await client.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND is_identity = 'YES' AND table_name = ANY($1)`,
    [tables],
  );
  for (const { table_name: table, column_name: column } of rows) {
    const max = (await client.query<{ max: number | null }>(`SELECT max(${ident(column)}) AS max FROM ${ident(table)}`)).rows[0]?.max;
    const high = Math.max(Number(max ?? 0), highs.get(table) ?? 0);
    if (high > 0) await client.query('SELECT setval(pg_get_serial_sequence($1, $2), $3, true)', [ident(table), column, high]);
  }
}

/** The cursor key a service started on the empty database made: the file's own replaces it (its cursors go on working). */
const SECRETS = getTableConfig(internalSchema.secrets).name;

/**
 * Refuses a target that holds any row in the tables to copy (the cursor key aside, which is replaced);
 * locks them first so that nothing writes meanwhile.
 */
async function requireEmpty(client: pg.PoolClient, tables: string[], target: string): Promise<void> {
  await client.query(`LOCK TABLE ${tables.map(ident).join(', ')} IN EXCLUSIVE MODE`);
  const filled: string[] = [];
  for (const table of tables.filter((t) => t !== SECRETS)) {
    if ((await client.query(`SELECT EXISTS (SELECT 1 FROM ${ident(table)}) AS filled`)).rows[0]?.filled) filled.push(table);
  }
  if (filled.length > 0) {
    throw new CopyError(`${target} already holds rows (in ${filled.join(', ')}); copy only into a database whose tables are empty`);
  }
  await client.query(`DELETE FROM ${ident(SECRETS)}`);
}

/** Opens the SQLite file read-only and checks that its migrations are exactly this code's. */
function openSource(path: string): Database.Database {
  let sqlite: Database.Database;
  try {
    sqlite = new Database(path, { readonly: true, fileMustExist: true, timeout: 5000 });
  } catch (error) {
    throw new CopyError(`cannot open the SQLite database ${path}: ${(error as Error).message}`);
  }
  let status: ReturnType<typeof migrationStatus>;
  try {
    status = migrationStatus({ sqlite, db: drizzleSqlite({ client: sqlite }) });
  } catch (error) {
    sqlite.close();
    throw new CopyError(`cannot read the SQLite database ${path}: ${(error as Error).message}`);
  }
  if (status.unknown > 0) {
    sqlite.close();
    throw new CopyError(
      `${path} has ${status.unknown} migration(s) this code does not know (a newer version migrated it); copy with that version`,
    );
  }
  if (status.pending.length > 0) {
    sqlite.close();
    throw new CopyError(`${path} has ${status.pending.length} pending migration(s); run \`DATABASE_PATH=${path} npm run migrate\` first`);
  }
  return sqlite;
}

/** Copies every table; resolves with the rows copied per table name, in the order they were copied. */
async function copyToPostgres(from: string, to: string, log: (line: string) => void = () => {}): Promise<Map<string, number>> {
  const schema = { ...userSchema, ...internalSchema };
  const order = parentsFirst(schema);
  const pgTables = toPgTables(schema);
  const names = order.map(([, table]) => getTableConfig(table).name);
  const target = redactUrl(to);
  const sqlite = openSource(from);
  // One connection; a large copy is not a request, so no statement timeout.
  const handle = openPostgres(to, { ...POSTGRES_DEFAULTS, poolSize: 1, statementTimeoutMs: 0 });
  try {
    let client: pg.PoolClient;
    try {
      const { applied } = await applyPgMigrations(handle, undefined, (client) => installPgOn(client, createRegistry(userSchema).resources));
      log(applied.length ? `${target}: applied ${applied.length} migration(s)` : `${target}: migrations up to date`);
      client = await handle.pool.connect();
    } catch (error) {
      if (error instanceof MigrationError) throw new CopyError(error.message);
      throw new CopyError(`cannot use the PostgreSQL database ${target}: ${(error as Error).message}`);
    }
    const copied = new Map<string, number>();
    /** The table being copied when a copy fails (a NUL in a text value, say, which PostgreSQL refuses): named in the error. */
    let copying: string | undefined;
    try {
      // Every read sees one snapshot of the SQLite file, even if something still writes to it.
      sqlite.exec('BEGIN');
      await client.query('BEGIN');
      await requireEmpty(client, names, target);
      const db = drizzlePg({ client });
      for (const [exportName, table] of order) {
        const name = getTableConfig(table).name;
        copying = name;
        const rows = treeOrder(table, readRows(sqlite, table));
        const width = Object.keys(getTableColumns(table)).length;
        copied.set(name, await insertRows(db, pgTables[exportName] as PgTable, rows, width));
      }
      copying = undefined;
      await advanceSequences(client, names, autoincrementHighs(sqlite));
      const after = await continueFeedInPg(client, sqlite, createRegistry(userSchema).resources);
      if (after > 0) log(`${target}: the change feed goes on after seq ${after}`);
      await client.query('COMMIT');
      return copied;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      if (error instanceof CopyError) throw error;
      // PostgreSQL's own words (a failed batch's message is its whole query and parameters): one line.
      const cause = (error as Error).cause instanceof Error ? ((error as Error).cause as Error) : (error as Error);
      const where = copying === undefined ? '' : ` (copying table ${JSON.stringify(copying)})`;
      throw new CopyError(`copy failed, no row was copied to ${target}${where}: ${cause.message.split('\n')[0]?.slice(0, 300)}`);
    } finally {
      client.release();
      sqlite.exec('ROLLBACK');
    }
  } finally {
    sqlite.close();
    await closePostgres(handle);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { from: { type: 'string' }, to: { type: 'string' } } });
  if (!values.from || !values.to) throw new CopyError('usage: npm run copy-to-postgres -- --from <sqlite file> --to <postgres://… url>');
  if (!/^postgres(ql)?:\/\/./.test(values.to) || !URL.canParse(values.to)) throw new CopyError('--to must be a postgres:// URL');
  const copied = await copyToPostgres(values.from, values.to, console.log);
  const width = Math.max(...[...copied.keys()].map((name) => name.length));
  for (const [name, rows] of copied) console.log(`  ${name.padEnd(width)}  ${rows} row(s)`);
  const total = [...copied.values()].reduce((sum, n) => sum + n, 0);
  console.log(`copied ${total} row(s) in ${copied.size} table(s) from ${values.from} to ${redactUrl(values.to)}, in one transaction`);
}

main().catch((error: unknown) => {
  const known = error instanceof CopyError || (error as NodeJS.ErrnoException).code?.startsWith?.('ERR_PARSE_ARGS');
  if (!known) throw error;
  console.error(`copy-to-postgres: ${(error as Error).message}`);
  process.exitCode = 1;
});

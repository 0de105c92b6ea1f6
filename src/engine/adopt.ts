// The refusal to adopt a database the schema did not make: one that holds tables the schema does not
// declare and no migration of this schema's journal is refused before anything is written to it.
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import type pg from 'pg';
import { PG_MIGRATIONS_FOLDER, pgMigrationStatus } from './postgres/migrate.js';
import type { PostgresHandle } from './postgres/pool.js';
import { firstNames } from './schema-gap.js';
import { DatabaseOpenError } from './sqlite/connection.js';
import { MIGRATIONS_FOLDER, MigrationError, migrationStatus } from './sqlite/migrate.js';

/** The database holds tables of its own and no history of this schema; the message is one line for the operator. */
export class ForeignDatabaseError extends MigrationError {
  override name = 'ForeignDatabaseError';
}

/** A table or view of the schema (a registry's resource will do). */
type Declared = { name: string };
const namesOf = (declared: readonly Declared[]) => declared.map((d) => d.name);

/** Tables the service makes for itself (its own, the change feed's, the search indexes and their FTS5 shadow tables). */
const isServiceTable = (name: string) => name.toLowerCase().startsWith('restable_') || name === '__drizzle_migrations';

/**
 * The tables of `present` that are neither declared (`declared`: the schema's tables and views) nor the
 * service's own, in order. `foldCase`: SQLite's names match whatever their case, PostgreSQL's exactly.
 */
export function undeclaredTables(present: readonly string[], declared: readonly string[], foldCase: boolean): string[] {
  const fold = (name: string) => (foldCase ? name.toLowerCase() : name);
  const known = new Set(declared.map(fold));
  return present.filter((name) => !isServiceTable(name) && !known.has(fold(name)));
}

/** The one line of a refusal: what the database holds, how to serve it, how to go ahead anyway. */
function refusal(what: string, tables: string[], introspect: string): ForeignDatabaseError {
  return new ForeignDatabaseError(
    `${what} holds ${tables.length} table(s) that the schema does not declare (${firstNames(tables, 3)}) and has applied none of its migrations: ` +
      `refusing to adopt it. To serve its own tables, run ${introspect}; to add the schema's tables beside them anyway, set DATABASE_ADOPT=true`,
  );
}

/** SQLite: the file's tables, virtual ones included, without SQLite's own and the shadow tables of FTS5 and the like. */
function sqliteTables(sqlite: Database.Database): string[] {
  return sqlite
    .prepare(
      "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'virtual') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )
    .pluck()
    .all() as string[];
}

/** SQLite's codes for a file that is no database it can read: left to openDatabase, whose line says what to do. */
const LEFT_TO_OPEN = new Set(['SQLITE_NOTADB', 'SQLITE_CORRUPT', 'SQLITE_CANTOPEN']);

/**
 * Refuses the SQLite file at `path` when it holds tables that `declared` (the schema's tables and views) does not name and records no migration of
 * `folder`'s journal, unless `adopt`. It reads the file read-only before the service opens it (which would turn
 * it to WAL); a file that does not exist yet, or that cannot be read as a database, is left to openDatabase to report.
 * @throws {ForeignDatabaseError}
 */
export function refuseForeignSqlite(path: string, declared: readonly Declared[], adopt: boolean, folder = MIGRATIONS_FOLDER): void {
  if (adopt || path === ':memory:' || !existsSync(path)) return;
  let sqlite: Database.Database;
  try {
    sqlite = new Database(path, { readonly: true, fileMustExist: true });
  } catch {
    return; // not a database, or not readable: openDatabase says so in its own line
  }
  let tables: string[];
  let migrated: boolean;
  try {
    tables = undeclaredTables(sqliteTables(sqlite), namesOf(declared), true);
    migrated = tables.length > 0 && migrationStatus({ sqlite, db: drizzle({ client: sqlite }) }, folder).applied.length > 0;
  } catch (error) {
    // Not a database, or damaged: openDatabase reports it in its own line. Any other failure (locked past the
    // timeout, an I/O error) stops start-up here: a file is never adopted unread.
    if (LEFT_TO_OPEN.has((error as { code?: string }).code ?? '')) return;
    throw new DatabaseOpenError(`cannot read ${path} to check what it holds: ${(error as Error).message}`);
  } finally {
    sqlite.close();
  }
  if (tables.length > 0 && !migrated) throw refusal(path, tables, `npm run introspect -- ${path}`);
}

/** PostgreSQL: the tables of the service's schema, without partitions (served through their parent) and extensions' own. */
async function pgTables(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'f', 'm') AND NOT c.relispartition
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
      ORDER BY c.relname`,
  );
  return rows.map((r) => r.name);
}

/**
 * refuseForeignSqlite for PostgreSQL: the tables of the current schema, and drizzle's bookkeeping of `folder`.
 * @throws {ForeignDatabaseError}
 */
export async function refuseForeignPostgres(
  handle: PostgresHandle,
  declared: readonly Declared[],
  adopt: boolean,
  folder = PG_MIGRATIONS_FOLDER,
): Promise<void> {
  if (adopt) return;
  const tables = undeclaredTables(await pgTables(handle.pool), namesOf(declared), false);
  if (tables.length === 0 || (await pgMigrationStatus(handle, folder)).applied.length > 0) return;
  throw refusal(`the PostgreSQL database ${handle.url}`, tables, 'npm run introspect -- --url "$DATABASE_URL"');
}

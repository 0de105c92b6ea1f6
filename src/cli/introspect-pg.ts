// Reads an existing PostgreSQL database (its current schema, through pg_catalog) into the model that
// introspect.ts writes a schema from, and records a baseline migration there as drizzle's migrator would.

import { readMigrationFiles } from 'drizzle-orm/migrator';
import type pg from 'pg';
import type { ColumnModel, DatabaseModel, ForeignKeyModel, IndexModel, TableModel } from './introspect.js';

/** drizzle's pg migrator keeps its bookkeeping here (as src/engine/postgres/migrate.ts does). */
const MIGRATIONS_TABLE = '"drizzle"."__drizzle_migrations"';

/** pg_constraint's action codes, as SQL names. */
const ACTIONS: Record<string, string> = { a: 'no action', r: 'restrict', c: 'cascade', n: 'set null', d: 'set default' };

/**
 * A PostgreSQL type written as SQLite would declare it, so that introspect.ts types the field by the
 * same affinity rules: integers, text (with its length), exact numerics, reals, BLOBs (bytea),
 * booleans and JSON (text, in json mode); anything else (dates and times among them) has no declared type.
 */
function declaredOf(type: string, length: number | null, precision: number | null, scale: number | null): string {
  switch (type) {
    case 'smallint':
    case 'integer':
    case 'bigint':
      return 'INTEGER';
    case 'character varying':
      return length ? `VARCHAR(${length})` : 'VARCHAR';
    case 'character':
      return length ? `CHAR(${length})` : 'CHAR';
    case 'numeric':
      return precision ? `NUMERIC(${precision},${scale ?? 0})` : 'NUMERIC';
    case 'real':
    case 'double precision':
      return 'REAL';
    case 'bytea':
      return 'BLOB';
    case 'boolean':
      return 'BOOLEAN';
    case 'text':
    case 'json':
    case 'jsonb':
      return 'TEXT';
    default:
      // Dates, times, uuid, enums, arrays…: no declared type (untyped), served as the text PostgreSQL gives
      // and written as text it casts. Declared as text they would be compared COLLATE "C", which only text takes.
      return '';
  }
}

/** PostgreSQL's defaults that make a random UUID (the built-in one, and uuid-ossp's, also by a schema: `extensions.`). */
const UUID_DEFAULTS = /^(?:[\w"]+\.)?(gen_random_uuid|uuid_generate_v4)\(\)$/;

/** SQL defaults PostgreSQL and SQLite both take with one meaning (PostgreSQL shows `now()` for CURRENT_TIMESTAMP's twin). */
const SHARED_DEFAULTS: Record<string, string> = {
  'now()': '(CURRENT_TIMESTAMP)',
  CURRENT_TIMESTAMP: '(CURRENT_TIMESTAMP)',
  CURRENT_DATE: '(CURRENT_DATE)',
  CURRENT_TIME: '(CURRENT_TIME)',
};

/**
 * A column default as SQLite would write it: a literal (`'x'::text` → `'x'`, `'-1'::integer` → `-1`),
 * the current time, else none (`dropped`: PostgreSQL SQL, noted in the schema).
 */
function defaultOf(text: string | null, declared: string): { value: string | null; dropped: boolean } {
  if (text === null) return { value: null, dropped: false };
  // Cast to any type: `'x'::text`, `'{}'::text[]`, `'sad'::other."My Mood"` (a type of another schema).
  const literal = /^\(?('(?:[^']|'')*')(?:::[\w\s".[\]]+)?\)?$/.exec(text)?.[1];
  const number = /^\(?'?(-?\d+(\.\d+)?)'?(?:::[\w\s]+)?\)?$/.exec(text)?.[1];
  // A number stays a number where the column holds numbers (PostgreSQL quotes a negative one: '-1'::integer).
  if (number !== undefined && /INT|NUMERIC|REAL|BOOLEAN/.test(declared)) return { value: number, dropped: false };
  if (literal !== undefined) return { value: literal, dropped: false };
  if (text === 'true' || text === 'false') return { value: text === 'true' ? '1' : '0', dropped: false };
  const shared = SHARED_DEFAULTS[text.replace(/::[\w\s]+$/, '')];
  return shared ? { value: shared, dropped: false } : { value: null, dropped: true };
}

/** The tables and views of the current schema (restable's and drizzle's own left out). */
export async function readPgDatabase(db: pg.ClientBase): Promise<DatabaseModel> {
  const relations = (
    await db.query<{ oid: number; name: string; kind: string; view: string | null }>(
      `SELECT c.oid::int AS oid, c.relname AS name, c.relkind AS kind,
              CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid, true) END AS view
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition ORDER BY c.oid`,
    )
  ).rows;
  const own = relations.filter((r) => r.name.startsWith('restable_')).map((r) => r.name);
  const skipped = own.map((name) => `${name} (restable's own table)`);
  const columns = (
    await db.query<{
      table: string;
      name: string;
      type: string;
      length: number | null;
      precision: number | null;
      scale: number | null;
      nullable: string;
      default: string | null;
      identity: string;
      generated: string;
      expression: string | null;
    }>(
      `SELECT table_name AS table, column_name AS name, data_type AS type, character_maximum_length AS length,
              numeric_precision AS precision, numeric_scale AS scale, is_nullable AS nullable,
              column_default AS default, is_identity AS identity, is_generated AS generated, generation_expression AS expression
         FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
    )
  ).rows;
  const constraints = (
    await db.query<{
      table: number;
      type: string;
      columns: string[];
      parent: string | null;
      parentColumns: string[] | null;
      onDelete: string;
      onUpdate: string;
      name: string;
      local: boolean;
    }>(
      `SELECT con.conrelid::int AS table, con.contype AS type, con.conname AS name,
              ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
                      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i) AS columns,
              p.relname AS parent,
              ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
                      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i) AS "parentColumns",
              con.confdeltype AS "onDelete", con.confupdtype AS "onUpdate",
              p.relnamespace = c.relnamespace AS local
         FROM pg_constraint con LEFT JOIN pg_class p ON p.oid = con.confrelid
         JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND con.contype IN ('p', 'u', 'f') ORDER BY con.conname`,
    )
  ).rows;
  const indexes = (
    await db.query<{ table: number; name: string; unique: boolean; columns: string[]; expression: boolean; where: string | null }>(
      `SELECT i.indrelid::int AS table, ic.relname AS name, i.indisunique AS unique,
              ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(n, o)
                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o) AS columns,
              (0 = ANY(i.indkey::int2[])) AS expression, pg_get_expr(i.indpred, i.indrelid) AS where
         FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND NOT i.indisprimary
          AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.contype = 'u')
        ORDER BY ic.relname`,
    )
  ).rows;

  const served = new Set(relations.filter((r) => !r.name.startsWith('restable_') && r.kind !== 'v').map((r) => r.name));
  const tables: TableModel[] = [];
  for (const relation of relations) {
    if (relation.name.startsWith('restable_')) continue;
    const notes: string[] = [];
    const own = constraints.filter((c) => c.table === relation.oid);
    // An array column can be neither an element's key nor a foreign key here: its values are served as their
    // text, which cannot be looked up in a list of keys (`= ANY(…)` of arrays of arrays). Both stay in the database.
    const arrays = new Set(columns.filter((c) => c.table === relation.name && c.type === 'ARRAY').map((c) => c.name));
    const onArray = (names: string[]) => names.some((name) => arrays.has(name));
    let key = own.find((c) => c.type === 'p')?.columns ?? [];
    if (onArray(key)) {
      notes.push(`the primary key (${key.join(', ')}) holds an array: not declared (the table is served as a list only)`);
      key = [];
    }
    let keyGiven = false;
    const tableColumns: ColumnModel[] = columns
      .filter((c) => c.table === relation.name)
      .map((c) => {
        const declared = declaredOf(c.type, c.length, c.precision, c.scale);
        const assigned = c.identity === 'YES' || c.default?.startsWith('nextval(');
        const sole = key.length === 1 && key[0] === c.name;
        // A sole integer key the database assigns (identity, serial) is declared as SQLite's rowid key, which
        // restable lets the database assign; elsewhere such a column has no SQLite form: the client gives its value.
        if (assigned && !sole) notes.push(`${c.name} is assigned by PostgreSQL (identity or serial) outside the key: not declared so`);
        // Any other sole integer key is the client's to give. As integer() restable would leave it to a database
        // that assigns nothing (and every create would fail), so it is written as intKey(), as on SQLite; one
        // that is also a foreign key needs no such type: restable asks for it already.
        const referencing = own.some((con) => con.type === 'f' && con.columns.includes(c.name));
        if (sole && !assigned && !referencing && declared === 'INTEGER') keyGiven = true;
        // A new UUID per row by PostgreSQL's function: made by the service instead (the same on SQLite), so that a create may leave it out.
        const madeUuid = !assigned && c.default !== null && UUID_DEFAULTS.test(c.default);
        const { value, dropped } = assigned || madeUuid ? { value: null, dropped: false } : defaultOf(c.default, declared);
        if (dropped) notes.push(`the default of ${c.name} (${c.default}) is PostgreSQL SQL: kept in the database, not declared`);
        return {
          name: c.name,
          declared,
          notNull: c.nullable === 'NO',
          default: value,
          ...(madeUuid && { madeUuid: true }),
          ...(c.type === 'boolean' && { boolean: true }),
          ...((c.type === 'json' || c.type === 'jsonb') && { json: true }),
          // Stored generated columns (the only kind PostgreSQL has) stay the database's to compute.
          ...(c.generated === 'ALWAYS' && c.expression !== null && { generated: { expression: c.expression, mode: 'stored' as const } }),
        };
      });
    const uniques: IndexModel[] = own
      .filter((c) => c.type === 'u')
      .map((c) => ({ name: c.name, unique: true, origin: 'u' as const, columns: c.columns }));
    const plain: IndexModel[] = [];
    for (const index of indexes.filter((i) => i.table === relation.oid)) {
      if (index.expression) notes.push(`index "${index.name}" is on an expression: kept in the database, not declared`);
      else
        plain.push({
          name: index.name,
          unique: index.unique,
          origin: 'c',
          columns: index.columns,
          ...(index.where ? { where: index.where } : {}),
        });
    }
    const foreignKeys: ForeignKeyModel[] = own
      .filter((c) => {
        if (c.type !== 'f' || c.parent === null) return false;
        if (onArray(c.columns)) {
          notes.push(`foreign key (${c.columns.join(', ')}) → ${c.parent} is on an array: kept in the database, not declared`);
          return false;
        }
        if (c.local && served.has(c.parent)) return true;
        notes.push(`foreign key (${c.columns.join(', ')}) → ${c.parent} names a table not served here: kept in the database, not declared`);
        return false;
      })
      .map((c) => ({
        parent: c.parent as string,
        from: c.columns,
        to: c.parentColumns ?? [],
        onDelete: ACTIONS[c.onDelete] ?? 'no action',
        onUpdate: ACTIONS[c.onUpdate] ?? 'no action',
      }));
    tables.push({
      name: relation.name,
      kind: relation.kind === 'v' ? 'view' : 'table',
      columns: tableColumns,
      key: relation.kind === 'v' ? [] : key,
      autoIncrement: false,
      withoutRowid: false,
      keyGiven,
      indexes: [...uniques, ...plain],
      foreignKeys: relation.kind === 'v' ? [] : foreignKeys,
      notes,
      ...(relation.view ? { select: relation.view.trim().replace(/;$/, '') } : {}),
    });
  }
  return { tables, skipped, own };
}

/** How many migrations the database records already (none on a database no migrator has touched). */
export async function pgRecordedMigrations(db: pg.ClientBase): Promise<number> {
  const { rows } = await db.query<{ exists: boolean }>("SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS exists");
  if (!rows[0]?.exists) return 0;
  return Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${MIGRATIONS_TABLE}`)).rows[0]?.n ?? 0);
}

/** Records the first migration of `folder` as applied, as src/engine/postgres/migrate.ts records one it ran. */
export async function recordPgBaseline(db: pg.ClientBase, folder: string): Promise<void> {
  const [baseline] = readMigrationFiles({ migrationsFolder: folder });
  if (!baseline) throw new Error(`${folder} holds no migration to record`);
  await db.query('BEGIN');
  try {
    await db.query('CREATE SCHEMA IF NOT EXISTS "drizzle"');
    await db.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
    await db.query(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES ($1, $2)`, [baseline.hash, baseline.folderMillis]);
    await db.query('COMMIT');
  } catch (error) {
    await db.query('ROLLBACK');
    throw error;
  }
}

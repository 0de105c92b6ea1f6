// The PostgreSQL twin of the declared schema: each SQLite table of schema.ts (and the service's own
// tables) derived as a drizzle pg table with the same names, keys, indexes and foreign keys.
import { getTableColumns, is, SQL, StringChunk, sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  customType,
  doublePrecision,
  foreignKey,
  index,
  numeric,
  type PgColumnBuilderBase,
  type PgTable,
  PgTextBuilder,
  pgTable,
  pgView,
  primaryKey,
  text,
  timestamp,
  unique,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { getTableConfig, getViewConfig, type SQLiteColumn, SQLiteTable, SQLiteView } from 'drizzle-orm/sqlite-core';
import { customKindOf } from '../../db/columns.js';

/** Raw bytes: SQLite's BLOB as PostgreSQL's bytea (node-postgres reads and writes Buffers). */
const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
/** columns.ts's `bytes` (base64 in JSON) as bytea. */
const base64Bytea = customType<{ data: string; driverData: Buffer }>({
  dataType: () => 'bytea',
  toDriver: (value) => Buffer.from(value, 'base64'),
  // A view may hand back what its query made of the bytes (text): served as it comes.
  fromDriver: (value) => (Buffer.isBuffer(value) ? value.toString('base64') : String(value)),
});
/**
 * Any JSON value as jsonb. node-postgres already parses jsonb into values; drizzle's own jsonb
 * would parse a string value again (the string "1" read back as the number 1), so this one does not.
 */
const json = customType<{ data: unknown; driverData: string }>({
  dataType: () => 'jsonb',
  toDriver: (value) => JSON.stringify(value),
  fromDriver: (value) => value,
});

/**
 * A column of a type restable does not declare (a uuid, an enum, an array, an interval…), met in a database it
 * introspected as untyped(): its values go as text, which PostgreSQL reads as the parameter's type, and come back
 * as PostgreSQL's text for them (src/engine/postgres/pool.ts reads such types unparsed). `type` is the database's name for it.
 */
const nativeText = (type: string) =>
  customType<{ data: string | number; driverData: string }>({ dataType: () => type, toDriver: (value) => String(value) });

/** The types a column without a declared type may have where its values are JSON. */
const JSON_TYPES = new Set(['jsonb', 'json']);

/**
 * The database's type of each column, by pgColumnKey, as format_type spells it (readPgColumnTypes): what a
 * column without a declared type is in a database restable did not make.
 */
export type PgColumnTypes = ReadonlyMap<string, string>;

/** A column's key in PgColumnTypes: its table's and its own name as a JSON array (names may hold any character). */
export const pgColumnKey = (table: string, column: string) => JSON.stringify([table, column]);

/**
 * The PostgreSQL type of a SQLite column, by drizzle's column class. `inDatabase` is the type the database
 * gives the column, when known: a column without a declared type is jsonb unless it says otherwise. Integers are 64-bit in SQLite,
 * so `bigint` (read as a JS number: the API accepts safe integers only); a key SQLite assigns
 * becomes an identity column (BY DEFAULT, so that imported rows keep their keys).
 */
function builderOf(column: SQLiteColumn, serverAssigned: boolean, inDatabase: string | undefined): PgColumnBuilderBase {
  const name = column.name;
  // A column without a type keeps each value's JSON type (a number stays a number) as jsonb, unless the database
  // gives it another type (an introspected uuid, enum, array…): then its values are that type's text.
  const custom = customKindOf(column);
  if (custom === 'bytes') return base64Bytea(name);
  if (custom === 'untyped') return inDatabase === undefined || JSON_TYPES.has(inDatabase) ? json(name) : nativeText(inDatabase)(name);
  if (custom === 'dateText') return text(name);
  // A key the client gives (SQLite does not assign it either): no identity. A SQLite BOOLEAN stays its integers (a 2 stays a 2).
  if (custom === 'integer' || custom === 'booleanInteger') return bigint(name, { mode: 'number' });
  switch (column.columnType) {
    case 'SQLiteInteger': {
      const integer = bigint(name, { mode: 'number' });
      return serverAssigned ? integer.generatedByDefaultAsIdentity() : integer;
    }
    case 'SQLiteBoolean':
      return boolean(name);
    case 'SQLiteTimestamp':
      return timestamp(name, { withTimezone: true, mode: 'date', precision: 3 });
    case 'SQLiteReal':
      return doublePrecision(name);
    case 'SQLiteNumeric':
      return numeric(name);
    case 'SQLiteNumericNumber':
      return numeric(name, { mode: 'number' });
    case 'SQLiteNumericBigInt':
      return numeric(name, { mode: 'bigint' });
    case 'SQLiteTextJson':
    case 'SQLiteBlobJson':
      return json(name);
    case 'SQLiteBigInt':
      return bigint(name, { mode: 'bigint' });
    case 'SQLiteBlobBuffer':
      return bytea(name);
    case 'SQLiteText':
      return text(name, column.enumValues?.length ? { enum: column.enumValues as [string, ...string[]] } : {});
    default:
      throw new Error(
        `Column "${name}" (${column.columnType}) has no PostgreSQL equivalent in restable yet; use integer, real, text, numeric or blob.`,
      );
  }
}

const NOW_TIMESTAMP = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')";
const NOW_DATE = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')";
const NOW_TIME = "to_char(now() AT TIME ZONE 'UTC', 'HH24:MI:SS')";

/**
 * SQLite's current time in a text column, as SQLite writes it (UTC, its formats), in PostgreSQL's words:
 * its keywords, and the date functions real schemas use for them (`datetime('now')`), upper-cased and
 * without spaces. @see https://sqlite.org/lang_datefunc.html
 */
const SQLITE_NOW: Record<string, string> = {
  CURRENT_TIMESTAMP: NOW_TIMESTAMP,
  CURRENT_DATE: NOW_DATE,
  CURRENT_TIME: NOW_TIME,
  "DATETIME('NOW')": NOW_TIMESTAMP,
  "DATE('NOW')": NOW_DATE,
  "TIME('NOW')": NOW_TIME,
};

/**
 * A column's default on PostgreSQL: as declared, but for the current time in a text column, which
 * PostgreSQL would write as its own timestamp text (`2026-11-26 08:36:42.004801+00`) where SQLite writes
 * `2026-11-26 08:36:42`: the same value must read the same on both engines.
 */
function defaultOf(column: SQLiteColumn, pgText: boolean): unknown {
  const value = column.default;
  if (!pgText || !is(value, SQL)) return value;
  const chunks = value.queryChunks;
  if (!chunks.every((chunk) => is(chunk, StringChunk))) return value;
  const text = chunks
    .flatMap((chunk) => (chunk as StringChunk).value)
    .join('')
    .trim()
    .replace(/^\((.*)\)$/, '$1')
    .replace(/\s+/g, '')
    .toUpperCase();
  const now = SQLITE_NOW[text];
  return now === undefined ? value : sql.raw(now);
}

/** A column builder with the SQLite column's constraints, defaults and JS hooks. */
function columnOf(column: SQLiteColumn, soleKey: boolean, serverAssigned: boolean, inDatabase?: string) {
  // The builder's modifiers are typed per class; they all exist on PgColumnBuilder.
  const builder = builderOf(column, serverAssigned, inDatabase);
  let b = builder as unknown as {
    notNull(): typeof b;
    primaryKey(): typeof b;
    unique(name?: string): typeof b;
    default(value: unknown): typeof b;
    $defaultFn(fn: () => unknown): typeof b;
    $onUpdateFn(fn: () => unknown): typeof b;
    generatedAlwaysAs(as: SQL): typeof b;
  };
  if (soleKey) b = b.primaryKey();
  else if (column.notNull) b = b.notNull();
  if (column.isUnique) b = b.unique(column.uniqueName);
  if (column.default !== undefined) b = b.default(defaultOf(column, is(builder, PgTextBuilder)));
  if (column.defaultFn) b = b.$defaultFn(column.defaultFn);
  if (column.onUpdateFn) b = b.$onUpdateFn(column.onUpdateFn);
  // PostgreSQL has stored generated columns only: a virtual one is stored there (the same values). Its
  // expression is copied as written: it must mean the same in both dialects, as a view's query must.
  if (column.generated?.type === 'always') b = b.generatedAlwaysAs(column.generated.as as SQL);
  return b as unknown as PgColumnBuilderBase;
}

/** Whether SQLite assigns the column's values: an INTEGER PRIMARY KEY (a rowid alias). */
export function isRowidKey(column: SQLiteColumn, keyColumns: number): boolean {
  return keyColumns === 1 && column.primary && column.columnType === 'SQLiteInteger';
}

/**
 * Derives the PostgreSQL tables of every SQLite table among `schema`'s exports, by export name.
 * Foreign keys point at the derived parents, so a schema is derived as a whole. `types`: the
 * database's own column types, for a database restable may not have made (none: the types restable makes).
 */
export function toPgTables(schema: Record<string, unknown>, types: PgColumnTypes = new Map()): Record<string, PgTable> {
  const derived: Record<string, PgTable> = toPgTablesOnly(schema, types);
  // A view's SELECT is copied as written: it must mean the same in both dialects.
  for (const [exportName, view] of Object.entries(schema)) {
    if (!is(view, SQLiteView)) continue;
    const config = getViewConfig(view);
    const columns = Object.fromEntries(
      Object.entries(config.selectedFields as Record<string, SQLiteColumn>).map(([key, column]) => [
        key,
        columnOf(column, false, false, types.get(pgColumnKey(config.name, column.name))),
      ]),
    );
    const query = config.query;
    if (!query) throw new Error(`view "${config.name}" has no query to create it with on PostgreSQL`);
    derived[exportName] = pgView(config.name, columns).as(query) as unknown as PgTable;
  }
  return derived;
}

/** The tables of toPgTables. */
function toPgTablesOnly(schema: Record<string, unknown>, types: PgColumnTypes): Record<string, PgTable> {
  const sqliteTables = Object.entries(schema).filter((entry): entry is [string, SQLiteTable] => is(entry[1], SQLiteTable));
  const byTable = new Map<SQLiteTable, PgTable>();
  const derived: Record<string, PgTable> = {};
  for (const [exportName, table] of sqliteTables) {
    const config = getTableConfig(table);
    const compositeKey = config.primaryKeys[0];
    const keyColumns = compositeKey ? compositeKey.columns.length : config.columns.filter((c) => c.primary).length;
    const keyOf = new Map<string, string>(); // SQL column name → field key
    const columns: Record<string, PgColumnBuilderBase> = {};
    for (const [key, column] of Object.entries(table) as [string, unknown][]) {
      if (!config.columns.includes(column as SQLiteColumn)) continue;
      const c = column as SQLiteColumn;
      keyOf.set(c.name, key);
      columns[key] = columnOf(c, c.primary && keyColumns === 1, isRowidKey(c, keyColumns), types.get(pgColumnKey(config.name, c.name)));
    }
    const fieldsOf = (t: Record<string, unknown>, names: { name: string }[]) => names.map(({ name }) => t[keyOf.get(name) as string]);
    const pg = pgTable(config.name, columns, (t) => {
      const extras: unknown[] = [];
      if (compositeKey) extras.push(primaryKey({ name: compositeKey.getName(), columns: fieldsOf(t, compositeKey.columns) as never }));
      // CHECK constraints and partial-index conditions are SQL: copied as written, so they must mean the same in both dialects.
      for (const c of config.checks) extras.push(check(c.name, c.value));
      for (const u of config.uniqueConstraints) extras.push(unique(u.getName()).on(...(fieldsOf(t, u.columns) as [never])));
      for (const { config: ix } of config.indexes) {
        const on = ix.columns.map((c) => (is(c, SQL) ? c : t[keyOf.get((c as SQLiteColumn).name) as string])) as [never];
        const built = (ix.unique ? uniqueIndex(ix.name) : index(ix.name)).on(...on);
        extras.push(ix.where ? built.where(ix.where) : built);
      }
      for (const fk of config.foreignKeys) {
        const reference = fk.reference();
        const parent = byTable.get(reference.foreignTable) as PgTable;
        const parentKeys = new Map(Object.entries(getTableColumns(reference.foreignTable)).map(([key, c]) => [c.name, key]));
        const built = foreignKey({
          name: fk.getName(),
          columns: fieldsOf(t, reference.columns) as never,
          foreignColumns: reference.foreignColumns.map(
            (c) => (parent as unknown as Record<string, unknown>)[parentKeys.get(c.name) as string],
          ) as never,
        });
        if (fk.onDelete) built.onDelete(fk.onDelete);
        if (fk.onUpdate) built.onUpdate(fk.onUpdate);
        extras.push(built);
      }
      return extras as never;
    });
    byTable.set(table, pg);
    derived[exportName] = pg;
  }
  return derived;
}

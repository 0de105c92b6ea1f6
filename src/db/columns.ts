// Column types for databases restable did not create (see `npm run introspect`): a BLOB carried as base64
// text in JSON, a column declared without a type served as stored, and an integer key the client gives.
import type { Column } from 'drizzle-orm';
import { customType } from 'drizzle-orm/sqlite-core';

/** A scalar as SQLite stores it in a column without a type (a BLOB read as base64). */
export type Untyped = string | number | null;

const base64Of = (value: unknown): unknown => (Buffer.isBuffer(value) ? value.toString('base64') : value);

/** A BLOB column: base64 text in JSON (RFC 4648 §4), bytes in the database. */
export const bytes = customType<{ data: string; driverData: Buffer }>({
  dataType: () => 'blob',
  toDriver: (value) => Buffer.from(value, 'base64'),
  fromDriver: (value) => base64Of(value) as string,
});

/** A column declared without a type: any string or number, stored and served as it is (a BLOB as base64). */
export const untyped = customType<{ data: Untyped; driverData: Untyped }>({
  dataType: () => '',
  fromDriver: (value) => base64Of(value) as Untyped,
});

/**
 * An integer primary key the client gives: declared `int`, because SQLite makes only a key declared exactly
 * INTEGER its rowid and assigns it (https://sqlite.org/lang_createtable.html#rowid), and drizzle's integer()
 * is declared so. Served as an integer everywhere else (validation, filters, OpenAPI; `bigint` on PostgreSQL).
 */
export const intKey = customType<{ data: number; driverData: number }>({ dataType: () => 'int' });

/** Which of these types a column is, if any (custom columns are told apart by their SQL type). */
export function customKindOf(column: Column): 'bytes' | 'untyped' | 'integer' | undefined {
  if (column.columnType !== 'SQLiteCustomColumn') return undefined;
  const type = column.getSQLType();
  return type === 'blob' ? 'bytes' : type === '' ? 'untyped' : type === 'int' ? 'integer' : undefined;
}

/** Whether a column holds integers: drizzle's integer() (in number mode) or intKey(). */
export const isInteger = (column: Column): boolean => column.columnType === 'SQLiteInteger' || customKindOf(column) === 'integer';

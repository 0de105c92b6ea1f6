// Column types for databases restable did not create (see `npm run introspect`): a BLOB carried as base64
// text in JSON, a column declared without a type served as stored, an integer key the client gives, and
// a DATE/TIME column, text SQLite holds with numeric affinity.
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

/**
 * A DATE, TIME, DATETIME or TIMESTAMP column: text in JSON, declared `datetime`. Such a column has NUMERIC
 * affinity (https://sqlite.org/datatype3.html §3.1): SQLite stores text that reads as a number as that
 * number (`"02134"` as 2134), so the registry takes such text only where the number reads back as the
 * same text (an integer in its canonical form), and a value stored as a number is served as its text.
 */
export const dateText = customType<{ data: string; driverData: string | number }>({
  dataType: () => 'datetime',
  fromDriver: (value) => (typeof value === 'number' ? String(value) : value),
});

/**
 * A column declared BOOLEAN (BOOL…) in SQLite, which has no boolean type: NUMERIC affinity, 0 and 1 by
 * convention, and whatever else was written there. Served as the integer it holds (a 2 stays a 2, so
 * nothing changes a value it reads back); a JSON true or false is taken too, as 1 or 0. Declared `boolean`.
 */
export const booleanInteger = customType<{ data: number; driverData: number }>({ dataType: () => 'boolean' });

/** Whether a column keeps an instant as whole seconds: drizzle's integer({ mode: 'timestamp' }). */
export const keepsSeconds = (column: Column): boolean =>
  column.columnType === 'SQLiteTimestamp' && (column as Column & { mode?: string }).mode === 'timestamp';

/** An instant cut to the whole second at or before it, as drizzle stores it in such a column. */
export const wholeSecond = (instant: Date): Date => new Date(Math.floor(instant.getTime() / 1000) * 1000);

/** Which of these types a column is, if any (custom columns are told apart by their SQL type). */
export function customKindOf(column: Column): 'bytes' | 'untyped' | 'integer' | 'booleanInteger' | 'dateText' | undefined {
  if (column.columnType !== 'SQLiteCustomColumn') return undefined;
  switch (column.getSQLType()) {
    case 'blob':
      return 'bytes';
    case '':
      return 'untyped';
    case 'int':
      return 'integer';
    case 'datetime':
      return 'dateText';
    case 'boolean':
      return 'booleanInteger';
    default:
      return undefined;
  }
}

/** Whether a column holds text: drizzle's text() or dateText(). */
export const isText = (column: Column): boolean => column.columnType === 'SQLiteText' || customKindOf(column) === 'dateText';

/** Whether a column holds integers: drizzle's integer() (in number mode), intKey() or booleanInteger(). */
export const isInteger = (column: Column): boolean => {
  if (column.columnType === 'SQLiteInteger') return true;
  const custom = customKindOf(column);
  return custom === 'integer' || custom === 'booleanInteger';
};

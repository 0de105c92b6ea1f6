// The order in which copy-to-postgres inserts: tables after the tables they reference, and the rows of a
// table that references itself parents first. Pure: it reads the drizzle schema and rows, never a database.
import { getTableColumns, is } from 'drizzle-orm';
import { getTableConfig, type SQLiteColumn, SQLiteTable } from 'drizzle-orm/sqlite-core';

/** A refusal or failure its one-line message explains in full. */
export class CopyError extends Error {
  override name = 'CopyError';
}

export type Row = Record<string, unknown>;

/** The schema's SQLite tables, each after the tables its foreign keys point at (a self-reference aside). */
export function parentsFirst(schema: Record<string, unknown>): [string, SQLiteTable][] {
  const tables = Object.entries(schema).filter((entry): entry is [string, SQLiteTable] => is(entry[1], SQLiteTable));
  const ordered: [string, SQLiteTable][] = [];
  const state = new Map<SQLiteTable, 'visiting' | 'done'>();
  const visit = (entry: [string, SQLiteTable], path: string[]) => {
    const [, table] = entry;
    if (state.get(table) === 'done') return;
    const name = getTableConfig(table).name;
    if (state.get(table) === 'visiting') {
      throw new CopyError(`the tables ${[...path, name].join(' → ')} reference each other in a cycle; copy-to-postgres cannot order them`);
    }
    state.set(table, 'visiting');
    for (const fk of getTableConfig(table).foreignKeys) {
      const parent = fk.reference().foreignTable;
      const parentEntry = tables.find(([, t]) => t === parent);
      if (parent !== table && parentEntry) visit(parentEntry, [...path, name]);
    }
    state.set(table, 'done');
    ordered.push(entry);
  };
  for (const entry of tables) visit(entry, []);
  return ordered;
}

/**
 * Rows of a table that references itself (a tree), parents before children, so that every foreign key
 * holds at the moment its row is inserted (PostgreSQL checks each statement, not the transaction).
 */
export function treeOrder(table: SQLiteTable, rows: Iterable<Row>): Iterable<Row> {
  const columns = getTableColumns(table);
  const keyOf = (column: SQLiteColumn) => Object.keys(columns).find((key) => columns[key] === column) as string;
  const selfKeys = getTableConfig(table)
    .foreignKeys.map((fk) => fk.reference())
    .filter((reference) => reference.foreignTable === table)
    .map((reference) => ({ from: reference.columns.map(keyOf), to: reference.foreignColumns.map(keyOf) }));
  if (selfKeys.length === 0) return rows; // streamed: no table is held in memory but a tree
  const id = (row: Row, keys: string[]) => JSON.stringify(keys.map((key) => row[key]));
  const inserted = selfKeys.map(() => new Set<string>());
  const ordered: Row[] = [];
  let waiting = [...rows];
  while (waiting.length > 0) {
    // A row that names itself (a root that is its own manager) is its own parent: PostgreSQL checks it after its insert.
    const ready = (row: Row) =>
      selfKeys.every(
        ({ from, to }, i) => from.some((key) => row[key] == null) || inserted[i]?.has(id(row, from)) || id(row, from) === id(row, to),
      );
    // One level at a time: the rows ready now are decided before any of them counts as inserted.
    const next: Row[] = [];
    const later: Row[] = [];
    for (const row of waiting) (ready(row) ? next : later).push(row);
    if (next.length === 0) {
      throw new CopyError(`${waiting.length} row(s) of ${getTableConfig(table).name} point at rows that are missing or form a cycle`);
    }
    for (const row of next) {
      ordered.push(row);
      for (const [i, { to }] of selfKeys.entries()) inserted[i]?.add(id(row, to));
    }
    waiting = later;
  }
  return ordered;
}

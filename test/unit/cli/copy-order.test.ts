// Unit suite of copy-to-postgres's insertion order (src/cli/copy-order.ts): no database; tables after their
// parents, and a table's own tree parents first, every row kept whatever the depth.
import { type AnySQLiteColumn, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CopyError, parentsFirst, type Row, treeOrder } from '../../../src/cli/copy-order.js';

const staff = sqliteTable('staff', {
  id: integer('id').primaryKey(),
  name: text('name'),
  bossId: integer('boss_id').references((): AnySQLiteColumn => staff.id),
});
const desks = sqliteTable('desks', { id: integer('id').primaryKey(), staffId: integer('staff_id').references(() => staff.id) });

const Order = suite('copy order');

Order('puts every table after the tables it references', () => {
  assert.equal(
    parentsFirst({ desks, staff }).map(([name]) => name),
    ['staff', 'desks'],
  );
});

Order('orders a tree parents first and keeps every row, a level at a time', () => {
  // 1 ← 2, 3 ← 4 ← 5, and 6 ← 7 whose parent comes last in the input: four levels, children before parents.
  const rows: Row[] = [
    { id: 5, bossId: 4 },
    { id: 7, bossId: 6 },
    { id: 4, bossId: 3 },
    { id: 2, bossId: 1 },
    { id: 3, bossId: 1 },
    { id: 1, bossId: null },
    { id: 6, bossId: null },
  ];
  const ordered = [...treeOrder(staff, rows)];
  assert.is(ordered.length, rows.length);
  const at = new Map(ordered.map((row, i) => [row.id, i]));
  for (const row of rows) {
    if (row.bossId !== null) assert.ok((at.get(row.bossId) as number) < (at.get(row.id) as number), `${row.id} after ${row.bossId}`);
  }
});

Order('a row that names itself is its own parent: copied, and its children after it', () => {
  const rows: Row[] = [
    { id: 2, bossId: 1 },
    { id: 1, bossId: 1 },
  ];
  assert.equal(
    [...treeOrder(staff, rows)].map((row) => row.id),
    [1, 2],
  );
});

Order('refuses rows that point at a missing row or form a cycle, naming how many', () => {
  const missing = () => [
    ...treeOrder(staff, [
      { id: 1, bossId: null },
      { id: 2, bossId: 9 },
    ]),
  ];
  assert.throws(missing, (error: Error) => error instanceof CopyError && /^1 row\(s\) of staff point at rows/.test(error.message));
  const cycle = () => [
    ...treeOrder(staff, [
      { id: 1, bossId: 2 },
      { id: 2, bossId: 1 },
    ]),
  ];
  assert.throws(cycle, (error: Error) => error instanceof CopyError && /^2 row\(s\) of staff/.test(error.message));
});

Order('streams the rows of a table that references no row of its own', () => {
  const rows = [{ id: 1, staffId: 1 }];
  assert.is(treeOrder(desks, rows), rows);
});

Order.run();

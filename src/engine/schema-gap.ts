// What the schema declares that the database does not hold (tables, columns): read by /readyz
// (src/engine/backend.ts) and once at start-up (src/main.ts), on either engine. Reads only.
import type Database from 'better-sqlite3';
import type pg from 'pg';
import type { Resource } from '../model/registry.js';

/**
 * The tables (named alone, when every field is absent) and `table.column`s the resources declare that
 * `present` (the database's `table.column` names) lacks, in declaration order.
 */
export function missingFrom(resources: readonly Resource[], present: ReadonlySet<string>): string[] {
  const missing: string[] = [];
  for (const resource of resources) {
    const absent = resource.fields.filter((f) => !present.has(`${resource.name}.${f.column.name}`));
    if (absent.length === resource.fields.length) missing.push(resource.name);
    else for (const field of absent) missing.push(`${resource.name}.${field.column.name}`);
  }
  return missing;
}

/** The first few names of a list, then how many more: `a, b, c, d, e and 3 more`. */
export function firstNames(names: readonly string[], shown = 5): string {
  return names.slice(0, shown).join(', ') + (names.length > shown ? ` and ${names.length - shown} more` : '');
}

/** SQLite: the `table.column` names of the resources' tables and views (pragma_table_xinfo reads both). */
export function sqliteColumns(sqlite: Database.Database, resources: readonly Resource[]): Set<string> {
  const columnsOf = sqlite.prepare('SELECT name FROM pragma_table_xinfo(?)').pluck();
  return new Set(resources.flatMap((r) => (columnsOf.all(r.name) as string[]).map((c) => `${r.name}.${c}`)));
}

/** PostgreSQL: the `table.column` names of the service's schema (current_schema()). */
export async function pgColumns(db: pg.Pool | pg.ClientBase): Promise<Set<string>> {
  const { rows } = await db.query<{ t: string; c: string }>(
    'SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = current_schema()',
  );
  return new Set(rows.map((r) => `${r.t}.${r.c}`));
}

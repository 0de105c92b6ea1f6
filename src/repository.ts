// Data access for one resource kind: list / get / create / replace / patch / remove over drizzle.
// It maps SQLite's constraint errors to ApiErrors (once, here) and knows nothing of HTTP.
import { asc, eq, getTableColumns, type SQL, sql } from 'drizzle-orm';
import type { Db } from './db/client.js';
import { ApiError } from './errors.js';
import type { Resource } from './resources.js';
import { type Row, toPatchedRow, toReplacementRow } from './validation.js';

export type Id = number | string;

export interface ListOptions {
  /** Only rows whose `field` equals `value` (a related list). */
  where?: { field: string; value: unknown };
  limit: number;
}

export interface Repository {
  list(options: ListOptions): Row[];
  get(id: Id): Row | undefined;
  create(row: Row): Row;
  replace(id: Id, body: unknown): Row;
  patch(id: Id, patch: unknown): Row;
  remove(id: Id): void;
}

/** The better-sqlite3 error under drizzle's DrizzleQueryError wrapper, if any. */
function sqliteErrorOf(error: unknown): (Error & { code: string }) | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_')) return e as Error & { code: string };
  }
  return undefined;
}

type Failure = 'unique' | 'foreignKey' | 'constraint' | 'unavailable';

/** What kind of failure a SQLite error is; RESTRICT reports itself as a trigger constraint. */
function classify(error: { code: string; message: string }): Failure | undefined {
  const { code, message } = error;
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'unique';
  if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || message.startsWith('FOREIGN KEY constraint failed')) return 'foreignKey';
  if (code.startsWith('SQLITE_CONSTRAINT')) return 'constraint';
  if (/^SQLITE_(BUSY|LOCKED|READONLY|FULL|IOERR|CANTOPEN)/.test(code)) return 'unavailable';
  return undefined;
}

/** Field keys named in a constraint message such as "UNIQUE constraint failed: users.email". */
function constrainedFields(resource: Resource, message: string): string[] {
  const columns = message.split(':')[1]?.split(',') ?? [];
  return columns.map((c) => resource.fieldOfColumn.get(c.trim().split('.')[1] ?? '') ?? '').filter(Boolean);
}

export function createRepository(db: Db, resource: Resource): Repository {
  const { table } = resource;
  const columns = getTableColumns(table);
  const pk = resource.primaryKey.column;
  const writable = resource.fields.filter((f) => !f.readOnly);

  const byId = db
    .select()
    .from(table)
    .where(eq(pk, sql.placeholder('id')))
    .prepare();

  /** Runs `work` in an IMMEDIATE transaction and maps constraint failures to client errors. */
  function write<T>(action: 'write' | 'remove', work: () => T): T {
    try {
      return db.transaction(work, { behavior: 'immediate' });
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw toApiError(action, error);
    }
  }

  function toApiError(action: 'write' | 'remove', error: unknown): unknown {
    const sqliteError = sqliteErrorOf(error);
    switch (sqliteError && classify(sqliteError)) {
      case 'unique': {
        const fields = constrainedFields(resource, (sqliteError as Error).message);
        return new ApiError('conflict', `A ${resource.name} element with the same ${fields.join(', ') || 'key'} already exists.`, {
          errors: fields.map((path) => ({ path, message: 'is already taken' })),
          cause: error,
        });
      }
      case 'foreignKey':
        return action === 'remove'
          ? new ApiError('conflict', `This ${resource.name} element is still referenced by ${referrers()}; remove those first.`, {
              cause: error,
            })
          : new ApiError('unprocessable', 'A reference points at an element that does not exist.', { cause: error });
      case 'constraint':
        return new ApiError('unprocessable', `The ${resource.name} element breaks a constraint of its table.`, { cause: error });
      case 'unavailable':
        return new ApiError('unavailable', 'The database cannot accept writes right now; try again later.', {
          headers: { 'Retry-After': '1' },
          cause: error,
        });
      default:
        return error;
    }
  }

  /** The kinds whose foreign keys may block a delete of this kind (all but SET NULL / CASCADE ones). */
  function referrers(): string {
    const blocking = resource.referencedBy.filter((r) => !['set null', 'set default', 'cascade'].includes(r.onDelete));
    return blocking.map((r) => `${r.child.name} (${r.field})`).join(' or ') || 'other elements';
  }

  /** Names each foreign key of `row` that points at no parent (a clearer 422 than SQLite's). */
  function checkReferences(row: Row): void {
    const errors = resource.foreignKeys
      .filter(({ field, parent }) => {
        const value = row[field];
        if (value === null || value === undefined) return false;
        return !db.select({ one: sql`1` }).from(parent.table).where(eq(parent.primaryKey.column, value)).get();
      })
      .map(({ field, parent }) => ({ path: field, message: `names no ${parent.name} element` }));
    if (errors.length > 0) throw new ApiError('unprocessable', 'A reference points at an element that does not exist.', { errors });
  }

  /** Every writable field: the given value, else the column's default, else null. */
  function withDefaults(row: Row): Record<string, unknown> {
    const full: Record<string, unknown> = {};
    for (const { key, column } of writable) {
      full[key] = key in row ? row[key] : (column.defaultFn?.() ?? column.default ?? null);
    }
    return full;
  }

  function update(id: Id, toRow: (current: Row) => Row): Row {
    return write('write', () => {
      const current = byId.get({ id });
      if (!current) throw notFound(resource, id);
      const row = withDefaults(toRow(current));
      checkReferences(row);
      return db.update(table).set(row).where(eq(pk, id)).returning().get() as Row;
    });
  }

  return {
    list({ where, limit }) {
      const condition: SQL | undefined = where ? eq(columns[where.field] as typeof pk, where.value) : undefined;
      return db.select().from(table).where(condition).orderBy(asc(pk)).limit(limit).all();
    },
    get: (id) => byId.get({ id }),
    create(row) {
      return write('write', () => {
        checkReferences(row);
        return db.insert(table).values(row).returning().get() as Row;
      });
    },
    replace: (id, body) => update(id, (current) => toReplacementRow(resource, body, current)),
    patch: (id, patch) => update(id, (current) => toPatchedRow(resource, patch, current)),
    remove(id) {
      write('remove', () => {
        const { changes } = db.delete(table).where(eq(pk, id)).run();
        if (changes === 0) throw notFound(resource, id);
      });
    },
  };
}

/** The 404 for an id that names no element of `resource`. */
export function notFound(resource: Resource, id: unknown): ApiError {
  return new ApiError('notFound', `There is no ${resource.name} element with id ${JSON.stringify(id)}.`);
}

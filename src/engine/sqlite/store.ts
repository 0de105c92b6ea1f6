// The SQLite store: raw better-sqlite3 statements per resource kind, their SQL built once with drizzle
// and read back with toSQL(), rows keyed by field (no per-row mapping but for columns that need it).
import type Database from 'better-sqlite3';
import { and, asc, type Column, count, desc, eq, gt, inArray, lte, type SQL, sql } from 'drizzle-orm';
import { integer, real, SQLiteSyncDialect, type SQLiteTable, sqliteTable } from 'drizzle-orm/sqlite-core';
import { customKindOf } from '../../db/columns.js';
import { idempotencyKeys } from '../../db/internal-schema.js';
import { fts5Query, searchIndexName } from '../../db/search.js';
import { ApiError, atElement } from '../../errors.js';
import { onFirstUse } from '../../first-use.js';
import { type Field, foreignKeysOf, type Id, type KeyValue, type Resource } from '../../model/registry.js';
import { KEY_TTL_MS, reusedKey } from '../../request/idempotency.js';
import type { Row } from '../../request/validation.js';
import { sqliteChangeLog } from '../changes.js';
import {
  assignsRowid,
  type Buildable,
  cached,
  encoded,
  encodes,
  inInsertOrder,
  insertPieces,
  keyCondition,
  keyParams,
  type ListDialect,
  type ListPlan,
  listSelection,
  naturalOrder,
  pageOf,
  pieceArgs,
  pieceValues,
  planList,
  positionOf,
  rankWithin,
  rowMaker,
  rowRules,
  type SearchSql,
  selectionOf,
  toStatement,
  valuesOf,
} from '../sql.js';
import {
  type Created,
  type Dangling,
  fieldsNamedIn,
  fieldsOfCheck,
  type MaybePromise,
  notFound,
  type Once,
  type Page,
  type ResourceStore,
  refusals,
  type Store,
  type Transaction,
} from '../store.js';
import { BUSY_TIMEOUT_MS, type Db } from './connection.js';
import { createGroupCommit, type GroupCommit, type RefusedAtCommit } from './group-commit.js';

/** The better-sqlite3 error under any wrapper, if any. */
function sqliteErrorOf(error: unknown): (Error & { code: string }) | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_')) return e as Error & { code: string };
  }
  return undefined;
}

type Failure = 'unique' | 'foreignKey' | 'constraint' | 'unavailable';

/** SQLite's codes for a database file that is damaged ("malformed") or not a database. */
export const DAMAGED = /^SQLITE_(CORRUPT|NOTADB)/;

/** What kind of failure a SQLite error is; RESTRICT reports itself as a trigger constraint. */
function classify(error: { code: string; message: string }): Failure | undefined {
  const { code, message } = error;
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'unique';
  if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || message.startsWith('FOREIGN KEY constraint failed')) return 'foreignKey';
  if (code.startsWith('SQLITE_CONSTRAINT')) return 'constraint';
  if (/^SQLITE_(BUSY|LOCKED|READONLY|FULL|IOERR|CANTOPEN)/.test(code) || DAMAGED.test(code)) return 'unavailable';
  return undefined;
}

/** Thrown to roll back a transaction that only finds out which element a refused commit is about. */
const DIAGNOSED = Symbol('diagnosed');

/** The longest constraint expression quoted in a refusal (a table's own CHECK can be long). */
const MAX_RULE = 200;

/**
 * A refusal by a constraint of the table's own, named as SQLite names it: a NOT NULL column as its
 * field's "is required", a CHECK by its expression (or its name) with an entry for each field it
 * refers to (its expression's columns, the schema's for a named one). @see https://sqlite.org/lang_createtable.html#ckconst
 */
function constraintRefusal(resource: Resource, sqliteError: Error & { code: string }, error: unknown): ApiError {
  const text = sqliteError.message.replace(/^[A-Z ]+ constraint failed: /, '');
  if (sqliteError.code === 'SQLITE_CONSTRAINT_NOTNULL') {
    const column = text.slice(text.lastIndexOf('.') + 1);
    const field = resource.fields.find((f) => f.column.name === column);
    if (field) return refusals.missingValue(resource, [field.key], error);
  }
  if (sqliteError.code !== 'SQLITE_CONSTRAINT_CHECK' || text === sqliteError.message) return refusals.constraint(resource, error);
  const points = [...text];
  const rule = `CHECK ${points.length > MAX_RULE ? `${points.slice(0, MAX_RULE).join('')}…` : text}`;
  // SQLite names a named CHECK by its name, an unnamed one by its expression: the schema's declaration, or the words, tell the fields.
  const declared = fieldsOfCheck(resource, text);
  return refusals.constraint(resource, error, rule, declared.length > 0 ? declared : fieldsNamedIn(resource, text));
}

/**
 * The 503 for a write the database cannot take right now (busy, disk full, read-only, I/O error),
 * or undefined for any other error. Shared by every writer (resources, idempotency keys, secrets).
 */
export function unavailableFrom(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error.code === 'unavailable' ? error : undefined;
  const sqliteError = sqliteErrorOf(error);
  if (!sqliteError || classify(sqliteError) !== 'unavailable') return undefined;
  // A damaged file (a disk fault, a copy made while written) answers so until it is restored from a backup: no
  // Retry-After, since trying again will not help.
  if (DAMAGED.test(sqliteError.code)) {
    return new ApiError('unavailable', 'The database file is damaged; it must be restored from a backup.', {
      cause: sqliteError,
      problemCode: 'database-damaged',
    });
  }
  return refusals.unavailable('The database cannot accept writes right now; try again later.', sqliteError);
}

/** The 503 for a statement over a table or column the schema declares and the database lacks, or undefined. */
export function schemaAheadFrom(error: unknown): ApiError | undefined {
  const sqliteError = sqliteErrorOf(error);
  // A read names what is missing one way, an INSERT another ("table pets has no column named nickname").
  const ahead =
    sqliteError?.code === 'SQLITE_ERROR' && /^(no such (table|column): |table .+ has no column named )/.test(sqliteError.message);
  return ahead ? refusals.schemaAhead(error) : undefined;
}

/**
 * Field keys named in a constraint message such as "UNIQUE constraint failed: users.email, users.name";
 * none when it names them not all (an index on an expression is named as "index 'name'").
 */
function constrainedFields(resource: Resource, message: string): string[] {
  const prefix = 'constraint failed: ';
  const at = message.indexOf(prefix);
  if (at < 0) return [];
  // SQLite matches table names case-insensitively (ASCII), and spells this one as its CREATE TABLE did.
  const table = `${resource.name}.`.toLowerCase();
  const fields = message
    .slice(at + prefix.length)
    .split(', ')
    .map((part) =>
      part.slice(0, table.length).toLowerCase() === table ? resource.fieldOfColumn.get(part.slice(table.length)) : undefined,
    );
  return fields.every((field) => field !== undefined) ? (fields as string[]) : [];
}

/** A raw statement with its parameters in SQL order: each a named placeholder or a constant. */
interface Prepared {
  statement: Database.Statement;
  args: (values: Record<string, unknown>) => unknown[];
}

/** Prepares a drizzle-built query as a raw statement (read back once with toSQL()). */
function prepare(sqlite: Database.Database, query: Buildable): Prepared {
  const { text, args } = toStatement(query);
  return { statement: sqlite.prepare(text), args };
}

/** The most values one statement may bind (SQLITE_MAX_VARIABLE_NUMBER since SQLite 3.32). */
const SQLITE_MAX_PARAMETERS = 32766;

/**
 * A dateText() field as text: its column has numeric affinity, which would turn a value compared with it
 * that reads as a number (`1970`) into that number, and numbers sort before any text.
 */
const asText = (field: Field): SQL | undefined =>
  customKindOf(field.column) === 'dateText' ? sql`CAST(${field.column} AS TEXT)` : undefined;

/** SQLite's spelling of the list language: its own NULL order and binary text collation are the reference. */
const SQLITE_LIST: ListDialect = {
  column: (field) => field.column,
  compared: (field) => asText(field) ?? sql`${field.column}`,
  text: (field) => sql`${field.column}`,
  contains: (text, p) => sql`instr(${text}, ${p}) > 0`,
  // instr counts bytes, so a NUL in either counts (length() of a text stops at its first NUL), and an empty
  // value is a prefix of every text, an empty one included (substr of an empty BLOB is NULL).
  startsWith: (text, p) => sql`instr(${text}, ${p}) = 1`,
  ordered: (field) => asText(field) ?? sql`${field.column}`,
  orderBy: ({ field, descending }) => {
    const ordered = asText(field) ?? field.column;
    return descending ? desc(ordered) : asc(ordered);
  },
  // A JSON array bound once: the same prepared statement for any number of values.
  among: (column, p) => sql`${column} IN (SELECT value FROM json_each(${p}))`,
  amongValue: (values) => JSON.stringify(values),
};

/**
 * A searchable kind's FTS5 index (built by its migration, see src/db/search.ts) as drizzle names it,
 * and how a list searches it: the MATCH of `q`'s words, and FTS5's rank (bm25: lower is better).
 */
function searchOf(resource: Resource): { index: ReturnType<typeof ftsTable>; sql: SearchSql } | undefined {
  if (resource.searchable.length === 0) return undefined;
  const index = ftsTable(searchIndexName(resource.name));
  return {
    index,
    sql: {
      value: fts5Query,
      match: (p) => sql`${index} MATCH ${p}`,
      rank: () => sql`${index.rank}`,
      higherIsBetter: false,
      key: sql`${index.rowid}`,
    },
  };
}

const ftsTable = (name: string) => sqliteTable(name, { rowid: integer('rowid'), rank: real('rank') });

function createKindStore(
  sqlite: Database.Database,
  db: Db,
  group: GroupCommit,
  keys: KeyStatements,
  resource: Resource,
): { kind: ResourceStore; direct: ResourceStore } {
  const table = resource.table as SQLiteTable;
  const keyColumns = resource.key.map((f) => f.column);
  const soleKey = keyColumns.length === 1;
  const selection = selectionOf(resource.fields);
  const rules = rowRules(resource);
  /** A row from the raw values of a statement that selects `selection`. */
  const toRow = rowMaker(resource.fields);
  /** A statement over `selection` that answers raw arrays (see rowMaker). */
  const selecting = (query: Buildable): Prepared => {
    const prepared = prepare(sqlite, query);
    prepared.statement.raw();
    return prepared;
  };

  /**
   * Runs a statement whose only parameters are the key's values (keyCondition), in key order, each
   * as its column stores it (a BLOB key travels as base64); most keys need no encoding.
   */
  const encodedKey = keyColumns.some(encodes);
  /** The key's values under keyCondition's placeholder names, each as its column stores it. */
  const keyArgs = (id: Id) => {
    const params = keyParams(resource, id);
    if (encodedKey) {
      keyColumns.forEach((column, i) => {
        params[`__k${i}`] = encoded(column, params[`__k${i}`]);
      });
    }
    return params;
  };
  const atKey = <T>(statement: Database.Statement, run: 'get' | 'run', id: Id): T => {
    if (encodedKey) return statement[run](...resource.keyValues(id).map((value, i) => encoded(keyColumns[i] as Column, value))) as T;
    return (soleKey ? statement[run](id) : statement[run](...(id as KeyValue[]))) as T;
  };
  // A kind without a key has no element: only its lists are served (a view has no table to write).
  const keyed = keyColumns.length > 0;
  // Every statement is prepared on the kind's first use of it: a schema of 300 kinds costs no memory for those never served.
  const byId = onFirstUse(() => selecting(db.select(selection).from(table).where(keyCondition(keyColumns))).statement);
  const deleteRow = onFirstUse(() => prepare(sqlite, db.delete(table).where(keyCondition(keyColumns))).statement);
  /** Whether a key names a row: no column is read (OPTIONS, refusals, and a related list whose page came back empty ask it). */
  const existsById = onFirstUse(() =>
    prepare(sqlite, db.select({ one: sql`1` }).from(table).where(keyCondition(keyColumns))).statement.pluck(),
  );
  /** The values of `fields` as placeholders named by their keys. */
  const placeholders = (fields: Field[]) => Object.fromEntries(fields.map((f) => [f.key, sql.placeholder(f.key)]));

  /**
   * The value of a column's SQL-expression default, computed by SQLite (prepared on first use): an
   * INSERT leaves such a column out, but a PUT that leaves the field out must still set its default.
   */
  const sqlDefaultStatements = new Map<string, Database.Statement>();
  const sqlDefaultOf = ({ key, column }: Field): unknown => {
    let statement = sqlDefaultStatements.get(key);
    if (!statement) {
      const query = new SQLiteSyncDialect().sqlToQuery(column.default as SQL);
      statement = sqlite.prepare(`select ${query.sql}`).pluck();
      if (query.params.length > 0) statement.bind(...query.params);
      sqlDefaultStatements.set(key, statement);
    }
    // What SQLite computed is a stored value: decoded as a read would (a JSON column's text parsed), since
    // the row it goes into is encoded again on its way to the UPDATE.
    const value = statement.get();
    return value === null ? null : column.mapFromDriverValue(value);
  };
  const inserts = new Map<string, Prepared>();
  /** The INSERT for the columns this row sets (one statement unless some default is an SQL expression). */
  const insertFor = (row: Row): { fields: Field[]; prepared: Prepared } => {
    const fields = rules.insertedFor(row);
    const shape = fields.map((f) => f.key).join(',');
    const prepared = cached(inserts, shape, () =>
      selecting(
        db
          .insert(table)
          .values(placeholders(fields) as never)
          .returning(selection as never),
      ),
    );
    return { fields, prepared };
  };
  const insertOne = (row: Row): Row => {
    const { fields, prepared } = insertFor(row);
    return toRow(prepared.statement.get(prepared.args(valuesOf(fields, row))) as unknown[]);
  };
  /**
   * A bulk create's rows in multi-row INSERTs (one statement per up to MAX_ROWS_PER_INSERT rows: ~4× faster than a
   * statement per row) when the database assigns the key from the rowid, whose order puts the
   * returned rows back in request order. A piece that fails is run again row by row (the failed
   * statement left nothing behind), so that the refusal names its element through `locate`.
   */
  const rowidKey = assignsRowid(resource);
  const manyInserts = new Map<string, Prepared>();
  const insertMany = (rows: Row[], locate: (index: number) => void): Row[] => {
    if (!rowidKey) {
      return rows.map((row, i) => {
        locate(i);
        return insertOne(row);
      });
    }
    const created: Row[] = [];
    for (const piece of insertPieces(rows, rules.insertedFor, SQLITE_MAX_PARAMETERS)) {
      const { start, size, fields } = piece;
      locate(start);
      if (size === 1) {
        created.push(insertOne(rows[start] as Row));
        continue;
      }
      const prepared = cached(manyInserts, `${fields.map((f) => f.key).join(',')}|${size}`, () =>
        selecting(
          db
            .insert(table)
            .values(pieceValues(fields, size) as never)
            .returning(selection as never),
        ),
      );
      let returned: unknown[][];
      try {
        returned = prepared.statement.all(pieceArgs(prepared, piece, rows)) as unknown[][];
      } catch (error) {
        const failure = sqliteErrorOf(error);
        if (!failure || classify(failure) === 'unavailable' || !failure.code.startsWith('SQLITE_CONSTRAINT')) throw error;
        for (let i = start; i < start + size; i++) {
          locate(i);
          created.push(insertOne(rows[i] as Row));
        }
        continue;
      }
      created.push(...inInsertOrder(returned.map(toRow), (resource.key[0] as Field).key));
    }
    return created;
  };
  // A kind whose every field is its key has nothing to set: a PUT or PATCH only checks and answers the row.
  const updateRow =
    keyed && rules.updated.length > 0
      ? onFirstUse(() =>
          selecting(
            db
              .update(table)
              .set(placeholders(rules.updated) as never)
              .where(keyCondition(keyColumns))
              .returning(selection as never),
          ),
        )
      : undefined;
  const listStatements = new Map<string, Prepared>();
  const countStatements = new Map<string, Prepared>();
  const search = searchOf(resource);
  /** A list's FROM joined to the kind's FTS5 index when it searches (the index's rowid is the key). */
  const searching = <Q extends { innerJoin: (...args: never[]) => unknown }>(from: Q, plan: ListPlan): Q =>
    plan.searching && search
      ? (from.innerJoin as (table: SQLiteTable, on: SQL) => Q)(search.index, eq(search.index.rowid, keyColumns[0] as Column))
      : from;
  /** Prepares a list statement; one that searches before the index's migration ran is a 503 that says so. */
  const preparing = (plan: ListPlan, build: () => Prepared): Prepared => {
    try {
      return build();
    } catch (error) {
      const missing =
        plan.searching && search && sqliteErrorOf(error)?.message.includes(`no such table: ${searchIndexName(resource.name)}`);
      throw missing ? refusals.searchIndexMissing(resource, error) : error;
    }
  };
  /**
   * Whether a foreign key's values name a parent: a statement per foreign key, of one column or several,
   * prepared on first use (only the 422 after a foreign-key failure reads them).
   */
  const parentStatements = onFirstUse(() =>
    foreignKeysOf(resource).map((reference) => ({
      ...reference,
      statement: prepare(
        sqlite,
        db
          .select({ one: sql`1` })
          .from(reference.parent.table)
          .where(keyCondition(reference.targets.map((t) => t.column))),
      ).statement,
    })),
  );

  /**
   * After SQLite refused a foreign key (its message names none): the foreign keys of `row` that name no
   * parent, for a 422 that names their fields. One with a NULL value is not checked (MATCH SIMPLE).
   */
  function missingParents(row: Row): Dangling[] {
    return parentStatements().filter(({ fields, targets, statement }) => {
      const values = fields.map((field) => row[field]);
      if (values.some((value) => value === null || value === undefined)) return false;
      return !statement.get(...values.map((value, i) => encoded((targets[i] as Field).column, value)));
    });
  }

  /**
   * The first of `rows` whose references name nothing once all of them are written (-1: none found), for a
   * bulk create whose commit a deferred foreign key refused: they are written again in a transaction rolled
   * back at once, so that an element naming another of the array (written before or after it) is not blamed.
   */
  function firstDangling(rows: Row[]): number {
    let found = -1;
    try {
      sqlite.transaction(() => {
        found = insertMany(rows, () => undefined).findIndex((row) => missingParents(row).length > 0);
        throw DIAGNOSED;
      })();
    } catch (error) {
      if (error !== DIAGNOSED) return -1; // another connection's lock, say: the refusal names no element
    }
    return found;
  }

  /**
   * A refused foreign key of a write: fields of the row that name nothing (422); else, when elements of
   * another kind name a field of this one other than its key (which no write changes), the change of that
   * field under them (409, as a delete would be).
   */
  function refusedReference(row: Row | undefined, error: unknown): ApiError {
    const missing = row ? missingParents(row) : [];
    if (missing.length === 0 && resource.referencedBy.some((r) => !r.byKey)) return refusals.stillReferenced(resource, error);
    return refusals.missingParent(resource, missing, error);
  }

  /** A constraint failure of a write as the client's error; anything else unchanged. */
  function toApiError(action: 'write' | 'remove', error: unknown, row?: Row): unknown {
    const sqliteError = sqliteErrorOf(error);
    switch (sqliteError && classify(sqliteError)) {
      case 'unique':
        return refusals.taken(resource, constrainedFields(resource, (sqliteError as Error).message), error);
      case 'foreignKey':
        return action === 'remove' ? refusals.stillReferenced(resource, error) : refusedReference(row, error);
      case 'constraint':
        return constraintRefusal(resource, sqliteError as Error & { code: string }, error);
      case 'unavailable':
        return unavailableFrom(error);
      default:
        return error;
    }
  }

  /**
   * Runs `work` in the group's transaction, in its own savepoint, mapping constraint failures, those its
   * commit finds (a deferred foreign key) included. `rowOf`: the row written, for a 422 that names its
   * fields; `locate`: names a bulk create's element; `atCommit`: runs before a commit's refusal is mapped.
   */
  const writer =
    (submit: Submit) =>
    <T>(
      action: 'write' | 'remove',
      work: () => T,
      rowOf: () => Row | undefined = () => undefined,
      locate: (error: unknown) => unknown = (error) => error,
      atCommit?: () => void,
    ): MaybePromise<T> => {
      const refuse = (error: unknown) => locate(error instanceof ApiError ? error : toApiError(action, error, rowOf()));
      return submit(
        () => {
          try {
            return work();
          } catch (error) {
            throw refuse(error);
          }
        },
        (error) => {
          atCommit?.();
          return refuse(error);
        },
      );
    };

  /** The row with key `id`, or undefined. */
  function find(id: Id): Row | undefined {
    const values = atKey<unknown[] | undefined>(byId(), 'get', id);
    return values && toRow(values);
  }

  /** The current row inside a write, or a 404. */
  function current(id: Id): Row {
    const row = find(id);
    if (!row) throw notFound(resource, id);
    return row;
  }

  /** Prepared on first use: only a cursor after a long text value needs them (and a WITHOUT ROWID table has no rowid). */
  const rowidStatements = () => {
    try {
      return prepareRowids();
    } catch (error) {
      // A WITHOUT ROWID table: a long text value cannot be read back by rowid.
      if (sqliteErrorOf(error))
        throw new ApiError('badRequest', `Sorting ${resource.name} by long text values cannot be paged: it has no rowid.`, {
          problemCode: 'bad-query',
        });
      throw error;
    }
  };
  const prepareRowids = onFirstUse(() => ({
    byRowid: selecting(
      db
        .select(selection)
        .from(table)
        .where(sql`rowid = ${sql.placeholder('rowid')}`),
    ).statement,
    rowidByKey: prepare(sqlite, db.select({ rowid: sql<number>`rowid` }).from(table).where(keyCondition(keyColumns))).statement.pluck(),
  }));

  const rowidOf = (row: Row) => atKey<number>(rowidStatements().rowidByKey, 'get', resource.idOf(row));

  /** `expand`'s statements, prepared on first use: rows by a list of keys, and children by a list of parents. */
  const byParents = new Map<string, Prepared>();
  const among = (column: Column) => SQLITE_LIST.among(column, sql.placeholder('values'));
  const byKeys = onFirstUse(() =>
    selecting(
      db
        .select(selection)
        .from(table)
        .where(among(keyColumns[0] as Column)),
    ),
  );
  const rowsOf = (prepared: Prepared, values: unknown[]) =>
    (prepared.statement.all(prepared.args({ values: SQLITE_LIST.amongValue(values) })) as unknown[][]).map(toRow);

  /** The kind's calls, its writes handed to `submit`: the group commit, or (inside a batch) at once. */
  const calls = (submit: Submit): ResourceStore => {
    const write = writer(submit);
    return {
      withKeys(values) {
        return rowsOf(byKeys(), values);
      },
      withParents(field, values, cap) {
        const prepared = cached(byParents, `${field}|${cap}`, () => {
          const column = (resource.fields.find((f) => f.key === field) as Field).column;
          const order = naturalOrder(resource);
          const ranked = db
            .select({
              ...selection,
              __n: rankWithin(
                column,
                order.map((f) => f.column),
              ).as('__n'),
            })
            .from(table)
            .where(among(column))
            .as('ranked');
          // The subquery's columns, by their aliases (drizzle types them loosely).
          const at = ranked as unknown as Record<string, SQL>;
          return selecting(
            db
              .select(Object.fromEntries(resource.fields.map((f) => [f.key, at[f.key]])) as Record<string, SQL>)
              .from(ranked)
              .where(lte(at.__n as SQL, cap))
              .orderBy(at[field] as SQL, ...order.map((f) => at[f.key] as SQL)),
          );
        });
        return rowsOf(prepared, values);
      },
      get: find,
      exists: (id) => atKey(existsById(), 'get', id) !== undefined,
      list(query, scope): Page {
        const after = positionOf(query, (rowid) => {
          const values = rowidStatements().byRowid.get(rowid) as unknown[] | undefined;
          return values && toRow(values);
        }) as unknown[] | undefined;
        const plan = planList(SQLITE_LIST, resource, query, scope, after, search?.sql);
        const rows = cached(listStatements, plan.shape, () =>
          preparing(plan, () => {
            const query = searching(db.select(listSelection(selection, plan)).from(table), plan)
              .where(plan.where())
              .orderBy(...plan.orderBy())
              .limit(plan.limit as never);
            return selecting(plan.offset ? query.offset(plan.offset as never) : query);
          }),
        );
        const page = pageOf(rows.statement.all(rows.args(plan.params)) as unknown[][], query, toRow, rowidOf);
        if (plan.count) {
          const { shape, params, where } = plan.count;
          const counter = cached(countStatements, shape, () =>
            preparing(plan, () => {
              const prepared = prepare(sqlite, searching(db.select({ n: count() }).from(table), plan).where(where()));
              prepared.statement.pluck();
              return prepared;
            }),
          );
          page.total = (counter.statement.get(counter.args(params)) as number | undefined) ?? 0;
        }
        return page;
      },
      create(input, respond, once) {
        const bulk = Array.isArray(input);
        const now = new Date();
        const stamped = (bulk ? input : [input]).map((row) => rules.forCreate(row, now));
        /** The element being inserted: a refusal names it (none before the first: a reused Idempotency-Key is the request's). */
        let at = -1;
        return write(
          'write',
          () => {
            const replay = keys.replay(once);
            if (replay) return replay;
            const created = bulk
              ? insertMany(stamped, (i) => {
                  at = i;
                })
              : [insertOne(stamped[0] as Row)];
            const response = respond(bulk ? created : (created[0] as Row));
            if (once) keys.save(once, response);
            return { response, replayed: false };
          },
          () => stamped[Math.max(at, 0)],
          bulk ? (error) => (at < 0 ? error : atElement(at, error)) : undefined,
          // Refused at commit, when every element was written: the first whose references name nothing.
          () => {
            at = firstDangling(stamped);
          },
        );
      },

      update(id, change) {
        let next: Row | undefined;
        return write(
          'write',
          () => {
            next = rules.forUpdate(change(current(id)), sqlDefaultOf);
            if (!updateRow) return current(id);
            const values = Object.assign(valuesOf(rules.updated, next), keyArgs(id));
            const { statement, args } = updateRow();
            return toRow(statement.get(args(values)) as unknown[]);
          },
          () => next,
        );
      },
      remove(id, check) {
        return write('remove', () => {
          check(current(id));
          atKey(deleteRow(), 'run', id);
        });
      },
    };
  };
  return { kind: calls((work, refused) => group.submit(work, refused)), direct: calls((work) => work()) };
}

/**
 * Where a kind store's writes run: queued for the group commit, or now (inside a batch's own transaction,
 * whose own submit maps a refused commit).
 */
type Submit = <T>(work: () => T, refused?: RefusedAtCommit) => MaybePromise<T>;

/** The stored answers to Idempotency-Keys, read and written inside a write's savepoint. */
interface KeyStatements {
  find(key: string): { fingerprint: string; status: number; headers: string; body: string } | undefined;
  /** The stored answer to `once`'s key to replay; undefined when there is none (the write runs); a 422 for the key reused with another request. */
  replay(once: Once | undefined): Created | undefined;
  save(once: { key: string; fingerprint: string }, response: { status: number; headers: Record<string, string>; body: string }): void;
  purgeExpired(batch: number): number;
}

function createKeyStatements(sqlite: Database.Database, db: Db, now: () => number): KeyStatements {
  /** Prepared on first use: a database without the service's own tables serves every request but these. */
  const prepared = onFirstUse(() => prepareKeyStatements(sqlite, db));
  const find: KeyStatements['find'] = (key) => {
    const { find } = prepared();
    return find.statement.get(find.args({ key, since: now() - KEY_TTL_MS })) as ReturnType<KeyStatements['find']>;
  };
  return {
    find,
    replay(once) {
      const stored = once && find(once.key);
      if (!stored) return undefined;
      if (stored.fingerprint !== (once as Once).fingerprint) throw reusedKey();
      return { response: { status: stored.status, headers: JSON.parse(stored.headers), body: stored.body }, replayed: true };
    },
    save({ key, fingerprint }, { status, headers, body }) {
      const { save } = prepared();
      save.statement.run(save.args({ key, fingerprint, status, headers: JSON.stringify(headers), body, createdAt: now() }));
    },
    purgeExpired(batch) {
      const { purge } = prepared();
      return purge.statement.run(purge.args({ before: now() - KEY_TTL_MS, batch })).changes;
    },
  };
}

function prepareKeyStatements(sqlite: Database.Database, db: Db) {
  const t = idempotencyKeys;
  const find = prepare(
    sqlite,
    db
      .select({ fingerprint: t.fingerprint, status: t.status, headers: t.headers, body: t.body })
      .from(t)
      .where(and(eq(t.key, sql.placeholder('key')), gt(t.createdAt, sql.placeholder('since')))),
  );
  const row = {
    fingerprint: sql.placeholder('fingerprint'),
    status: sql.placeholder('status'),
    headers: sql.placeholder('headers'),
    body: sql.placeholder('body'),
    createdAt: sql.placeholder('createdAt'),
  };
  const save = prepare(
    sqlite,
    db
      .insert(t)
      .values({ key: sql.placeholder('key'), ...row } as never)
      .onConflictDoUpdate({ target: t.key, set: row as never }),
  );
  const purge = prepare(
    sqlite,
    db.delete(t).where(
      inArray(
        t.key,
        db
          .select({ key: t.key })
          .from(t)
          .where(lte(t.createdAt, sql.placeholder('before')))
          .limit(sql.placeholder('batch')),
      ),
    ),
  );
  return { find, save, purge };
}

/** The most writes one group commit holds. */
const MAX_GROUP = 128;

/** The SQLite store over one open connection: a kind store per resource, one group commit for all writes. */
export function createSqliteStore(sqlite: Database.Database, db: Db, resources: Resource[], now: () => number = Date.now): Store {
  const group = createGroupCommit(sqlite, { maxGroup: MAX_GROUP, unavailable: unavailableFrom, lockWaitMs: BUSY_TIMEOUT_MS });
  const keys = createKeyStatements(sqlite, db, now);
  const kinds = new Map(resources.map((r) => [r, createKindStore(sqlite, db, group, keys, r)]));
  /** Inside a batch: the same connection (its reads see the batch's writes), writes run at once. */
  const inBatch: Transaction = { of: (resource) => (kinds.get(resource) as { direct: ResourceStore }).direct };
  return {
    of: (resource) => (kinds.get(resource) as { kind: ResourceStore }).kind,
    // Purges are writes like any other: queued for the group commit, they wait for another connection's lock without blocking.
    changes: sqliteChangeLog(sqlite, resources, group.submit),
    purgeExpiredKeys: (batch) => group.submit(() => keys.purgeExpired(batch)),
    flush: group.flush,
    // One write of the group commit (its own savepoint): a batch that throws leaves the group's other writes alone.
    batch: (work, once) =>
      group.submit(() => {
        const replay = keys.replay(once);
        if (replay) return replay;
        const response = work(inBatch);
        if (response instanceof Promise) throw new Error('a batch on SQLite must answer synchronously');
        if (once) keys.save(once, response);
        return { response, replayed: false };
      }, refusals.brokenAtCommit),
  };
}

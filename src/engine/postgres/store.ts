// The PostgreSQL store: the same kind stores over a node-postgres pool, SQL built once per statement
// with drizzle on the derived pg tables; writes in transactions with the row locked, retried after races.
import { createHash, randomBytes } from 'node:crypto';
import { and, count, eq, getTableColumns, gt, inArray, is, lte, type SQL, sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { getTableConfig, getViewConfig, type PgColumn, PgDialect, type PgTable, PgView } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import { pgSearchQuery, SEARCH_COLUMN } from '../../db/search.js';
import { ApiError, atElement } from '../../errors.js';
import { onFirstUse } from '../../first-use.js';
import type { JsonResponse } from '../../http/messages.js';
import { type Field, foreignKeysOf, type Id, type Resource } from '../../model/registry.js';
import { CURSOR_SECRET_NAME } from '../../request/cursor.js';
import { KEY_TTL_MS, reusedKey } from '../../request/idempotency.js';
import { LIMIT, type ListQuery } from '../../request/list-query.js';
import type { Row } from '../../request/validation.js';
import { pgChangeLog } from '../changes.js';
import {
  assignsRowid,
  type Buildable,
  cached,
  encoded,
  inInsertOrder,
  insertPieces,
  keyCondition,
  keyParams,
  type ListDialect,
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
  type Statement,
  selectionOf,
  toStatement,
  valuesOf,
} from '../sql.js';
import { type Created, type Dangling, notFound, type Once, type Page, type ResourceStore, refusals, type Store } from '../store.js';
import { withConnection } from './connection.js';
import { isUnavailable, type PgError, pgUnavailableFrom, UNSTORABLE, writeError } from './errors.js';
import type { PostgresHandle } from './pool.js';

/** The most values one statement may bind (the protocol's 16-bit count). */
const PG_MAX_PARAMETERS = 65535;

/** The advisory lock every batch holds for its transaction (its text hashed as Idempotency-Keys are: one lock space). */
const BATCH_LOCK = 'restable: one batch at a time';

/** PostgreSQL's spelling of the list language: NULLs and text ordered as SQLite orders them. */
function listDialect(columnOf: (field: Field) => PgColumn): ListDialect {
  /** Text compared byte by byte (SQLite's BINARY collation), whatever the database's locale. */
  const isText = (field: Field) => columnOf(field).columnType === 'PgText';
  const ordered = (field: Field) => (isText(field) ? sql`${columnOf(field)} COLLATE "C"` : sql`${columnOf(field)}`);
  return {
    column: columnOf,
    compared: (field) => sql`${columnOf(field)}`,
    text: (field) => (isText(field) ? sql`${columnOf(field)}` : sql`cast(${columnOf(field)} as text)`),
    contains: (text, p) => sql`strpos(${text}, ${p}) > 0`,
    startsWith: (text, p) => sql`left(${text}, length(${p})) = ${p}`,
    // An array bound once (its element type is the column's): one statement for any number of values.
    among: (column, p) => sql`${column} = ANY(${p})`,
    amongValue: (values) => values,
    ordered,
    // SQLite sorts NULL before every value: first ascending, last descending. A column that cannot be
    // NULL gets no NULLS clause, so that its index (ordered NULLS LAST ascending) can serve the order.
    orderBy: ({ field, descending }) => {
      const nulls = columnOf(field).notNull ? sql`` : descending ? sql` NULLS LAST` : sql` NULLS FIRST`;
      return descending ? sql`${ordered(field)} DESC${nulls}` : sql`${ordered(field)} ASC${nulls}`;
    },
  };
}

type Queryable = pg.Pool | pg.PoolClient;
/** A statement and, when it is one the service always runs, the name each connection prepares it under. */
type Named = Statement & { name?: string };

/**
 * A statement each connection prepares once, named by its SQL's digest. Only statements from a
 * bounded set are named (those a kind always runs, and plain pages: see isPlain): other list shapes
 * are chosen by clients, and a prepared statement lives as long as its connection.
 */
const named = (query: Buildable): Named => {
  const statement = toStatement(query);
  return { ...statement, name: `restable_${createHash('sha1').update(statement.text).digest('hex').slice(0, 24)}` };
};

/**
 * A page any client asks for: no filter, the default order and limit (a collection's or a related
 * list's first and next pages): few shapes per kind, so their statements may be named.
 */
function isPlain(query: ListQuery, resource: Resource): boolean {
  const [first, ...rest] = query.sort;
  return (
    query.filters.length === 0 &&
    query.limit === LIMIT.default &&
    rest.length === 0 &&
    resource.key.length === 1 &&
    first !== undefined &&
    first.field === resource.key[0] &&
    !first.descending
  );
}

/** The rows whose writes PostgreSQL refused for a foreign key, by its error, and their index in a bulk create. */
const refusedRows = new WeakMap<Error, { row: Row; index?: number }>();

/** The refused row behind a write's failure, found along its causes (a bulk's failure wraps the element's). */
function refusedRowOf(error: unknown): { row: Row; index?: number; error: Error } | undefined {
  for (let e = error; e instanceof Error; e = e.cause) {
    const refused = refusedRows.get(e);
    if (refused) return { ...refused, error: e };
  }
  return undefined;
}

/** Runs a statement, rows as arrays. */
async function rowsOf(on: Queryable, statement: Named, values: Record<string, unknown>): Promise<unknown[][]> {
  const result = await on.query({ name: statement.name, text: statement.text, values: statement.args(values), rowMode: 'array' });
  return result.rows as unknown[][];
}

/**
 * Runs a write of a batch in a savepoint of the batch's transaction: a write PostgreSQL refuses
 * (a 409, a 422) leaves the transaction usable, so the refusal can still ask whether its target
 * exists (a 404 as alone). The batch rolls back as a whole anyway.
 */
async function inSavepoint<T>(client: pg.PoolClient, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  await client.query('SAVEPOINT restable_operation');
  try {
    const result = await work(client);
    await client.query('RELEASE SAVEPOINT restable_operation');
    return result;
  } catch (error) {
    await client.query('ROLLBACK TO SAVEPOINT restable_operation');
    throw error;
  }
}

/** The stored answers to Idempotency-Keys, read and written inside a create's transaction. */
function keyStatements(db: NodePgDatabase, internal: Record<string, PgTable>) {
  const t = getTableColumns(internal.idempotencyKeys as PgTable) as Record<string, PgColumn>;
  const table = internal.idempotencyKeys as PgTable;
  const c = (key: string) => t[key] as PgColumn;
  return {
    lock: { text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', name: 'restable_key_lock' },
    share: { text: 'SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))', name: 'restable_key_share' },
    find: named(
      db
        .select({ fingerprint: c('fingerprint'), status: c('status'), headers: c('headers'), body: c('body') })
        .from(table)
        .where(and(eq(c('key'), sql.placeholder('key')), gt(c('createdAt'), sql.placeholder('since')))),
    ),
    save: named(
      db
        .insert(table)
        .values({
          key: sql.placeholder('key'),
          fingerprint: sql.placeholder('fingerprint'),
          status: sql.placeholder('status'),
          headers: sql.placeholder('headers'),
          body: sql.placeholder('body'),
          createdAt: sql.placeholder('createdAt'),
        } as never)
        .onConflictDoUpdate({
          target: c('key'),
          set: {
            fingerprint: sql`excluded.fingerprint`,
            status: sql`excluded.status`,
            headers: sql`excluded.headers`,
            body: sql`excluded.body`,
            createdAt: sql`excluded.created_at`,
          } as never,
        }),
    ),
    purge: named(
      db.delete(table).where(
        inArray(
          c('key'),
          db
            .select({ key: c('key') })
            .from(table)
            .where(lte(c('createdAt'), sql.placeholder('before')))
            .limit(sql.placeholder('batch')),
        ),
      ),
    ),
  };
}
type Keys = ReturnType<typeof keyStatements>;

/**
 * The stored answer to `once`'s key to replay, taken under the key's advisory lock (one transaction
 * at a time per key, across every instance: the second waits, then replays); undefined when there
 * is none (the write runs); a 422 for the key reused with another request.
 */
async function replayOf(client: pg.PoolClient, keys: Keys, once: Once | undefined, now: () => number): Promise<Created | undefined> {
  if (!once) return undefined;
  await client.query({ ...keys.lock, values: [once.key] });
  const [stored] = await rowsOf(client, keys.find, { key: once.key, since: now() - KEY_TTL_MS });
  if (!stored) return undefined;
  const [fingerprint, status, headers, body] = stored as [string, number, string, string];
  if (fingerprint !== once.fingerprint) throw reusedKey();
  return { response: { status, headers: JSON.parse(headers), body }, replayed: true };
}

/** Stores the answer under `once`'s key, in the write's transaction. */
async function remember(client: pg.PoolClient, keys: Keys, once: Once | undefined, response: JsonResponse, now: () => number) {
  if (!once) return;
  const { key, fingerprint } = once;
  const { status, headers, body } = response;
  await rowsOf(client, keys.save, { key, fingerprint, status, headers: JSON.stringify(headers), body, createdAt: now() });
}

/**
 * One kind's statements (built once) and its calls: over the pool, or (given a batch's connection)
 * inside that connection's open transaction, where reads see the batch's writes and writes run as they come.
 */
function createKindStore(
  pool: pg.Pool,
  db: NodePgDatabase,
  keys: Keys,
  resource: Resource,
  table: PgTable,
  now: () => number,
): (inBatch?: pg.PoolClient) => ResourceStore {
  const pgColumns = (is(table, PgView) ? getViewConfig(table).selectedFields : getTableColumns(table)) as Record<string, PgColumn>;
  const columnOf = (field: Field) => pgColumns[field.key] as PgColumn;
  const fields = resource.fields.map((f) => ({ ...f, column: columnOf(f) }));
  const keyColumns = resource.key.map(columnOf);
  const selection = selectionOf(fields);
  const toRow = rowMaker(fields);
  const dialect = listDialect(columnOf);
  const rules = rowRules(resource);
  // A searchable kind's generated tsvector column and its GIN index (src/db/search.ts): match and ts_rank (higher is better).
  const vector = sql`${table}.${sql.identifier(SEARCH_COLUMN)}`;
  const search: SearchSql | undefined =
    resource.searchable.length > 0
      ? {
          // The words as sent, as a JSON array: PostgreSQL folds each with the index's own function (pgSearchQuery).
          value: (words) => JSON.stringify(words),
          match: (p) => sql`${vector} @@ ${pgSearchQuery(p)}`,
          rank: (p) => sql`ts_rank(${vector}, ${pgSearchQuery(p)})`,
          higherIsBetter: true,
        }
      : undefined;
  /** The key's values as the placeholders of keyCondition, encoded for their columns. */
  const idParams = (id: Id) => {
    const params = keyParams(resource, id);
    keyColumns.forEach((column, i) => {
      params[`__k${i}`] = encoded(column, params[`__k${i}`]);
    });
    return params;
  };
  const atKey = keyCondition(keyColumns);
  // A kind without a key (a view, a table without a primary key) is only listed: it has no element statements.
  const keyed = keyColumns.length > 0;
  const ifKeyed = <T>(make: () => T, more = true): T => (keyed && more ? make() : (undefined as T));
  const byId = ifKeyed(() => named(db.select(selection).from(table).where(atKey)));
  // An update never changes the key (it is read-only), so it locks the row FOR NO KEY UPDATE, which does not
  // block the KEY SHARE lock a foreign-key check takes: a write to a parent and the creation of its child in
  // another transaction cannot deadlock. A delete locks FOR UPDATE, as its DELETE will.
  const lockForUpdate = ifKeyed(() => named(db.select(selection).from(table).where(atKey).for('no key update')));
  const lockForDelete = ifKeyed(() => named(db.select(selection).from(table).where(atKey).for('update')));
  const existsById = ifKeyed(() => named(db.select({ one: sql`1` }).from(table).where(atKey)));
  const deleteById = ifKeyed(() => named(db.delete(table).where(atKey)));
  const placeholders = (of: Field[]) => Object.fromEntries(of.map((f) => [f.key, sql.placeholder(f.key)]));
  // A kind whose every field is its key has nothing to set: a PUT or PATCH only checks and answers the row.
  const updateById = ifKeyed(
    () =>
      named(
        db
          .update(table)
          .set(placeholders(rules.updated) as never)
          .where(atKey)
          .returning(selection as never),
      ),
    rules.updated.length > 0,
  );
  const inserts = new Map<string, Named>();
  const insertFor = (row: Row) => {
    const inserted = rules.insertedFor(row);
    const statement = cached(inserts, inserted.map((f) => f.key).join(','), () =>
      named(
        db
          .insert(table)
          .values(placeholders(inserted) as never)
          .returning(selection as never),
      ),
    );
    return { inserted, statement };
  };
  const manyInserts = new Map<string, Named>();
  const rowidKey = assignsRowid(resource);
  const listStatements = new Map<string, Statement>();
  const countStatements = new Map<string, Statement>();
  /** A column's SQL-expression default, computed by PostgreSQL (for a PUT that leaves the field out). */
  const sqlDefaultStatements = new Map<string, { text: string; values: unknown[] }>();
  const sqlDefaultOf = async (client: pg.PoolClient, field: Field): Promise<unknown> => {
    let statement = sqlDefaultStatements.get(field.key);
    if (!statement) {
      const query = new PgDialect().sqlToQuery(field.column.default as SQL);
      // Cast as the column's DEFAULT is: `'[]'` alone is text, not the jsonb the column holds (and a column without a
      // declared type has the database's own type: a timestamptz whose default is now() in a database introspected).
      statement = { text: `select (${query.sql})::${columnOf(field).getSQLType()}`, values: query.params };
      sqlDefaultStatements.set(field.key, statement);
    }
    const result = await client.query({ text: statement.text, values: statement.values, rowMode: 'array' });
    return columnOf(field).mapFromDriverValue((result.rows[0] as unknown[])[0]);
  };

  /**
   * After PostgreSQL refused a foreign key (it names the first one only): a statement per foreign key, of
   * one column or several, that asks whether its parent exists, built on first use. A key to the kind
   * itself is not asked: a parent created earlier in the same refused bulk is gone by the time it is asked.
   */
  const parentChecks = onFirstUse(() =>
    foreignKeysOf(resource).map(({ fields, parent, targets }) => {
      const columns = fields.map((field) => columnOf(resource.fields.find((f) => f.key === field) as Field));
      const matches = targets.map((target, i) => sql`${sql.identifier(target.column.name)} = ${sql.placeholder(`v${i}`)}`);
      const query = new PgDialect().sqlToQuery(sql`select 1 from ${sql.identifier(parent.name)} where ${sql.join(matches, sql` and `)}`);
      return { fields, parent, columns, text: parent === resource ? undefined : query.sql };
    }),
  );

  /** `expand`'s statements, built on first use: rows by a list of keys, and children by a list of parents. */
  const byParents = new Map<string, Statement>();
  const among = (column: PgColumn) => dialect.among(column, sql.placeholder('values'));
  const byKeys = onFirstUse(() =>
    toStatement(
      db
        .select(selection)
        .from(table)
        .where(among(keyColumns[0] as PgColumn)),
    ),
  );
  return (inBatch) => {
    /** A connection of the pool for a read; inside a batch, the batch's own (its reads see its writes). */
    const connected = <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> =>
      inBatch ? work(inBatch) : withConnection(pool, work);
    /** A connection for a write (in a transaction when asked); inside a batch, a savepoint of the batch's. */
    const writing = <T>(work: (client: pg.PoolClient) => Promise<T>, transaction: boolean): Promise<T> =>
      inBatch ? inSavepoint(inBatch, work) : withConnection(pool, work, transaction);
    /**
     * Reads with connection failures as 503s. A value PostgreSQL cannot hold (a NUL character, which
     * SQLite text may contain) is a data exception (22xxx): no row has it, so an id names nothing
     * (`missing`) and a filter value is refused with a 400.
     */
    const reading = async <T>(work: (client: pg.PoolClient) => Promise<T>, missing?: () => T): Promise<T> => {
      try {
        return await connected(work);
      } catch (error) {
        // A search before the index's migration ran: its column is not there yet.
        if ((error as PgError).code === '42703' && search && (error as Error).message.includes(SEARCH_COLUMN)) {
          throw refusals.searchIndexMissing(resource, error);
        }
        if ((error as PgError).code?.startsWith('22')) {
          if (missing) return missing();
          // In the contract's words, not PostgreSQL's; the engine does not say which parameter it was.
          const what = UNSTORABLE[(error as PgError).code ?? ''];
          throw new ApiError(
            'badRequest',
            `A value of the query cannot be compared with the fields of ${resource.name}${what ? `: it is ${what}` : ''}.`,
            { problemCode: 'bad-query' },
          );
        }
        throw pgUnavailableFrom(error) ?? error;
      }
    };
    const find = (on: Queryable, statement: Named, id: Id) =>
      rowsOf(on, statement, idParams(id)).then((rows) => (rows[0] ? toRow(rows[0]) : undefined));

    const toApiError = (action: 'write' | 'remove', error: unknown) => writeError(resource, action, error);
    /**
     * A write's failure as the client's error; a refused foreign key names every field of the row that
     * names no parent, as SQLite's does. Asked once the write is rolled back (to the batch's savepoint,
     * whose earlier writes it sees, or wholly: the database as the write found it).
     */
    const refusal = async (action: 'write' | 'remove', error: unknown): Promise<unknown> => {
      const mapped = toApiError(action, error);
      const refused = action === 'write' ? refusedRowOf(error) : undefined;
      // Only a reference to nothing (a 422) can name more fields; a change under referencing elements is a 409 as it is.
      if (!refused || parentChecks().length < 2 || !(mapped instanceof ApiError && mapped.code === 'unprocessable')) return mapped;
      const named = (toApiError(action, refused.error) as ApiError).errors?.map((e) => e.path) ?? [];
      try {
        const missing: Dangling[] = [];
        for (const { fields, parent, columns, text } of parentChecks()) {
          const values = fields.map((field) => refused.row[field]);
          // The foreign key PostgreSQL named (its fields come back in field order).
          if (fields.length === named.length && fields.every((field) => named.includes(field))) missing.push({ fields, parent });
          else if (text && values.every((value) => value !== null && value !== undefined)) {
            const { rows } = await (inBatch ?? pool).query({ text, values: values.map((value, i) => columns[i]?.mapToDriverValue(value)) });
            if (rows.length === 0) missing.push({ fields, parent });
          }
        }
        const complete = refusals.missingParent(resource, missing, refused.error);
        return refused.index === undefined ? complete : atElement(refused.index, complete);
      } catch {
        return mapped; // the first one named is still true
      }
    };
    const write = async <T>(action: 'write' | 'remove', work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
      try {
        return await writing(work, true);
      } catch (error) {
        throw await refusal(action, error);
      }
    };
    /**
     * A single write that locks several rows (a bulk create; a delete of a kind others reference, whose
     * foreign keys lock the referencing rows to act on them or check them) holds the batch lock shared:
     * it waits for a batch in progress and a batch for it, where their row locks, taken in different
     * orders, could deadlock (PostgreSQL would find it only after a second). Taken first, before any
     * other lock (an Idempotency-Key's), as a batch takes its own. Inside a batch, the batch's lock covers it.
     */
    const besideBatches = async (client: pg.PoolClient) => {
      if (!inBatch) await client.query({ ...keys.share, values: [BATCH_LOCK] });
    };
    const referenced = resource.referencedBy.length > 0;
    /** Runs a write statement of `row`, which is remembered when PostgreSQL refuses one of its foreign keys. */
    const writeOf = async <T>(row: Row, statement: Promise<T>): Promise<T> => {
      try {
        return await statement;
      } catch (error) {
        if ((error as PgError).code === '23503') refusedRows.set(error as Error, { row });
        throw error;
      }
    };
    /** Inserts a stamped row (one statement: atomic on its own) and answers with the created row. */
    const insert = async (on: Queryable, row: Row, now?: Date) => {
      const full = rules.forCreate(row, now);
      const { inserted, statement } = insertFor(full);
      const [created] = await writeOf(full, rowsOf(on, statement, valuesOf(inserted, full, columnOf)));
      return toRow(created as unknown[]);
    };
    /** Inserts rows one statement each; a refusal names its element. */
    const insertEach = async (client: pg.PoolClient, rows: Row[], now: Date, from = 0): Promise<Row[]> => {
      const created: Row[] = [];
      for (let i = from; i < rows.length; i++) {
        try {
          created.push(await insert(client, rows[i] as Row, now));
        } catch (error) {
          const refused = refusedRows.get(error as Error);
          if (refused) refused.index = i;
          throw atElement(i, toApiError('write', error));
        }
      }
      return created;
    };
    /**
     * A bulk create in multi-row INSERTs (one round trip per up to MAX_ROWS_PER_INSERT rows) when the key comes from
     * the identity, whose order puts the returned rows back in request order. A failed statement
     * aborts the transaction: the bulk goes back to its savepoint and runs again a row at a time,
     * so that the refusal names its element.
     */
    const insertMany = async (client: pg.PoolClient, rows: Row[]): Promise<Row[]> => {
      const now = new Date();
      if (!rowidKey) return insertEach(client, rows, now);
      const full = rows.map((row) => rules.forCreate(row, now));
      await client.query('SAVEPOINT restable_bulk');
      const created: Row[] = [];
      try {
        for (const piece of insertPieces(full, rules.insertedFor, PG_MAX_PARAMETERS)) {
          const { size, fields } = piece;
          const statement = cached(manyInserts, `${fields.map((f) => f.key).join(',')}|${size}`, () =>
            named(
              db
                .insert(table)
                .values(pieceValues(fields, size) as never)
                .returning(selection as never),
            ),
          );
          const result = await client.query({
            name: statement.name,
            text: statement.text,
            values: pieceArgs(statement, piece, full, columnOf),
            rowMode: 'array',
          });
          created.push(...inInsertOrder((result.rows as unknown[][]).map(toRow), (resource.key[0] as Field).key));
        }
      } catch (error) {
        if (!(error as PgError).code || isUnavailable(error as Error)) throw toApiError('write', error);
        await client.query('ROLLBACK TO SAVEPOINT restable_bulk');
        return insertEach(client, rows, now);
      }
      await client.query('RELEASE SAVEPOINT restable_bulk');
      return created;
    };
    /** The current row, locked until the transaction ends (a concurrent write waits, then sees this one's result), or a 404. */
    const current = async (client: pg.PoolClient, id: Id, lock: typeof lockForUpdate): Promise<Row> => {
      const row = await find(client, lock, id);
      if (!row) throw notFound(resource, id);
      return row;
    };
    /** A cursor after a long text value carries the row's key as its "rowid" (integer keys only). */
    const rowidOf = (row: Row) => {
      const key = resource.key.length === 1 ? resource.idOf(row) : undefined;
      if (typeof key !== 'number')
        throw new ApiError('badRequest', `Sorting ${resource.name} by long text values cannot be paged on this backend.`, {
          problemCode: 'bad-query',
        });
      return key;
    };

    /** Runs one of `expand`'s statements over a list of values. */
    const rowsAmong = (statement: Statement, values: unknown[]) =>
      reading(async (client) => (await rowsOf(client, statement, { values: dialect.amongValue(values) })).map(toRow));

    return {
      withKeys: (values) => {
        return rowsAmong(byKeys(), values);
      },
      withParents: (field, values, cap) => {
        const statement = cached(byParents, `${field}|${cap}`, () => {
          const column = columnOf(resource.fields.find((f) => f.key === field) as Field);
          const order = naturalOrder(resource);
          const ranked = db
            .select({ ...selection, __n: rankWithin(column, order.map(columnOf)).as('__n') })
            .from(table)
            .where(among(column))
            .as('ranked');
          // The subquery's columns, by their aliases (drizzle types them loosely).
          const at = ranked as unknown as Record<string, SQL>;
          return toStatement(
            db
              .select(Object.fromEntries(resource.fields.map((f) => [f.key, at[f.key]])) as Record<string, SQL>)
              .from(ranked)
              .where(lte(at.__n as SQL, cap))
              .orderBy(at[field] as SQL, ...order.map((f) => at[f.key] as SQL)),
          );
        });
        return rowsAmong(statement, values);
      },
      get: (id) =>
        reading(
          (client) => find(client, byId, id),
          () => undefined,
        ),
      exists: (id) =>
        reading(
          (client) => rowsOf(client, existsById, idParams(id)).then((rows) => rows.length > 0),
          () => false,
        ),
      list: (query, scope) =>
        reading(async (client): Promise<Page> => {
          const after = await positionOf(query, (rowid) => find(client, byId, rowid));
          const plan = planList(dialect, resource, query, scope, after, search);
          const rows = cached(listStatements, plan.shape, () => {
            const select = db
              .select(listSelection(selection, plan))
              .from(table)
              .where(plan.where())
              .orderBy(...plan.orderBy())
              .limit(plan.limit as never);
            return (isPlain(query, resource) ? named : toStatement)(plan.offset ? select.offset(plan.offset as never) : select);
          });
          if (!plan.count) return pageOf(await rowsOf(client, rows, plan.params), query, toRow, rowidOf);
          // The page and its count from one snapshot, so that the total agrees with the rows.
          const { shape, params, where } = plan.count;
          const counter = cached(countStatements, shape, () => toStatement(db.select({ n: count() }).from(table).where(where())));
          // Inside a batch the page and the count are read in its transaction, which must not be
          // committed here (READ COMMITTED: a write committed between the two can make them differ).
          if (!inBatch) await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
          try {
            const page = pageOf(await rowsOf(client, rows, plan.params), query, toRow, rowidOf);
            page.total = Number((await rowsOf(client, counter, params))[0]?.[0] ?? 0);
            return page;
          } finally {
            if (!inBatch) await client.query('COMMIT').catch(() => undefined);
          }
        }),
      create: async (input, respond, once) => {
        const bulk = Array.isArray(input);
        if (!once && !bulk) {
          try {
            return { response: respond(await writing((client) => insert(client, input), false)), replayed: false };
          } catch (error) {
            throw await refusal('write', error);
          }
        }
        return write('write', async (client) => {
          if (bulk) await besideBatches(client);
          const replay = await replayOf(client, keys, once, now);
          if (replay) return replay;
          const created = bulk ? await insertMany(client, input) : [await insert(client, input)];
          const response = respond(bulk ? created : (created[0] as Row));
          await remember(client, keys, once, response, now);
          return { response, replayed: false };
        });
      },

      update: (id, change) =>
        write('write', async (client) => {
          const locked = await current(client, id, lockForUpdate);
          const changed = change(locked);
          const defaults = new Map<string, unknown>();
          for (const field of rules.writable) {
            if (changed[field.key] === undefined && rules.sqlDefaults.has(field.key))
              defaults.set(field.key, await sqlDefaultOf(client, field));
          }
          const next = rules.forUpdate(changed, (field) => defaults.get(field.key));
          if (!updateById) return locked;
          const [updated] = await writeOf(
            next,
            rowsOf(client, updateById, { ...valuesOf(rules.updated, next, columnOf), ...idParams(id) }),
          );
          return toRow(updated as unknown[]);
        }),
      remove: (id, check) =>
        write('remove', async (client) => {
          if (referenced) await besideBatches(client);
          check(await current(client, id, lockForDelete));
          await rowsOf(client, deleteById, idParams(id));
        }),
    };
  };
}

/**
 * The PostgreSQL store of `resources`, whose tables are `tables` (toPgTables of the schema, with
 * the service's own tables under their export names).
 */
export function createPostgresStore(
  { pool }: PostgresHandle,
  resources: Resource[],
  tables: Record<string, PgTable>,
  now: () => number = Date.now,
): Store {
  const db = drizzle({ client: pool });
  const keys = keyStatements(db, tables);
  const byName = new Map(Object.values(tables).map((t) => [is(t, PgView) ? getViewConfig(t).name : getTableConfig(t).name, t]));
  const calls = new Map(resources.map((r) => [r, createKindStore(pool, db, keys, r, byName.get(r.name) as PgTable, now)]));
  const kinds = new Map([...calls].map(([resource, on]) => [resource, on()]));
  const runBatch: Store['batch'] = (work, once) =>
    withConnection(
      pool,
      async (client) => {
        await client.query({ ...keys.lock, values: [BATCH_LOCK] });
        const replay = await replayOf(client, keys, once, now);
        if (replay) return replay;
        const inBatch = new Map<Resource, ResourceStore>();
        const response = await work({
          of: (resource) => {
            let kind = inBatch.get(resource);
            if (!kind) {
              kind = (calls.get(resource) as (client: pg.PoolClient) => ResourceStore)(client);
              inBatch.set(resource, kind);
            }
            return kind;
          },
        });
        await remember(client, keys, once, response, now);
        return { response, replayed: false };
      },
      true,
      // Refused at COMMIT by a foreign key checked there (DEFERRABLE INITIALLY DEFERRED): every operation ran,
      // each refusal inside mapped in its savepoint, so which one broke it is not known.
    ).catch((error: unknown) => {
      throw (error as PgError).code === '23503' ? refusals.brokenAtCommit(error) : error;
    });
  /** The batches of this instance run one after another: one waiting for the lock holds no pooled connection. */
  let turn: Promise<unknown> = Promise.resolve();
  return {
    of: (resource) => kinds.get(resource) as ResourceStore,
    changes: pgChangeLog(pool, resources),
    // One transaction on one connection; batches take one advisory lock in turn (across every
    // instance), so two batches never wait on each other's rows: no deadlock, whatever their order.
    batch: (work, once) => {
      const mine = turn.then(() => runBatch(work, once));
      turn = mine.catch(() => undefined);
      return mine;
    },
    purgeExpiredKeys: async (batch) => {
      const result = await pool.query({
        name: keys.purge.name,
        text: keys.purge.text,
        values: keys.purge.args({ before: now() - KEY_TTL_MS, batch }),
      });
      return result.rowCount ?? 0;
    },
    flush: () => undefined,
  };
}

/**
 * The key that signs cursors when CURSOR_SECRET is not set: made once and stored in the database
 * (insert-if-absent, then read back), so every instance signs and accepts the same cursors.
 */
export async function readPgCursorKey({ pool }: PostgresHandle, configured: string | undefined): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  await pool.query('INSERT INTO restable_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    CURSOR_SECRET_NAME,
    randomBytes(32).toString('base64url'),
  ]);
  const result = await pool.query('SELECT value FROM restable_secrets WHERE name = $1', [CURSOR_SECRET_NAME]);
  return Buffer.from(result.rows[0].value as string, 'base64url');
}

// The change log behind /_changes (docs/changes.md), for each engine: the table and the triggers that
// record every write in the write's own transaction, and the reads, sequencing and purges of the feed.
import type Database from 'better-sqlite3';
import type pg from 'pg';
import { customKindOf } from '../db/columns.js';
import type { Field, KeyValue, Resource } from '../model/registry.js';
import { withConnection } from './postgres/connection.js';
import { ident, literal } from './quote.js';
import type { MaybePromise } from './store.js';

export type ChangeOp = 'create' | 'update' | 'delete';

/** One recorded change: `key` holds the element's key values in key order. */
export interface ChangeEntry {
  seq: number;
  kind: string;
  key: KeyValue[];
  op: ChangeOp;
  /** When the write was made (ISO 8601, UTC). */
  at: string;
}

/** What the feed asks of a database. */
export interface ChangeLog {
  /**
   * Up to `limit` changes after `since`, in seq order, of `kinds` only when given. On PostgreSQL,
   * what has committed is sequenced first, so a change committed before the call is in the answer.
   */
  after(since: number, limit: number, kinds?: readonly string[]): MaybePromise<ChangeEntry[]>;
  /**
   * `floor`: the seq just before the oldest change kept (a `since` below it has lost changes; seqs
   * have no gaps and purges remove the oldest), `newest`: the last seq (0 and 0 before any change).
   */
  bounds(): MaybePromise<{ floor: number; newest: number }>;
  /** Deletes up to `batch` of the oldest changes made before `before` (ISO 8601), never the newest; how many. */
  purge(before: string, batch: number): MaybePromise<number>;
}

const TABLE = 'restable_changes';
/** PostgreSQL: where triggers record changes before the sequencer numbers them in commit order. */
const PENDING = 'restable_changes_pending';
/** Every trigger and trigger function of the feed starts with this. */
const PREFIX = 'restable_changes_';
/** PostgreSQL: a change's time as ISO 8601 text in UTC, milliseconds included (as SQLite records it). */
const PG_AT = `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`;
/** PostgreSQL: held while the feed's objects are made and while changes are sequenced (one instance at a time). */
const PG_LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('restable: change feed', 0))`;

/** The kinds whose writes are recorded: tables with a primary key (views and keyless tables take no writes). */
const recorded = (resources: Resource[]) => resources.filter((r) => !r.readOnlyKind && r.key.length > 0);

/** A BLOB key travels as its base64 text (as in paths and representations); JSON holds no bytes. */
const isBlob = (field: Field) => field.column.getSQLType().toLowerCase() === 'blob';

const OPS: { op: ChangeOp; event: 'INSERT' | 'UPDATE' | 'DELETE'; row: 'new' | 'old' }[] = [
  { op: 'create', event: 'INSERT', row: 'new' },
  { op: 'update', event: 'UPDATE', row: 'new' },
  { op: 'delete', event: 'DELETE', row: 'old' },
];

/** Keeps `prefix` of `rows` (oldest first) that were made before `before`, stopping at the first younger one and before `newest`. */
function purgeable(rows: { seq: number; at: string }[], before: string, newest: number): number | undefined {
  let last: number | undefined;
  for (const { seq, at } of rows) {
    if (at >= before || seq >= newest) break;
    last = seq;
  }
  return last;
}

const toEntry = (row: { seq: number | string; kind: string; key: string | KeyValue[]; op: ChangeOp; at: string }): ChangeEntry => ({
  seq: Number(row.seq),
  kind: row.kind,
  key: typeof row.key === 'string' ? (JSON.parse(row.key) as KeyValue[]) : row.key,
  op: row.op,
  at: row.at,
});

/**
 * SQLite: each write's trigger inserts its change with the next rowid, inside the write's
 * transaction. One writer at a time holds the database, so rowids are handed out in commit order,
 * across every connection and process, and a rolled-back write leaves no number behind.
 */
export function sqliteChangeLog(
  sqlite: Database.Database,
  resources: Resource[],
  /** Runs a write (the group commit's queue): a purge never waits for the write lock inside SQLite. */
  submit: <T>(work: () => T) => Promise<T>,
): ChangeLog {
  installSqlite(sqlite, resources);
  const reader = sqliteChangeReader(sqlite, resources);
  const head = sqlite.prepare(`SELECT seq, at FROM ${TABLE} ORDER BY seq LIMIT ?`);
  const remove = sqlite.prepare(`DELETE FROM ${TABLE} WHERE seq <= ?`);
  const purge = sqlite.transaction((before: string, batch: number) => {
    const last = purgeable(head.all(batch) as { seq: number; at: string }[], before, reader.bounds().newest);
    return last === undefined ? 0 : remove.run(last).changes;
  });
  return { ...reader, purge: (before, batch) => submit(() => purge(before, batch)) };
}

/** Reads a SQLite file's change log (its table must be there), writing nothing. */
function sqliteChangeReader(
  sqlite: Database.Database,
  resources: Resource[],
): { after: (since: number, limit: number, kinds?: readonly string[]) => ChangeEntry[]; bounds: () => { floor: number; newest: number } } {
  const page = new Map<number, Database.Statement>();
  const pageOf = (kinds: number) => {
    let statement = page.get(kinds);
    if (!statement) {
      const among = kinds ? ` AND kind IN (${Array(kinds).fill('?').join(', ')})` : '';
      statement = sqlite.prepare(`SELECT seq, kind, key, op, at FROM ${TABLE} WHERE seq > ?${among} ORDER BY seq LIMIT ?`);
      page.set(kinds, statement);
    }
    return statement;
  };
  const bounds = sqlite.prepare(`SELECT coalesce(min(seq) - 1, 0) AS floor, coalesce(max(seq), 0) AS newest FROM ${TABLE}`);
  // SQLite has no base64: the triggers record a BLOB key as hex, turned here into its base64 text.
  const blobKeys = new Map(
    recorded(resources)
      .filter((r) => r.key.some(isBlob))
      .map((r) => [r.name, r.key.map(isBlob)]),
  );
  const read = (row: Parameters<typeof toEntry>[0]) => {
    const entry = toEntry(row);
    const blobs = blobKeys.get(entry.kind);
    if (blobs) entry.key = entry.key.map((value, i) => (blobs[i] ? Buffer.from(String(value), 'hex').toString('base64') : value));
    return entry;
  };
  return {
    after: (since, limit, kinds = []) => (pageOf(kinds.length).all(since, ...kinds, limit) as Parameters<typeof toEntry>[0][]).map(read),
    bounds: () => bounds.get() as { floor: number; newest: number },
  };
}

/** The SQLite triggers of one kind, by name: after each insert, update and delete, a change row. */
function sqliteTriggers(resource: Resource): Map<string, string> {
  const triggers = new Map<string, string>();
  const table = ident(resource.name);
  for (const { op, event, row } of OPS) {
    const name = `${PREFIX}${resource.name}_${op}`;
    // SQLite has no base64: a BLOB key is recorded as hex and turned into base64 when read (sqliteChangeReader).
    const key = `json_array(${resource.key.map((f) => (isBlob(f) ? `hex(${row}.${ident(f.column.name)})` : `${row}.${ident(f.column.name)}`)).join(', ')})`;
    const values = `${literal(resource.name)}, ${key}, '${op}', strftime('%Y-%m-%dT%H:%M:%fZ')`;
    triggers.set(
      name,
      `CREATE TRIGGER ${ident(name)} AFTER ${event} ON ${table} BEGIN INSERT INTO ${TABLE} (kind, key, op, at) VALUES (${values}); END`,
    );
  }
  return triggers;
}

/** How far a backup's changes are renumbered: past any seq the database it copies may still hand out. */
const RESTORE_GAP = 2 ** 32;

/**
 * Renumbers the changes of a backup copy (a SQLite file, not served) past every seq its source may still
 * hand out. Restored, it answers every position its readers hold with a 410 (each is below the oldest
 * kept), so none of them takes the restored file's new changes for those it saw, or misses that the
 * changes it saw after the backup are gone: they read afresh. A file with no change yet is left as it is.
 */
export function renumberBackupChanges(copy: Database.Database): void {
  const exists = copy.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(TABLE);
  if (exists) copy.prepare(`UPDATE ${TABLE} SET seq = seq + ?`).run(RESTORE_GAP);
}

/**
 * Makes the change table and the triggers of every recorded kind whose table exists, dropping
 * those of kinds no longer served; a trigger already as wanted is left alone, so processes starting
 * together on one file change nothing twice. Changes are numbered by rowid (no AUTOINCREMENT): the
 * newest change is never purged, so a number is never handed out twice.
 */
export function installSqlite(sqlite: Database.Database, resources: Resource[]): void {
  sqlite
    .transaction(() => {
      sqlite.exec(
        `CREATE TABLE IF NOT EXISTS ${TABLE} (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, op TEXT NOT NULL, at TEXT NOT NULL)`,
      );
      const tables = new Set(
        (sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name),
      );
      const wanted = new Map(
        recorded(resources)
          .filter((r) => tables.has(r.name))
          .flatMap((r) => [...sqliteTriggers(r)]),
      );
      const existing = sqlite
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, ?) = ?")
        .all(PREFIX.length, PREFIX) as { name: string; sql: string }[];
      for (const { name, sql } of existing) if (wanted.get(name) !== sql) sqlite.exec(`DROP TRIGGER ${ident(name)}`);
      const have = new Map(existing.map((t) => [t.name, t.sql]));
      for (const [name, sql] of wanted) if (have.get(name) !== sql) sqlite.exec(sql);
    })
    .immediate();
}

/**
 * PostgreSQL: statement triggers copy each write's rows (transition tables) into a pending table,
 * in the write's transaction, numbered in the order they were written. Numbers handed out there
 * would commit out of order, so readers never see them: the sequencer (one instance at a time, under
 * an advisory lock) moves what has committed into the change table, numbered after the last seq in
 * pending order. A write that commits late is numbered late; none is ever skipped.
 */
export function pgChangeLog(pool: pg.Pool, resources: Resource[]): ChangeLog {
  // Made at start; every call waits for it, and tries again after a failure (the database was unreachable).
  let installed = installPg(pool, resources);
  installed.catch(() => undefined);
  const install = () => installed.catch(() => (installed = installPg(pool, resources)));
  const sequence = async () => {
    await install();
    const { rows } = await pool.query(`SELECT EXISTS (SELECT 1 FROM ${PENDING}) AS pending`);
    if (!rows[0].pending) return;
    await withConnection(
      pool,
      async (client) => {
        await client.query(PG_LOCK);
        await client.query(
          `WITH moved AS (DELETE FROM ${PENDING} RETURNING local, kind, key, op, at),
                last AS (SELECT coalesce(max(seq), 0) AS seq FROM ${TABLE})
           INSERT INTO ${TABLE} (seq, kind, key, op, at)
           SELECT last.seq + row_number() OVER (ORDER BY moved.local), moved.kind, moved.key, moved.op, moved.at FROM moved, last`,
        );
      },
      true,
    );
  };
  const boundsOf = async () => {
    await install();
    const { rows } = await pool.query(`SELECT coalesce(min(seq) - 1, 0) AS floor, coalesce(max(seq), 0) AS newest FROM ${TABLE}`);
    return { floor: Number(rows[0].floor), newest: Number(rows[0].newest) };
  };
  return {
    async after(since, limit, kinds) {
      await sequence();
      const among = kinds?.length ? ' AND kind = ANY($3)' : '';
      const { rows } = await pool.query(`SELECT seq, kind, key, op, ${PG_AT} FROM ${TABLE} WHERE seq > $1${among} ORDER BY seq LIMIT $2`, [
        since,
        limit,
        ...(kinds?.length ? [kinds] : []),
      ]);
      return rows.map(toEntry);
    },
    // Sequenced first: "the current end" includes every change committed before this call.
    async bounds() {
      await sequence();
      return boundsOf();
    },
    async purge(before, batch) {
      // Sequenced first: with nobody reading the feed, the pending table would otherwise only grow.
      await sequence();
      const { newest } = await boundsOf();
      const { rows } = await pool.query(`SELECT seq, ${PG_AT} FROM ${TABLE} ORDER BY seq LIMIT $1`, [batch]);
      const last = purgeable(
        rows.map((r) => ({ seq: Number(r.seq), at: r.at as string })),
        before,
        newest,
      );
      if (last === undefined) return 0;
      return (await pool.query(`DELETE FROM ${TABLE} WHERE seq <= $1`, [last])).rowCount ?? 0;
    },
  };
}

/** The trigger function of one kind: the changed rows of a statement, as changes of `TG_OP`, into the pending table. */
function pgFunction(resource: Resource): string {
  const column = (f: Field, row: string) => `${row}.${ident(f.column.name)}`;
  // A BLOB (bytea) key as its base64 text, without the line breaks encode() puts every 76 characters; a key without a
  // declared type as the text PostgreSQL serves for its type (a timestamp as `2024-01-01 10:00:00`, not to_jsonb's
  // `2024-01-01T10:00:00`), unless it is JSON already (jsonb, as in a database restable made).
  const value = (f: Field, row: string) => {
    const at = column(f, row);
    if (isBlob(f)) return `translate(encode(${at}, 'base64'), E'\\n', '')`;
    if (customKindOf(f.column) !== 'untyped') return at;
    return `CASE WHEN pg_typeof(${at}) IN ('json'::regtype, 'jsonb'::regtype) THEN to_jsonb(${at}) ELSE to_jsonb(${at}::text) END`;
  };
  const key = (row: string) => `jsonb_build_array(${resource.key.map((f) => value(f, row)).join(', ')})`;
  const insert = (op: ChangeOp, rows: string) =>
    `INSERT INTO ${PENDING} (kind, key, op) SELECT ${literal(resource.name)}, ${key('r')}, '${op}' FROM ${rows} r;`;
  // A key's text depends on the writing session's formats (any client may write): fixed to those the service reads with.
  const formats = resource.key.some((f) => customKindOf(f.column) === 'untyped')
    ? " SET DateStyle = 'ISO, YMD' SET TimeZone = 'UTC' SET IntervalStyle = 'postgres'"
    : '';
  return `CREATE OR REPLACE FUNCTION ${ident(`${PREFIX}${resource.name}`)}() RETURNS trigger LANGUAGE plpgsql${formats} AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN ${insert('create', 'restable_new')}
  ELSIF TG_OP = 'UPDATE' THEN ${insert('update', 'restable_new')}
  ELSE ${insert('delete', 'restable_old')}
  END IF;
  RETURN NULL;
END $$`;
}

/** PostgreSQL: the feed's two tables, made if they are not there yet. */
async function makePgTables(client: pg.ClientBase): Promise<void> {
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${TABLE} (seq bigint PRIMARY KEY, kind text NOT NULL, key jsonb NOT NULL, op text NOT NULL, at timestamptz NOT NULL)`,
  );
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${PENDING} (local bigserial NOT NULL, kind text NOT NULL, key jsonb NOT NULL, op text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
}

/**
 * For a copy of a SQLite file into PostgreSQL (copy-to-postgres, inside its transaction): the file's
 * newest change, read as its feed gives it, becomes PostgreSQL's first, so numbering goes on after it
 * and a reader's position from the file stays one (an older one is a 410 there: read afresh, as the
 * copied rows are data, not changes made). What the copy's own inserts recorded, when the feed's
 * triggers were already there, is dropped, and so are the changes a service made there before (its
 * tables were empty: they are of elements the copy does not hold). Returns the seq the feed goes on
 * after (0: no change yet).
 */
export async function continueFeedInPg(client: pg.ClientBase, sqlite: Database.Database, resources: Resource[]): Promise<number> {
  await makePgTables(client);
  await client.query(`DELETE FROM ${PENDING}`);
  await client.query(`DELETE FROM ${TABLE}`);
  const recordedInFile = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(TABLE) !== undefined;
  if (!recordedInFile) return 0;
  const reader = sqliteChangeReader(sqlite, resources);
  const { newest } = reader.bounds();
  const [last] = newest > 0 ? reader.after(newest - 1, 1) : [];
  if (!last) return 0;
  await client.query(`INSERT INTO ${TABLE} (seq, kind, key, op, at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (seq) DO NOTHING`, [
    last.seq,
    last.kind,
    JSON.stringify(last.key),
    last.op,
    last.at,
  ]);
  return last.seq;
}

/** installPgOn in a transaction of its own. */
function installPg(pool: pg.Pool, resources: Resource[]): Promise<void> {
  return withConnection(pool, (client) => installPgOn(client, resources), true);
}

/**
 * Makes the feed's tables, each kind's trigger function and its three statement triggers; drops those of
 * kinds gone. On `client`, in its transaction (a migration's, so that a table it makes is recorded from its first write).
 */
export async function installPgOn(client: pg.ClientBase, resources: Resource[]): Promise<void> {
  await client.query(PG_LOCK);
  await makePgTables(client);
  // No index: every write inserts here and only the sequencer reads, all of it at once (an index
  // was a fifth of what recording cost a write). Tables made by an earlier version lose theirs.
  const { rows: indexed } = await client.query(`SELECT 1 FROM pg_constraint WHERE conname = $1 AND conrelid = $2::regclass`, [
    `${PENDING}_pkey`,
    PENDING,
  ]);
  if (indexed.length > 0) await client.query(`ALTER TABLE ${PENDING} DROP CONSTRAINT ${ident(`${PENDING}_pkey`)}`);
  const { rows: tables } = await client.query(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
  );
  const present = new Set(tables.map((t) => t.name as string));
  const kinds = recorded(resources).filter((r) => present.has(r.name));
  const { rows: existing } = await client.query(
    `SELECT t.tgname AS name, c.relname AS "table" FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal AND starts_with(t.tgname, $1) AND c.relnamespace = current_schema()::regnamespace`,
    [PREFIX],
  );
  const wanted = new Set(kinds.flatMap((r) => OPS.map(({ op }) => `${PREFIX}${r.name}_${op}`)));
  for (const { name, table } of existing) if (!wanted.has(name)) await client.query(`DROP TRIGGER ${ident(name)} ON ${ident(table)}`);
  const have = new Set(existing.map((t) => t.name as string));
  for (const resource of kinds) {
    await client.query(pgFunction(resource));
    for (const { op, event } of OPS) {
      const name = `${PREFIX}${resource.name}_${op}`;
      if (have.has(name)) continue;
      const transition = event === 'DELETE' ? 'OLD TABLE AS restable_old' : 'NEW TABLE AS restable_new';
      await client.query(
        `CREATE TRIGGER ${ident(name)} AFTER ${event} ON ${ident(resource.name)} REFERENCING ${transition} FOR EACH STATEMENT EXECUTE FUNCTION ${ident(`${PREFIX}${resource.name}`)}()`,
      );
    }
  }
}

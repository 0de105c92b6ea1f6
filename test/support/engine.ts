// Opens a store the way the app does (createBackend over a freshly migrated database, no HTTP) on SQLite or
// PostgreSQL, over the pet shop plus one composite-key table: for the store conformance and golden SQL suites.
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import type pg from 'pg';
import { type Backend, createBackend, loadPostgresStore } from '../../src/engine/backend.js';
import { applyPgMigrations } from '../../src/engine/postgres/migrate.js';
import { closePostgres, openPostgres } from '../../src/engine/postgres/pool.js';
import { closeDatabase, openDatabase } from '../../src/engine/sqlite/connection.js';
import { applyMigrations } from '../../src/engine/sqlite/migrate.js';
import type { Page, ResourceStore, Scope, Store } from '../../src/engine/store.js';
import { createRegistry, type Id, type Registry, type Resource } from '../../src/model/registry.js';
import { type CursorCodec, createCursorCodec } from '../../src/request/cursor.js';
import { encodeCursor, type ListQuery, parseListQuery, type RawQuery } from '../../src/request/list-query.js';
import * as petShop from '../pet-shop/schema.js';
import { createPgDatabase, PET_SHOP_MIGRATIONS, PET_SHOP_PG_MIGRATIONS, tempDir } from './helpers.js';

/**
 * A table with a composite key (the client gives both parts) whose first part is a foreign key to pets
 * (ON DELETE CASCADE): the pet shop has none. Its table is made by CREATE_PET_TAGS after the pet shop's migrations.
 */
export const petTags = sqliteTable(
  'pet_tags',
  {
    petId: integer('pet_id')
      .notNull()
      .references(() => petShop.pets.id, { onDelete: 'cascade' }),
    label: text('label').notNull(),
    note: text('note'),
  },
  (t) => [primaryKey({ columns: [t.petId, t.label] })],
);

/** The schema both engines serve here: the tests' pet shop and pet_tags. */
export const schema = { ...petShop, petTags };

/** pet_tags as drizzle-kit would make it on each engine (constraint names as the derived PostgreSQL tables name them). */
const CREATE_PET_TAGS = {
  sqlite: `CREATE TABLE \`pet_tags\` (
    \`pet_id\` integer NOT NULL, \`label\` text NOT NULL, \`note\` text,
    PRIMARY KEY(\`pet_id\`, \`label\`),
    FOREIGN KEY (\`pet_id\`) REFERENCES \`pets\`(\`id\`) ON UPDATE no action ON DELETE cascade)`,
  postgres: `CREATE TABLE "pet_tags" (
    "pet_id" bigint NOT NULL, "label" text NOT NULL, "note" text,
    CONSTRAINT "pet_tags_pet_id_label_pk" PRIMARY KEY("pet_id", "label"),
    CONSTRAINT "pet_tags_pet_id_pets_id_fk" FOREIGN KEY ("pet_id") REFERENCES "public"."pets"("id") ON DELETE cascade ON UPDATE no action)`,
};

export type EngineName = 'sqlite' | 'postgres';

/** A store over a fresh database, and what a caller below HTTP needs to drive it as the HTTP layer does. */
export interface Engine {
  name: EngineName;
  backend: Backend;
  store: Store;
  registry: Registry;
  resource(name: string): Resource;
  /** The kind store of the resource named `name`. */
  kind(name: string): ResourceStore;
  /** A list query parsed from a query string's parameters, as the HTTP layer parses it (`scope`: a related list's). */
  query(name: string, raw?: RawQuery, scope?: Scope): ListQuery;
  /** The cursor the HTTP layer would put in the next page's link, undefined when no rows follow. */
  cursorAfter(query: ListQuery, page: Page): string | undefined;
  /** The related list of the kind `name` under `parent`'s element `id` (the scope a related path gives). */
  scope(parent: string, field: string, id: Id): Scope;
  /** Runs SQL on the database beside the store (`$1` placeholders on PostgreSQL, `?` on SQLite). */
  sql(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /**
   * Called with the driver as soon as it is open, before migrations and before the store exists: the
   * better-sqlite3 connection, or the pg pool (no connection made yet). The golden tests record statements here.
   */
  instrument?: (driver: Database.Database | pg.Pool) => void;
}

/** What both engines share: the registry's lookups and the HTTP layer's query parsing and cursors. */
function engineOf(name: EngineName, backend: Backend, registry: Registry, sql: Engine['sql'], close: () => Promise<void>): Engine {
  const cursors: CursorCodec = createCursorCodec(() => backend.cursorKey());
  const resource = (kind: string) => {
    const found = registry.resources.find((r) => r.name === kind);
    if (!found) throw new Error(`no resource ${kind}`);
    return found;
  };
  return {
    name,
    backend,
    store: backend.store,
    registry,
    resource,
    kind: (kind) => backend.store.of(resource(kind)),
    // As src/api/compile.ts's list: a related list's cursors are bound to its scope.
    query: (kind, raw = {}, scope) => parseListQuery(resource(kind), raw, { scope: scope ? `${scope.field}=${scope.value}` : '', cursors }),
    cursorAfter(query, page) {
      const last = page.rows.at(-1);
      if (!page.more || !last) return undefined;
      return encodeCursor(query, last, cursors, () => page.rowidOf(last), page.rank);
    },
    scope: (parent, field, id) => ({ field, value: id, parent: resource(parent) }),
    sql,
    close,
  };
}

/** The SQLite store on a new temporary file, migrated as main.ts migrates it. */
export async function openSqliteEngine(options: OpenOptions = {}): Promise<Engine> {
  const temp = tempDir();
  const database = openDatabase(join(temp.dir, 'store.db'));
  try {
    options.instrument?.(database.sqlite);
    await applyMigrations(database, PET_SHOP_MIGRATIONS);
    database.sqlite.exec(CREATE_PET_TAGS.sqlite);
    const registry = createRegistry(schema);
    const backend = createBackend(database, {
      schema,
      resources: registry.resources,
      config: { cursorSecret: undefined },
      migrationsFolder: PET_SHOP_MIGRATIONS,
    });
    await backend.ready;
    const sql: Engine['sql'] = async (text, params = []) => {
      const statement = database.sqlite.prepare(text);
      if (statement.reader) return statement.all(...params) as Record<string, unknown>[];
      statement.run(...params);
      return [];
    };
    return engineOf('sqlite', backend, registry, sql, async () => {
      backend.store.flush();
      closeDatabase(database);
      temp.remove();
    });
  } catch (error) {
    closeDatabase(database);
    temp.remove();
    throw error;
  }
}

/** The PostgreSQL store on a new database of TEST_DATABASE_URL's server, migrated as main.ts migrates it. */
export async function openPostgresEngine(options: OpenOptions = {}): Promise<Engine> {
  const created = await createPgDatabase();
  const handle = openPostgres(created.url);
  try {
    options.instrument?.(handle.pool);
    await applyPgMigrations(handle, PET_SHOP_PG_MIGRATIONS);
    await handle.pool.query(CREATE_PET_TAGS.postgres);
    await loadPostgresStore(handle);
    const registry = createRegistry(schema);
    const backend = createBackend(handle, {
      schema,
      resources: registry.resources,
      config: { cursorSecret: undefined },
      migrationsFolder: PET_SHOP_PG_MIGRATIONS,
    });
    await backend.ready;
    const sql: Engine['sql'] = async (text, params = []) => (await handle.pool.query(text, params)).rows;
    return engineOf('postgres', backend, registry, sql, async () => {
      try {
        await closePostgres(handle);
      } finally {
        await created.drop();
      }
    });
  } catch (error) {
    await closePostgres(handle).catch(() => undefined);
    await created.drop();
    throw error;
  }
}

/** TEST_DATABASE_URL or the refusal every .pg.ts suite gives without it. */
export function requirePostgres(): void {
  if (!process.env.TEST_DATABASE_URL)
    throw new Error('TEST_DATABASE_URL is not set: the .pg.ts suites need a PostgreSQL server (an admin URL); run `node test/run.mjs pg`');
}

// Proves a migrations folder before it is committed: its whole chain applied to a new scratch database by the
// service's own migrators (SQLite: a temporary file; PostgreSQL: PGlite, in memory), the change feed's triggers too.
// Development only (db:generate, through tsx): PGlite is a devDependency; nothing here touches a real database.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { unaccent } from '@electric-sql/pglite/contrib/unaccent';
import { createPgConfig } from '@electric-sql/pglite/node-postgres';
import pg from 'pg';
import { installPgOn, installSqlite } from '../engine/changes.js';
import { applyPgMigrations } from '../engine/postgres/migrate.js';
import { closeDatabase, openDatabase } from '../engine/sqlite/connection.js';
import { applyMigrations } from '../engine/sqlite/migrate.js';
import type { Resource } from '../model/registry.js';

/** The engine a chain was applied on: what the report says it was proven on. */
export interface Proof {
  applied: string[];
  /** The database it ran on, for the report. */
  on: string;
}

/** Applies every migration of `folder` to a new SQLite file with applyMigrations, as `npm start` does on a new database. */
export async function proveSqlite(folder: string, resources: Resource[]): Promise<Proof> {
  const dir = mkdtempSync(join(tmpdir(), 'restable-proof-'));
  try {
    const handle = openDatabase(join(dir, 'proof.db'), 'OFF');
    try {
      const { applied } = await applyMigrations(handle, folder, join(dir, 'backup.db'), (sqlite) => installSqlite(sqlite, resources));
      return { applied, on: 'a new SQLite file' };
    } finally {
      closeDatabase(handle);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Applies every migration of `folder` with applyPgMigrations (advisory lock, one transaction, the feed's
 * triggers) to PGlite, PostgreSQL compiled to WebAssembly, through its node-postgres adapter: no server needed.
 * unaccent is loaded because the search index's migration creates it.
 */
export async function provePostgres(folder: string, resources: Resource[]): Promise<Proof> {
  const pglite = await PGlite.create({ extensions: { unaccent } });
  const pool = new pg.Pool(createPgConfig(pglite));
  try {
    const { applied } = await applyPgMigrations({ engine: 'postgres', pool, url: 'pglite' }, folder, (client) =>
      installPgOn(client, resources),
    );
    // `PostgreSQL 18.7 (PGlite 0.5.17) on wasm32-unknown-emscripten, compiled by…`: the part before " on ".
    const { rows } = await pool.query<{ version: string }>('SELECT version()');
    return { applied, on: `a new PostgreSQL database: ${rows[0]?.version.split(' on ')[0] ?? 'PGlite'}, in memory` };
  } finally {
    await pool.end();
    await pglite.close();
  }
}

// Full-text search (docs/search.md): the declaration schema.ts makes next to a table, and the one
// place that spells its index in SQL: an FTS5 external-content table kept by triggers (SQLite), a
// generated tsvector column with a GIN index (PostgreSQL), and each engine's literal query syntax.

import type Database from 'better-sqlite3';
import { getTableColumns, type Placeholder, type SQL, sql } from 'drizzle-orm';
import { getTableConfig, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import { ident, literal } from '../engine/quote.js';

const DECLARATION = Symbol.for('restable.searchable');

/** `q=` searches these text fields of `table` (SQL column names, in declaration order). */
export interface SearchDeclaration {
  readonly [DECLARATION]: true;
  readonly table: SQLiteTable;
  /** The fields' keys, as schema.ts names them. */
  readonly fields: readonly string[];
}

/**
 * Marks text fields of a table as searchable by `q=` (declare it next to the table in schema.ts):
 * `export const usersSearch = searchable(users, ['name']);`. `npm run db:generate` writes the
 * migration that builds the index; `npm run db:check` fails while the committed ones do not match.
 */
export function searchable<T extends SQLiteTable>(table: T, fields: (keyof T['_']['columns'] & string)[]): SearchDeclaration {
  return { [DECLARATION]: true, table, fields: [...fields] };
}

export function isSearchDeclaration(value: unknown): value is SearchDeclaration {
  return typeof value === 'object' && value !== null && (value as Partial<SearchDeclaration>)[DECLARATION] === true;
}

/** The searchable tables of a schema, by SQL table name: the key column and the searchable columns (the state migrations reach). */
export type SearchState = Record<string, { key: string; columns: string[] }>;

/** What the declarations of a schema module ask for, as SQL names (checked for sense by the registry at start). */
export function searchStateOf(schema: Record<string, unknown>): SearchState {
  const state: SearchState = {};
  for (const declaration of Object.values(schema).filter(isSearchDeclaration)) {
    const config = getTableConfig(declaration.table);
    const columns = getTableColumns(declaration.table);
    const key = config.columns.find((c) => c.primary)?.name ?? '';
    state[config.name] = { key, columns: declaration.fields.map((field) => columns[field]?.name ?? field) };
  }
  return state;
}

/** The table (SQLite) or index (PostgreSQL) that holds a table's search index: restable's own name. */
export const searchIndexName = (table: string) => `restable_search_${table}`;
/** PostgreSQL: the generated tsvector column added to a searchable table. */
export const SEARCH_COLUMN = 'restable_search';
/** PostgreSQL: the immutable function that turns text into the indexed words (unaccented, ASCII punctuation as spaces). */
const PG_FUNCTION = 'restable_search_words';
/** ASCII punctuation: PostgreSQL's parser would read e-mail addresses, hosts, paths and numbers out of it, SQLite's does not. */
const PUNCTUATION = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';

/** How one engine builds (`create`) and removes (`drop`) a table's index. */
export type SearchStatements = (table: string, index: SearchState[string]) => { create: string[]; drop: string[] };

/** SQLite: an FTS5 table over `columns`, its rowid the table's `key`, kept in step by three triggers. */
export const sqliteSearchStatements: SearchStatements = (table, { key, columns }) => {
  const fts = searchIndexName(table);
  const list = columns.map(ident).join(', ');
  const of = (row: 'new' | 'old') => columns.map((c) => `${row}.${ident(c)}`).join(', ');
  const remove = `INSERT INTO ${ident(fts)}(${ident(fts)}, rowid, ${list}) VALUES ('delete', old.${ident(key)}, ${of('old')});`;
  const add = `INSERT INTO ${ident(fts)}(rowid, ${list}) VALUES (new.${ident(key)}, ${of('new')});`;
  const trigger = (what: string) => ident(`${fts}_${what}`);
  const changed = [key, ...columns].map((c) => `old.${ident(c)} IS NOT new.${ident(c)}`).join(' OR ');
  return {
    create: [
      `CREATE VIRTUAL TABLE ${ident(fts)} USING fts5(${list}, content=${literal(table)}, content_rowid=${literal(key)}, tokenize='unicode61 remove_diacritics 2')`,
      `CREATE TRIGGER ${trigger('insert')} AFTER INSERT ON ${ident(table)} BEGIN ${add} END`,
      `CREATE TRIGGER ${trigger('delete')} AFTER DELETE ON ${ident(table)} BEGIN ${remove} END`,
      // Only when an indexed value changes: a write that leaves them as they were (a PATCH of another field) costs the index nothing.
      `CREATE TRIGGER ${trigger('update')} AFTER UPDATE OF ${ident(key)}, ${list} ON ${ident(table)} WHEN ${changed} BEGIN ${remove} ${add} END`,
      `INSERT INTO ${ident(fts)}(${ident(fts)}) VALUES ('rebuild')`,
    ],
    drop: [
      ...['insert', 'delete', 'update'].map((what) => `DROP TRIGGER IF EXISTS ${trigger(what)}`),
      `DROP TABLE IF EXISTS ${ident(fts)}`,
    ],
  };
};

/**
 * SQLite: the search index of every table that lost its triggers, built again (in the migrations'
 * transaction). drizzle-kit changes a column by copying the table into a new one and dropping the old,
 * which drops the triggers that keep the index in step, whichever tool wrote or ran that migration. The
 * index's own table says what it indexes (its columns, its `content_rowid`); one whose table is gone goes too.
 */
export function restoreSqliteSearch(sqlite: Database.Database): void {
  const prefix = searchIndexName('');
  const indexes = sqlite
    .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ? AND sql LIKE 'CREATE VIRTUAL TABLE%'")
    .all(prefix.length, prefix) as { name: string; sql: string }[];
  const exists = sqlite.prepare('SELECT count(*) FROM sqlite_master WHERE type = ? AND name = ?').pluck();
  for (const { name, sql: created } of indexes) {
    if (['insert', 'delete', 'update'].every((what) => exists.get('trigger', `${name}_${what}`) === 1)) continue;
    const table = name.slice(prefix.length);
    const key = /content_rowid='((?:[^']|'')*)'/.exec(created)?.[1]?.replaceAll("''", "'") ?? '';
    const columns = (sqlite.prepare(`PRAGMA table_info(${ident(name)})`).all() as { name: string }[]).map((c) => c.name);
    const { drop, create } = sqliteSearchStatements(table, { key, columns });
    for (const statement of exists.get('table', table) === 1 ? [...drop, ...create] : drop) sqlite.exec(statement);
  }
}

/** PostgreSQL: a generated tsvector column over `columns` and a GIN index on it. */
export const pgSearchStatements: SearchStatements = (table, { columns }) => {
  const text = columns.map((c) => `coalesce(${ident(c)}, '')`).join(` || ' ' || `);
  return {
    create: [
      // unaccent is a trusted extension (PostgreSQL ≥ 13): a database owner may create it. The function's
      // SQL-standard body (PostgreSQL ≥ 14) binds unaccent when it is created, whatever the search_path later.
      'CREATE EXTENSION IF NOT EXISTS unaccent',
      `CREATE OR REPLACE FUNCTION ${PG_FUNCTION}(text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN to_tsvector('simple'::regconfig, translate(unaccent($1), ${literal(PUNCTUATION)}, repeat(' ', ${PUNCTUATION.length})))`,
      `ALTER TABLE ${ident(table)} ADD COLUMN ${ident(SEARCH_COLUMN)} tsvector GENERATED ALWAYS AS (${PG_FUNCTION}(${text})) STORED`,
      `CREATE INDEX ${ident(searchIndexName(table))} ON ${ident(table)} USING gin (${ident(SEARCH_COLUMN)})`,
    ],
    drop: [
      `DROP INDEX IF EXISTS ${ident(searchIndexName(table))}`,
      `ALTER TABLE IF EXISTS ${ident(table)} DROP COLUMN IF EXISTS ${ident(SEARCH_COLUMN)}`,
    ],
  };
};

/**
 * The statements that take the index from the state `from` (what the committed migrations built) to
 * `to` (what the schema declares): a table whose fields changed is dropped and built again.
 */
export function searchChanges(from: SearchState, to: SearchState, statementsOf: SearchStatements): string[] {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const statements: string[] = [];
  for (const [table, index] of Object.entries(from)) if (!same(index, to[table])) statements.push(...statementsOf(table, index).drop);
  for (const [table, index] of Object.entries(to)) if (!same(index, from[table])) statements.push(...statementsOf(table, index).create);
  return [...new Set(statements)]; // what every index needs first (PostgreSQL's extension and function) once
}

/** Whether a word of `q` holds something to search for: a letter or a digit (emoji and punctuation alone are not indexed). */
export const hasWordCharacters = (word: string) => /[\p{L}\p{N}\p{Co}]/u.test(word);

/**
 * `q`'s words as an FTS5 query: each one a quoted string, which FTS5 reads with the index's own
 * tokenizer and never as syntax (a word of several tokens, `e-mail`, is a phrase); all required; the
 * last one also a prefix.
 */
export function fts5Query(words: readonly string[]): string {
  return words.map((word, i) => `"${word.replaceAll('"', '""')}"${i === words.length - 1 ? '*' : ''}`).join(' ');
}

/**
 * PostgreSQL: `q`'s words (a bound text parameter `p`: their JSON array) as the tsquery that matches
 * elements holding every word, the last one also as a prefix, as FTS5 reads the same words (fts5Query).
 * Each word is folded by the very function that builds the index (`restable_search_words`: unaccent,
 * punctuation as spaces, the simple configuration's lower case), so a word typed as it is stored always
 * finds it, whatever the script; a word the folding cuts in several (`dog-walker`) is their phrase, in
 * order and adjacent (`<->`); a word that folds to nothing adds no condition (and a `q` of only such words matches nothing).
 */
export function pgSearchQuery(p: SQL | Placeholder): SQL {
  // A tsvector holds each lexeme once, with its positions: unnested by position, the word's lexemes come back in order.
  const lexemes = sql.raw(`SELECT lexeme, unnest(positions) AS at FROM unnest(${PG_FUNCTION}(word.w))`);
  return sql`(SELECT string_agg(phrase, ' & ' ORDER BY n)::tsquery FROM (SELECT word.n, (SELECT string_agg(quote_literal(lexeme) || CASE WHEN word.n = word.words AND at = last THEN ':*' ELSE '' END, ' <-> ' ORDER BY at) FROM (SELECT lexeme, at, max(at) OVER () AS last FROM (${lexemes}) AS lexemes) AS ordered) AS phrase FROM (SELECT w, n, count(*) OVER () AS words FROM json_array_elements_text(${p}::json) WITH ORDINALITY AS given (w, n)) AS word) AS phrases)`;
}

// `npm run introspect -- <sqlite file> [--force]`: writes src/db/schema.ts from an existing database and
// replaces migrations/ with a baseline recorded as applied there (never run), so the file is served as it is.
// Development only (run through tsx, like db:generate): it needs drizzle-kit, a devDependency. Never changes a row.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { type DrizzleSQLiteSnapshotJSON, generateSQLiteDrizzleJson, generateSQLiteMigration } from 'drizzle-kit/api';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import pg from 'pg';
import * as internal from '../db/internal-schema.js';
import { redactUrl } from '../engine/postgres/pool.js';
import { createRegistry, RegistryError } from '../model/registry.js';
import { generatePgMigration, type JournalEntry } from './generate.js';
import { pgRecordedMigrations, readPgDatabase, recordPgBaseline } from './introspect-pg.js';
import { runAsCommand, UsageError } from './usage.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What `npm run introspect` writes when no option says otherwise. */
export const DEFAULTS = { schema: join(ROOT, 'src/db/schema.ts'), out: join(ROOT, 'migrations') };

/** drizzle-kit writes this between statements; drizzle's migrator splits on it. */
const BREAKPOINT = '--> statement-breakpoint\n';
/** drizzle's bookkeeping table, created and filled exactly as src/engine/sqlite/migrate.ts does. */
const MIGRATIONS_TABLE = '__drizzle_migrations';

// ---------------------------------------------------------------------------------------------
// Reading the database (PRAGMAs and sqlite_master only; the connection is read-only).

export interface ColumnModel {
  name: string;
  /** The declared type as written (`NVARCHAR(120)`), empty when none. */
  declared: string;
  notNull: boolean;
  /** The default's SQL text, as PRAGMA table_xinfo gives it. */
  default: string | null;
  /** A generated column's expression and kind. */
  generated?: { expression: string; mode: 'stored' | 'virtual' };
  /** A true boolean (PostgreSQL's): declared in boolean mode, true/false in JSON, `boolean` again on PostgreSQL. */
  boolean?: boolean;
  /** A JSON document (PostgreSQL's json, jsonb): declared as text in json mode, any JSON value, `jsonb` on PostgreSQL. */
  json?: boolean;
  /** A random UUID by default (PostgreSQL's gen_random_uuid()): declared as one the service makes for each new row. */
  madeUuid?: boolean;
}

export interface IndexModel {
  name: string;
  unique: boolean;
  /** `c`: CREATE INDEX; `u`: a UNIQUE constraint. */
  origin: 'c' | 'u';
  columns: string[];
  /** The WHERE clause of a partial index. */
  where?: string;
}

export interface ForeignKeyModel {
  parent: string;
  from: string[];
  to: string[];
  onDelete: string;
  onUpdate: string;
}

export interface TableModel {
  name: string;
  kind: 'table' | 'view';
  columns: ColumnModel[];
  /** The primary key's columns in key order (PRAGMA table_info's `pk`), none for a keyless table or a view. */
  key: string[];
  autoIncrement: boolean;
  withoutRowid: boolean;
  /** A STRICT table (SQLite ≥ 3.37): its `ANY` columns hold every value as given, converting none. */
  strict?: boolean;
  /**
   * The sole integer key is the client's to give, the database assigns it not: on SQLite a key with an index of
   * its own (PRAGMA index_list, origin `pk`: no rowid alias, as not declared exactly INTEGER, DESC, or in a WITHOUT
   * ROWID table); on PostgreSQL one without identity or serial. Declared intKey().
   */
  keyGiven?: boolean;
  indexes: IndexModel[];
  foreignKeys: ForeignKeyModel[];
  /** What the schema cannot declare and keeps only in the database (expression indexes, foreign keys to nothing). */
  notes: string[];
  /** A view's SELECT. */
  select?: string;
}

export interface DatabaseModel {
  tables: TableModel[];
  /** Tables left out, with why (virtual tables, their shadow tables, restable's own). */
  skipped: string[];
  /** The tables left out as restable's own (restable_…): in a file restable never migrated, someone else's. */
  own: string[];
}

interface Token {
  kind: 'word' | 'ident' | 'string' | 'punct';
  /** A word as written, an identifier unquoted, a string unescaped. */
  value: string;
  start: number;
  end: number;
  /** Parentheses open around the token. */
  depth: number;
}

/** Splits SQL into words, quoted identifiers, strings and punctuation; comments and numbers' insides need no more. */
function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let depth = 0;
  let i = 0;
  const closing: Record<string, string> = { "'": "'", '"': '"', '`': '`', '[': ']' };
  while (i < sql.length) {
    const c = sql[i] as string;
    if (/\s/.test(c)) i++;
    else if (sql.startsWith('--', i)) i = sql.indexOf('\n', i) === -1 ? sql.length : sql.indexOf('\n', i);
    else if (sql.startsWith('/*', i)) i = sql.indexOf('*/', i) === -1 ? sql.length : sql.indexOf('*/', i) + 2;
    else if (c in closing) {
      const close = closing[c] as string;
      let j = i + 1;
      let value = '';
      for (; j < sql.length; j++) {
        if (sql[j] !== close) value += sql[j];
        else if (close !== ']' && sql[j + 1] === close) value += sql[j++];
        else break;
      }
      tokens.push({ kind: c === "'" ? 'string' : 'ident', value, start: i, end: j + 1, depth });
      i = j + 1;
    } else if (/[\p{L}\p{N}_$]/u.test(c)) {
      const match = /^[\p{L}\p{N}_$]+/u.exec(sql.slice(i)) as RegExpExecArray;
      tokens.push({ kind: 'word', value: match[0], start: i, end: i + match[0].length, depth });
      i += match[0].length;
    } else {
      if (c === ')') depth--;
      tokens.push({ kind: 'punct', value: c, start: i, end: i + 1, depth });
      if (c === '(') depth++;
      i++;
    }
  }
  return tokens;
}

const isWord = (token: Token | undefined, word: string, depth = 0) =>
  token?.kind === 'word' && token.depth === depth && token.value.toUpperCase() === word;

/** The text after the first `keyword` outside parentheses (a view's SELECT after AS, an index's WHERE). */
function after(sql: string, keyword: string): string | undefined {
  const token = tokenize(sql).find((t) => isWord(t, keyword));
  return token ? sql.slice(token.end).trim().replace(/;\s*$/, '') : undefined;
}

/** The generated columns of a CREATE TABLE: `name … AS (expression) [STORED|VIRTUAL]` at the top of a column definition. */
function generatedColumns(sql: string): Map<string, ColumnModel['generated']> {
  const found = new Map<string, ColumnModel['generated']>();
  const tokens = tokenize(sql);
  const open = tokens.findIndex((t) => t.value === '(' && t.depth === 0);
  let definition: Token[] = [];
  const finish = () => {
    const as = definition.findIndex((t) => isWord(t, 'AS', 1));
    const name = definition[0];
    const paren = definition[as + 1];
    if (as > 0 && name && paren?.value === '(') {
      const close = definition.findIndex((t, k) => k > as + 1 && t.value === ')' && t.depth === 1);
      const expression = sql.slice(paren.end, definition[close]?.start).trim();
      const mode = definition.slice(close).some((t) => isWord(t, 'STORED', 1)) ? 'stored' : 'virtual';
      found.set(name.value, { expression, mode });
    }
    definition = [];
  };
  for (const token of tokens.slice(open + 1)) {
    if (token.depth === 0) break;
    if (token.depth === 1 && token.value === ',' && token.kind === 'punct') finish();
    else definition.push(token);
  }
  finish();
  return found;
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Reads every table and view of the main schema; changes nothing. */
export function readDatabase(sqlite: Database.Database): DatabaseModel {
  // `strict` since SQLite 3.37, as PRAGMA table_list itself (3.37.0 added both).
  type ListRow = { schema: string; name: string; type: string; wr: number; strict?: number };
  const listed = (sqlite.prepare('PRAGMA table_list').all() as ListRow[]).filter((t) => t.schema === 'main');
  // sqlite_master lists objects in the order they were created: tables keep it (views go last).
  const master = sqlite.prepare("SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view', 'index')").all() as {
    name: string;
    type: string;
    sql: string | null;
  }[];
  const sqlOf = new Map(master.map((r) => [r.name, r.sql ?? '']));
  const created = new Map(master.map((r, i) => [r.name, (r.type === 'view' ? master.length : 0) + i]));
  const skipped: string[] = [];
  const own: string[] = [];
  const kept = listed
    .filter((t) => {
      // SQLite compares table names without case: `__Drizzle_Migrations` is drizzle's table too.
      if (/^sqlite_/i.test(t.name) || t.name.toLowerCase() === MIGRATIONS_TABLE) return false;
      if (t.type === 'virtual' || t.type === 'shadow') skipped.push(`${t.name} (a ${t.type} table)`);
      else if (t.name.toLowerCase().startsWith('restable_')) {
        skipped.push(`${t.name} (restable's own)`);
        own.push(t.name);
      } else return true;
      return false;
    })
    .sort((a, b) => (created.get(a.name) ?? 0) - (created.get(b.name) ?? 0));
  const byLowerName = new Map(kept.map((t) => [t.name.toLowerCase(), t.name]));

  const tables: TableModel[] = kept.map((t) => {
    const sql = sqlOf.get(t.name) ?? '';
    const generated = t.type === 'table' ? generatedColumns(sql) : new Map();
    type ColumnRow = { name: string; type: string; notnull: number; dflt_value: string | null; pk: number; hidden: number };
    const rows = sqlite.prepare(`PRAGMA table_xinfo(${quoteIdent(t.name)})`).all() as ColumnRow[];
    const columns = rows
      .filter((c) => c.hidden !== 1)
      .map((c) => ({
        name: c.name,
        declared: c.type,
        notNull: c.notnull === 1,
        default: c.dflt_value,
        ...(c.hidden >= 2 && generated.get(c.name) ? { generated: generated.get(c.name) } : {}),
      }));
    const key =
      t.type === 'view'
        ? []
        : rows
            .filter((c) => c.pk > 0)
            .sort((a, b) => a.pk - b.pk)
            .map((c) => c.name);
    const table: TableModel = {
      name: t.name,
      kind: t.type === 'view' ? 'view' : 'table',
      columns,
      key,
      autoIncrement: tokenize(sql).some((token) => token.kind === 'word' && token.value.toUpperCase() === 'AUTOINCREMENT'),
      withoutRowid: t.wr === 1,
      strict: t.strict === 1,
      indexes: [],
      foreignKeys: [],
      notes: [],
    };
    if (t.type === 'view') return { ...table, select: after(sql, 'AS') ?? '' };
    readIndexes(sqlite, table, sqlOf);
    return table;
  });
  const byName = new Map(tables.map((t) => [t.name, t]));
  for (const table of tables) if (table.kind === 'table') readForeignKeys(sqlite, table, byName, byLowerName);
  return { tables, skipped, own };
}

function readIndexes(sqlite: Database.Database, table: TableModel, sqlOf: Map<string, string>): void {
  type IndexRow = { name: string; unique: number; origin: string; partial: number };
  type ColumnRow = { cid: number; name: string | null; key: number };
  for (const index of sqlite.prepare(`PRAGMA index_list(${quoteIdent(table.name)})`).all() as IndexRow[]) {
    if (index.origin === 'pk') {
      table.keyGiven = true;
      continue;
    }
    const parts = (sqlite.prepare(`PRAGMA index_xinfo(${quoteIdent(index.name)})`).all() as ColumnRow[]).filter((c) => c.key === 1);
    if (parts.some((c) => c.cid < 0 || c.name === null)) {
      table.notes.push(`index "${index.name}" is on an expression: it stays in the database, undeclared here`);
      continue;
    }
    const where = index.partial ? after(sqlOf.get(index.name) ?? '', 'WHERE') : undefined;
    table.indexes.push({
      name: index.name,
      unique: index.unique === 1,
      origin: index.origin === 'u' ? 'u' : 'c',
      columns: parts.map((c) => c.name as string),
      ...(where ? { where } : {}),
    });
  }
  table.indexes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function readForeignKeys(
  sqlite: Database.Database,
  table: TableModel,
  byName: Map<string, TableModel>,
  byLowerName: Map<string, string>,
): void {
  type Row = { id: number; seq: number; table: string; from: string; to: string | null; on_update: string; on_delete: string };
  const rows = sqlite.prepare(`PRAGMA foreign_key_list(${quoteIdent(table.name)})`).all() as Row[];
  const ids = [...new Set(rows.map((r) => r.id))].sort((a, b) => a - b);
  for (const id of ids) {
    const parts = rows.filter((r) => r.id === id).sort((a, b) => a.seq - b.seq);
    const first = parts[0] as Row;
    // SQLite matches table and column names case-insensitively; the schema needs them as spelled.
    const parent = byName.get(byLowerName.get(first.table.toLowerCase()) ?? '');
    const columnOf = (owner: TableModel, name: string) => owner.columns.find((c) => c.name.toLowerCase() === name.toLowerCase())?.name;
    const from = parts.map((p) => columnOf(table, p.from));
    // A reference without columns names the parent's primary key.
    const to = parent ? (parts.every((p) => p.to === null) ? parent.key : parts.map((p) => columnOf(parent, p.to ?? ''))) : [];
    if (parent?.kind !== 'table' || to.length !== from.length || [...from, ...to].some((c) => c === undefined)) {
      table.notes.push(`foreign key (${parts.map((p) => p.from).join(', ')}) → ${first.table} names no table or column here: left out`);
      continue;
    }
    table.foreignKeys.push({
      parent: parent.name,
      from: from as string[],
      to: to as string[],
      onDelete: first.on_delete.toLowerCase(),
      onUpdate: first.on_update.toLowerCase(),
    });
  }
  // SQLite numbers foreign keys last-declared first; the schema lists them in column order.
  const position = (fk: ForeignKeyModel) => table.columns.findIndex((c) => c.name === fk.from[0]);
  table.foreignKeys.sort((a, b) => position(a) - position(b));
}

// ---------------------------------------------------------------------------------------------
// Writing the schema module.

/** A declared type SQLite reads as NUMERIC affinity that means a boolean (BOOLEAN, BOOL), not INT (rule 1 wins). */
const BOOLEAN = /BOOL/i;

/**
 * The column builder of a declared type, by SQLite's affinity rules (https://sqlite.org/datatype3.html §3.1).
 * In a STRICT table `ANY` holds any value unconverted, as a column without a declared type does
 * (https://sqlite.org/stricttables.html); elsewhere it is NUMERIC affinity, like any other unknown name (rule 5).
 */
export function builderOf(declared: string, strict = false): 'integer' | 'text' | 'bytes' | 'untyped' | 'real' | 'numeric' | 'dateText' {
  const type = declared.toUpperCase();
  if (strict && type.trim() === 'ANY') return 'untyped';
  if (type.includes('INT')) return 'integer';
  if (/CHAR|CLOB|TEXT/.test(type)) return 'text';
  if (type.includes('BLOB')) return 'bytes';
  if (type.trim() === '') return 'untyped';
  if (/REAL|FLOA|DOUB/.test(type)) return 'real';
  // NUMERIC affinity, served by meaning: booleans are 0/1 integers, dates are the text they hold (dateText()
  // keeps the affinity, and refuses text SQLite would store as another number).
  if (BOOLEAN.test(type)) return 'integer';
  if (/DATE|TIME/.test(type)) return 'dateText';
  return 'numeric';
}

const RESERVED = new Set(
  (
    'break case catch class const continue debugger default delete do else enum export extends false finally for function if ' +
    'import in instanceof new null return super switch this throw true try typeof var void while with yield let static ' +
    'implements interface package private protected public await arguments eval undefined NaN Infinity'
  ).split(' '),
);

/** camelCase of a SQL name: words split at case changes and at anything that is not a letter or digit. */
export function camelCase(name: string): string {
  const words = name.split(/[^A-Za-z0-9]+/).flatMap((part) => part.match(/[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+[a-z]*/g) ?? []);
  const text = words.map((w, i) => (i === 0 ? w.toLowerCase() : (w[0] as string).toUpperCase() + w.slice(1).toLowerCase())).join('');
  return /^[0-9]/.test(text) ? `_${text}` : text;
}

/** `base`, or `base2`, `base3`… : the first not `taken`; the result is then taken. */
function uniqueName(base: string, taken: Set<string>): string {
  let name = base;
  for (let n = 2; taken.has(name) || name in Object.prototype; n++) name = `${base}${n}`;
  taken.add(name);
  return name;
}

const str = (text: string) =>
  `'${text
    .replace(/\\/g, '\\\\')
    .replace(/'/g, "\\'")
    .replace(/\n/g, '\\n')
    .replace(/\r/g, '\\r')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029')}'`;
const sqlTag = (text: string) => `sql\`${text.replace(/\\/g, '\\\\').replace(/`/g, '\\`').replace(/\$\{/g, '\\${')}\``;
const objectKey = (key: string) => (/^[A-Za-z_$][\w$]*$/.test(key) ? key : str(key));

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** A column default as drizzle declares it: a literal as a value of the field's type, anything else as SQL. */
function defaultOf(text: string | null, builder: ReturnType<typeof builderOf>): string | undefined {
  if (text === null || text.toUpperCase() === 'NULL') return undefined;
  const tokens = tokenize(text);
  const literal = tokens.length === 1 && tokens[0]?.kind === 'string' ? tokens[0].value : undefined;
  if (NUMBER.test(text)) {
    if (builder === 'integer' && Number.isSafeInteger(Number(text))) return String(Number(text));
    if (builder === 'real' || builder === 'untyped') return String(Number(text));
    if (builder === 'text' || builder === 'dateText' || builder === 'numeric') return str(text);
  }
  if (literal !== undefined && ['text', 'dateText', 'numeric', 'untyped'].includes(builder)) return str(literal);
  if (builder === 'integer' && /^(TRUE|FALSE)$/i.test(text)) return text.toUpperCase() === 'TRUE' ? '1' : '0';
  // SQLite reports an expression default without the parentheses its declaration needs, and drizzle-kit writes an
  // SQL default as it is given: `DEFAULT lower(hex(…))` is a syntax error, so a migration rebuilding the table
  // would fail. A single token (CURRENT_TIMESTAMP, a literal) stands alone; anything else is put back in them.
  const whole = text.startsWith('(') && tokens.findIndex((t) => t.value === ')' && t.depth === 0) === tokens.length - 1;
  const inner = whole ? text.slice(1, -1) : text;
  return sqlTag(tokenize(inner).length === 1 ? inner : `(${inner})`);
}

/** A json-mode column's default as the value it holds (drizzle serializes it): `'{"a":1}'` → `{"a":1}`; else as SQL. */
function jsonDefault(text: string, declared: string): string {
  const tokens = tokenize(text);
  if (tokens.length !== 1 || tokens[0]?.kind !== 'string') return declared;
  try {
    return JSON.stringify(JSON.parse(tokens[0].value));
  } catch {
    return sqlTag(text);
  }
}

const ACTIONS = new Set(['cascade', 'restrict', 'set null', 'set default']);

interface Names {
  exports: Map<string, string>;
  fields: Map<string, Map<string, string>>;
}

/** Export names (unique, never an import or a reserved word) and field keys (unique per table). */
function nameAll(tables: TableModel[], imports: Set<string>): Names {
  const taken = new Set([...imports, ...RESERVED]);
  const exports = new Map<string, string>();
  const fields = new Map<string, Map<string, string>>();
  for (const table of tables) {
    const base = camelCase(table.name) || table.kind;
    exports.set(table.name, uniqueName(taken.has(base) ? `${base}${table.kind === 'view' ? 'View' : 'Table'}` : base, taken));
    const keys = new Set<string>();
    fields.set(table.name, new Map(table.columns.map((c) => [c.name, uniqueName(camelCase(c.name) || 'column', keys)])));
  }
  return { exports, fields };
}

/** Parents before children where the references allow it, so most references point back; the rest are lazy. */
function declarationOrder(tables: TableModel[]): TableModel[] {
  const ordered: TableModel[] = [];
  const placed = new Set<string>();
  const pending = [...tables];
  while (pending.length) {
    const ready = pending.findIndex((t) => t.foreignKeys.every((fk) => fk.parent === t.name || placed.has(fk.parent)));
    const [next] = pending.splice(ready === -1 ? 0 : ready, 1) as [TableModel];
    ordered.push(next);
    placed.add(next.name);
  }
  return ordered;
}

interface NamedRelation {
  child: TableModel;
  parent: TableModel;
  column: string;
  /** The parent's many() key: the related path segment `/<parent>/<id>/<name>`, and the relationName. */
  name: string;
}

/**
 * The single-column foreign keys whose related path needs a name: those of a table with others to the same
 * parent, and those whose default name (the child table's) is a field of the parent, which would stop the
 * service at start. Each is named `<child>By<column>`, a name no table and no field of the parent has.
 */
function namedRelations(tables: TableModel[], names: Names): NamedRelation[] {
  const byName = new Map(tables.map((t) => [t.name, t]));
  const segments = new Set(tables.map((t) => t.name));
  const named: NamedRelation[] = [];
  // Only a foreign key to the parent's primary key is a related path (docs/http-api.md#routes); one to another unique column is not.
  const toKey = (fk: ForeignKeyModel) => {
    const key = byName.get(fk.parent)?.key ?? [];
    return fk.to.length === key.length && fk.to.every((column, i) => column.toLowerCase() === key[i]?.toLowerCase());
  };
  for (const child of tables) {
    for (const fk of child.foreignKeys.filter(toKey)) {
      const siblings = child.foreignKeys.filter((other) => other.parent === fk.parent && toKey(other));
      const parentFields = new Set(names.fields.get(fk.parent)?.values());
      if (fk.from.length !== 1 || (siblings.length < 2 && !parentFields.has(child.name))) continue;
      const column = fk.from[0] as string;
      const name = uniqueName(`${child.name}By${column}`, new Set([...segments, ...parentFields]));
      segments.add(name);
      named.push({ child, parent: byName.get(fk.parent) as TableModel, column, name });
    }
  }
  return named;
}

/**
 * The first name drizzle-kit cannot keep, said as what it names: its snapshots hold tables, columns and indexes as
 * keys of plain objects, where `__proto__` sets the prototype instead of adding a key (the migration comes out malformed).
 */
function nameSnapshotsLose(model: DatabaseModel): string | undefined {
  const lost = '__proto__';
  for (const table of model.tables) {
    if (table.name === lost) return `the ${table.kind} "${lost}"`;
    if (table.columns.some((c) => c.name === lost)) return `the column "${lost}" of ${table.name}`;
    if (table.indexes.some((i) => i.name === lost)) return `the index "${lost}" on ${table.name}`;
  }
  return undefined;
}

export interface GeneratedSchema {
  source: string;
  exports: Map<string, string>;
  relations: NamedRelation[];
}

/** The drizzle schema module of a database model (unformatted TypeScript). */
export function toSchemaSource(model: DatabaseModel, origin: { file: string; date: string; columnsModule: string }): GeneratedSchema {
  const tables = declarationOrder(model.tables);
  const IMPORTS = ['sql', 'relations', 'AnySQLiteColumn', 'foreignKey', 'index', 'integer', 'numeric', 'primaryKey', 'real'];
  const names = nameAll(
    tables,
    new Set([
      ...IMPORTS,
      'sqliteTable',
      'sqliteView',
      'text',
      'unique',
      'uniqueIndex',
      'bytes',
      'dateText',
      'intKey',
      'booleanInteger',
      'untyped',
      'randomUUID',
    ]),
  );
  const relations = namedRelations(tables, names);
  const used = new Set<string>();
  const use = (name: string) => {
    used.add(name);
    return name;
  };
  const sqlText = (text: string) => {
    use('sql');
    return sqlTag(text);
  };
  const declared = new Set<string>();
  const exportOf = (table: string) => names.exports.get(table) as string;
  const fieldOf = (table: string, column: string) => names.fields.get(table)?.get(column) as string;

  const column = (table: TableModel, c: ColumnModel): string => {
    const builder = builderOf(c.declared, table.strict);
    const soleKey = table.key.length === 1 && table.key[0] === c.name;
    // integer() is declared INTEGER, which would make a key SQLite does not assign its rowid at the next table rebuild.
    // A SQLite BOOLEAN keeps its 0/1 integers (and any other value it holds) and takes true/false too: booleanInteger().
    // PostgreSQL's (c.boolean) is a true boolean, declared in boolean mode.
    const declaredAs =
      builder === 'integer' && soleKey && table.keyGiven
        ? 'intKey'
        : builder === 'integer' && !c.boolean && BOOLEAN.test(c.declared)
          ? 'booleanInteger'
          : builder;
    const length = builder === 'text' ? /\(\s*(\d+)\s*\)/.exec(c.declared)?.[1] : undefined;
    const options = length ? `, { length: ${length} }` : c.boolean ? ", { mode: 'boolean' }" : c.json ? ", { mode: 'json' }" : '';
    let out = `${fieldOf(table.name, c.name)}: ${use(declaredAs)}(${str(c.name)}${options})`;
    if (soleKey) out += `.primaryKey(${table.autoIncrement ? '{ autoIncrement: true }' : ''})`;
    if (c.notNull && !soleKey) out += '.notNull()';
    const given = c.generated ? undefined : defaultOf(c.default, builder);
    const value =
      c.boolean && given !== undefined
        ? String(given === '1')
        : c.json && given !== undefined
          ? jsonDefault(c.default as string, given)
          : given;
    if (value !== undefined) out += `.default(${value})`;
    if (value?.startsWith('sql`')) use('sql');
    if (c.madeUuid) out += `.$defaultFn(() => ${use('randomUUID')}())`;
    if (c.generated) out += `.generatedAlwaysAs(${sqlText(c.generated.expression)}, { mode: '${c.generated.mode}' })`;
    const unique = table.indexes.find((i) => i.origin === 'u' && i.columns.length === 1 && i.columns[0] === c.name && !i.where);
    if (unique) out += '.unique()';
    for (const fk of table.foreignKeys.filter((f) => f.from.length === 1 && f.from[0] === c.name)) {
      // Self and forward references need the column type spelled out, or TypeScript finds the table's type circular.
      const lazy = fk.parent === table.name || !declared.has(fk.parent) ? `(): ${use('AnySQLiteColumn')} =>` : '() =>';
      const actions = [
        ACTIONS.has(fk.onDelete) ? `onDelete: '${fk.onDelete}'` : '',
        ACTIONS.has(fk.onUpdate) ? `onUpdate: '${fk.onUpdate}'` : '',
      ].filter(Boolean);
      const target = `${exportOf(fk.parent)}.${fieldOf(fk.parent, fk.to[0] as string)}`;
      out += `.references(${lazy} ${target}${actions.length ? `, { ${actions.join(', ')} }` : ''})`;
    }
    return out;
  };

  const extras = (table: TableModel): string[] => {
    const t = (c: string) => `t.${fieldOf(table.name, c)}`;
    const out: string[] = [];
    if (table.key.length > 1) out.push(`${use('primaryKey')}({ columns: [${table.key.map(t).join(', ')}] })`);
    for (const index of table.indexes) {
      if (index.origin === 'u' && index.columns.length === 1 && !index.where) continue;
      const on = `.on(${index.columns.map(t).join(', ')})${index.where ? `.where(${sqlText(index.where)})` : ''}`;
      if (index.origin === 'u') out.push(`${use('unique')}()${on}`);
      else out.push(`${use(index.unique ? 'uniqueIndex' : 'index')}(${str(index.name)})${on}`);
    }
    for (const fk of table.foreignKeys.filter((f) => f.from.length > 1)) {
      const parent = fk.parent === table.name ? 't' : exportOf(fk.parent);
      const foreign = fk.to.map((c) => `${parent}.${fieldOf(fk.parent, c)}`).join(', ');
      let line = `${use('foreignKey')}({ columns: [${fk.from.map(t).join(', ')}], foreignColumns: [${foreign}] })`;
      if (ACTIONS.has(fk.onDelete)) line += `.onDelete('${fk.onDelete}')`;
      if (ACTIONS.has(fk.onUpdate)) line += `.onUpdate('${fk.onUpdate}')`;
      out.push(line);
    }
    return out;
  };

  const declarations = tables.map((table) => {
    const comments = [
      ...(table.kind === 'view' ? ['A view: served read-only.'] : []),
      ...(table.kind === 'table' && table.key.length === 0 ? ['No primary key: served read-only.'] : []),
      ...(table.withoutRowid
        ? ['WITHOUT ROWID in the database (drizzle cannot declare it; a migration that rebuilds this table drops it).']
        : []),
      ...(table.strict ? ['STRICT in the database (drizzle cannot declare it; a migration that rebuilds this table drops it).'] : []),
      ...table.notes,
    ].map((line) => `// ${line}\n`);
    const fields = table.columns.map((c) => `  ${column(table, c)},\n`).join('');
    declared.add(table.name);
    if (table.kind === 'view') {
      return `${comments.join('')}export const ${exportOf(table.name)} = ${use('sqliteView')}(${str(table.name)}, {\n${fields}}).as(${sqlText(table.select ?? '')});\n`;
    }
    const extra = extras(table);
    const tail = extra.length ? `, (t) => [${extra.join(', ')}]` : '';
    return `${comments.join('')}export const ${exportOf(table.name)} = ${use('sqliteTable')}(${str(table.name)}, {\n${fields}}${tail});\n`;
  });

  // One relations() per table, holding both sides of each named foreign key.
  const sides = new Map<string, { one: string[]; many: string[] }>();
  const sideOf = (table: string) =>
    sides.get(table) ?? (sides.set(table, { one: [], many: [] }).get(table) as { one: string[]; many: string[] });
  const oneKeys = new Map<string, Set<string>>();
  for (const { child, parent, column: col, name } of relations) {
    const childExport = exportOf(child.name);
    const field = fieldOf(child.name, col);
    const keys = oneKeys.get(child.name) ?? new Set(names.fields.get(child.name)?.values());
    oneKeys.set(child.name, keys);
    const stripped = field.replace(/Id$/, '');
    const key = uniqueName(
      stripped && !keys.has(stripped) ? stripped : `${field}${exportOf(parent.name).replace(/^./, (c) => c.toUpperCase())}`,
      keys,
    );
    const references = `${exportOf(parent.name)}.${fieldOf(parent.name, parent.key[0] as string)}`;
    sideOf(parent.name).many.push(`${objectKey(name)}: many(${childExport}, { relationName: ${str(name)} })`);
    sideOf(child.name).one.push(
      `${key}: one(${exportOf(parent.name)}, { fields: [${childExport}.${field}], references: [${references}], relationName: ${str(name)} })`,
    );
  }
  // A lone foreign key whose default to-one name (its field without `Id`) is also a field (`status` beside
  // `statusId`) would stop the registry at start: its one() gets another name.
  for (const child of tables) {
    for (const fk of child.foreignKeys) {
      const column = fk.from[0] as string;
      const parent = tables.find((t) => t.name === fk.parent);
      if (fk.from.length !== 1 || !parent || parent.key.length !== 1 || relations.some((r) => r.child === child && r.column === column))
        continue;
      const field = fieldOf(child.name, column);
      const fieldKeys = new Set(names.fields.get(child.name)?.values());
      const toOne = /^(.+?)_?I[dD]$/.exec(field)?.[1];
      if (!toOne || !fieldKeys.has(toOne)) continue;
      const keys = oneKeys.get(child.name) ?? fieldKeys;
      oneKeys.set(child.name, keys);
      const key = uniqueName(`${field}${exportOf(parent.name).replace(/^./, (c) => c.toUpperCase())}`, keys);
      const references = `${exportOf(parent.name)}.${fieldOf(parent.name, parent.key[0] as string)}`;
      sideOf(child.name).one.push(
        `${key}: one(${exportOf(parent.name)}, { fields: [${exportOf(child.name)}.${field}], references: [${references}] })`,
      );
    }
  }
  const relationDeclarations = [...sides].map(([table, { one, many }]) => {
    const helpers = [one.length ? 'one' : '', many.length ? 'many' : ''].filter(Boolean).join(', ');
    const name = uniqueName(`${exportOf(table)}Relations`, new Set([...names.exports.values(), ...IMPORTS]));
    return `export const ${name} = ${use('relations')}(${exportOf(table)}, ({ ${helpers} }) => ({\n${[...many, ...one].map((e) => `  ${e},\n`).join('')}}));\n`;
  });

  const core = [
    'AnySQLiteColumn',
    'foreignKey',
    'index',
    'integer',
    'numeric',
    'primaryKey',
    'real',
    'sqliteTable',
    'sqliteView',
    'text',
    'unique',
    'uniqueIndex',
  ].filter((n) => used.has(n));
  const orm = ['relations', 'sql'].filter((n) => used.has(n));
  const custom = ['booleanInteger', 'bytes', 'dateText', 'intKey', 'untyped'].filter((n) => used.has(n));
  const header = [
    `// Generated by \`npm run introspect\` from ${origin.file} on ${origin.date}; edit it like any schema (then \`npm run db:generate\`).`,
    '// Every table and view is a resource kind; views and tables without a primary key are served read-only.',
  ];
  const importLines = [
    used.has('randomUUID') ? "import { randomUUID } from 'node:crypto';" : '',
    orm.length ? `import { ${orm.join(', ')} } from 'drizzle-orm';` : '',
    core.length
      ? `import { ${core.map((n) => (n === 'AnySQLiteColumn' ? 'type AnySQLiteColumn' : n)).join(', ')} } from 'drizzle-orm/sqlite-core';`
      : '',
    custom.length ? `import { ${custom.join(', ')} } from '${origin.columnsModule}';` : '',
  ].filter(Boolean);
  const source = `${header.join('\n')}\n${importLines.join('\n')}\n\n${[...declarations, ...relationDeclarations].join('\n')}`;
  return { source, exports: names.exports, relations };
}

/** Formats with Biome (the project's formatter and import order) when it is installed; the source unchanged otherwise. */
function formatted(source: string): string {
  let biome: string;
  try {
    biome = join(dirname(createRequire(import.meta.url).resolve('@biomejs/biome/package.json')), 'bin', 'biome');
  } catch {
    return source;
  }
  // A path inside the project, so biome.json applies; the file itself is read from stdin.
  const args = [biome, 'check', '--write', '--stdin-file-path=src/db/schema.ts'];
  const run = spawnSync(process.execPath, args, { cwd: ROOT, input: source, encoding: 'utf8' });
  return run.status === 0 && run.stdout.trim() ? run.stdout : source;
}

// ---------------------------------------------------------------------------------------------
// Migrations.

/** Writes drizzle-kit's folder: `<tag>.sql` per migration, meta/NNNN_snapshot.json, meta/_journal.json. */
function writeMigrations(folder: string, migrations: { tag: string; snapshot: DrizzleSQLiteSnapshotJSON; statements: string[] }[]) {
  mkdirSync(join(folder, 'meta'), { recursive: true });
  const now = Date.now();
  const entries: JournalEntry[] = migrations.map(({ tag, snapshot, statements }, idx) => {
    writeFileSync(join(folder, 'meta', `${String(idx).padStart(4, '0')}_snapshot.json`), JSON.stringify(snapshot, null, 2));
    writeFileSync(join(folder, `${tag}.sql`), statements.join(BREAKPOINT));
    return { idx, version: snapshot.version, when: now + idx, tag, breakpoints: true };
  });
  writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ version: '7', dialect: 'sqlite', entries }, null, 2));
}

/** Records the first migration of `folder` as applied, as src/engine/sqlite/migrate.ts records one it ran. */
function recordBaseline(sqlite: Database.Database, folder: string): void {
  const [baseline] = readMigrationFiles({ migrationsFolder: folder });
  if (!baseline) throw new UsageError(`${folder} holds no migration to record`);
  try {
    sqlite
      .transaction(() => {
        sqlite.exec(`CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
        sqlite.prepare(`INSERT INTO "${MIGRATIONS_TABLE}" ("hash", "created_at") VALUES (?, ?)`).run(baseline.hash, baseline.folderMillis);
      })
      .immediate();
  } catch (error) {
    throw new UsageError(`cannot record the baseline in ${MIGRATIONS_TABLE}: ${(error as Error).message}`);
  }
}

/**
 * Where the new files are written until all of them are: the schema module beside its place (so that its imports
 * resolve as they will there), the migrations in a temporary folder. Nothing of the project changes before install().
 */
interface Staged {
  schema: string;
  out: string;
  /** The first folder made for the schema module, if its folder did not exist. */
  made?: string;
}

function stage(schemaPath: string): Staged {
  const made = mkdirSync(dirname(schemaPath), { recursive: true });
  const schema = join(dirname(schemaPath), `.introspect-${process.pid}-${basename(schemaPath)}`);
  return { schema, out: mkdtempSync(join(tmpdir(), 'restable-introspect-')), made };
}

/**
 * Puts the staged files in place: the schema module, and the migrations folder's own files. The old ones describe
 * another schema: its .sql files, meta/, search.json and pg/ go (anything else in the folder stays).
 */
function install(staged: Staged, schemaPath: string, out: string): void {
  renameSync(staged.schema, schemaPath);
  if (existsSync(out)) {
    for (const entry of readdirSync(out, { withFileTypes: true })) {
      if (entry.isFile() && (entry.name.endsWith('.sql') || entry.name === 'search.json')) rmSync(join(out, entry.name));
    }
    for (const folder of ['meta', 'pg']) rmSync(join(out, folder), { recursive: true, force: true });
  }
  cpSync(staged.out, out, { recursive: true });
}

/** Removes what is left of the staged files, and the schema's folder when it was made for files never installed. */
function unstage(staged: Staged, installed: boolean): void {
  rmSync(staged.schema, { force: true });
  rmSync(staged.out, { recursive: true, force: true });
  if (staged.made && !installed) rmSync(staged.made, { recursive: true, force: true });
}

function recordedMigrations(sqlite: Database.Database): number {
  const exists = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(MIGRATIONS_TABLE);
  return exists ? (sqlite.prepare(`SELECT count(*) FROM "${MIGRATIONS_TABLE}"`).pluck().get() as number) : 0;
}

// ---------------------------------------------------------------------------------------------

export interface IntrospectOptions {
  /** The SQLite file to introspect; or `url`, a PostgreSQL database. */
  file?: string;
  url?: string;
  schema?: string;
  out?: string;
  force?: boolean;
  /** Prints the report (one line each); console.log by default. */
  log?: (line: string) => void;
}

/** A path as the project's scripts see it: relative to the project folder (where npm runs them), or absolute outside it. */
const shown = (path: string) => {
  const inside = relative(ROOT, path);
  return inside.startsWith('..') || isAbsolute(inside) ? path : inside || '.';
};

/**
 * Generates the schema module and the migrations from an existing SQLite file, and records the
 * baseline as applied in it. Changes no row of it.
 * @throws {UsageError} when it refuses (the schema exists without `force`, the file is not a database)
 */
export async function introspect(options: IntrospectOptions): Promise<void> {
  const log = options.log ?? console.log;
  // npm runs scripts in the project folder; paths given on its command line are the user's, from where npm was started.
  const base = process.env.INIT_CWD ?? process.cwd();
  const { url } = options;
  const file = url ? undefined : resolve(base, options.file ?? '');
  const source = url ? redactUrl(url) : (options.file as string);
  const schemaPath = resolve(base, options.schema ?? DEFAULTS.schema);
  const out = resolve(base, options.out ?? DEFAULTS.out);
  if (file && !existsSync(file)) throw new UsageError(`${options.file}: no such file`);
  if (file && !statSync(file).isFile()) throw new UsageError(`${options.file}: not a file (a SQLite database is one file)`);
  // The module imports drizzle-orm, and is loaded to make the migrations: refused before anything is written where that import cannot resolve.
  try {
    createRequire(schemaPath).resolve('drizzle-orm');
  } catch {
    throw new UsageError(
      `--schema ${options.schema}: drizzle-orm cannot be imported from ${dirname(schemaPath)}; put the schema inside the project (where node_modules is)`,
    );
  }
  if (existsSync(schemaPath) && !options.force) {
    throw new UsageError(
      `${shown(schemaPath)} exists; run again with --force to overwrite it and replace the SQLite migrations in ${shown(out)}/`,
    );
  }

  let model: DatabaseModel;
  let recorded: number;
  const postgres = url ? await connectPostgres(url) : undefined;
  try {
    if (postgres) {
      model = await readPgDatabase(postgres);
      recorded = await pgRecordedMigrations(postgres);
    } else {
      const reader = new Database(file as string, { readonly: true, fileMustExist: true });
      try {
        model = readDatabase(reader);
        recorded = recordedMigrations(reader);
      } catch (error) {
        throw new UsageError(`${options.file} cannot be read as a SQLite database: ${(error as Error).message}`);
      } finally {
        reader.close();
      }
    }
  } catch (error) {
    await postgres?.end();
    throw error;
  }
  try {
    await generate();
  } finally {
    await postgres?.end();
  }

  async function generate() {
    if (recorded > 0) {
      throw new UsageError(
        `${source} already records ${recorded} migration(s) in ${postgres ? 'drizzle.' : ''}${MIGRATIONS_TABLE}: it is managed by migrations already (serve it with its own)`,
      );
    }
    // Tables named like restable's own in a file restable never migrated are someone else's: the first start would make its own.
    // Said first: when they are all the file holds, "no table to serve" would not say why.
    if (model.own.length > 0) {
      throw new UsageError(
        `${source} has tables named like restable's own (${model.own.join(', ')}), which restable did not make: rename them first`,
      );
    }
    if (model.tables.length === 0) throw new UsageError(`${source} has no table or view to serve`);
    const lost = nameSnapshotsLose(model);
    if (lost)
      throw new UsageError(`${source}: ${lost} cannot be declared: drizzle-kit's migration snapshots lose that name; rename it first`);

    const columnsModule = relative(dirname(schemaPath), join(ROOT, 'src/db/columns.js')).replace(/\\/g, '/');
    const generated = toSchemaSource(model, {
      file: file ? shown(file) : source,
      date: new Date().toISOString().slice(0, 10),
      columnsModule: columnsModule.startsWith('.') ? columnsModule : `./${columnsModule}`,
    });
    const pgFolder = join(out, 'pg');
    let pg: string;
    const staged = stage(schemaPath);
    let installed = false;
    try {
      writeFileSync(staged.schema, formatted(generated.source));
      const schema = { ...(await import(`${pathToFileURL(staged.schema).href}?t=${Date.now()}`)) } as Record<string, unknown>;
      // What the service would refuse at start (a table named like a service path): refused now, before the
      // baseline is recorded in the file, which would leave it managed by migrations that cannot be served.
      try {
        createRegistry(schema);
      } catch (error) {
        if (error instanceof RegistryError)
          throw new UsageError(
            `${source}: ${error.message.replace(/rename the table$/, 'rename the table in the database, then introspect again')}`,
          );
        throw error;
      }

      // The baseline is the database as it is; restable's own tables come after it and run at first start.
      const baseline = await generateSQLiteDrizzleJson(schema);
      const empty = await generateSQLiteDrizzleJson({});
      const full = await generateSQLiteDrizzleJson({ ...schema, ...internal }, baseline.id);
      writeMigrations(staged.out, [
        { tag: '0000_baseline', snapshot: baseline, statements: await generateSQLiteMigration(empty, baseline) },
        { tag: '0001_restable_tables', snapshot: full, statements: await generateSQLiteMigration(baseline, full) },
      ]);
      const stagedPg = join(staged.out, 'pg');
      if (postgres) {
        // On PostgreSQL the baseline is PostgreSQL's: recorded there, never run; restable's tables follow it.
        await generatePgMigration(schema, stagedPg, 'baseline', false);
        await generatePgMigration(schema, stagedPg, 'restable_tables');
        pg = `${shown(pgFolder)}: 0000_baseline (recorded as applied in ${source}, not run), 0001_restable_tables (applied at first start)`;
      } else {
        // PostgreSQL's migrations come from the same schema (src/cli/generate.ts), or are said to be impossible.
        try {
          const { tag } = await generatePgMigration(schema, stagedPg, 'baseline');
          pg = `${shown(join(pgFolder, `${tag}.sql`))} (creates the schema on an empty PostgreSQL database)`;
        } catch (error) {
          rmSync(stagedPg, { recursive: true, force: true });
          pg = `none: this schema cannot be converted to PostgreSQL (${(error as Error).message.split('\n')[0]}); SQLite serves it`;
        }
      }

      // The database's one write comes once every file is ready, and the files take their places after it.
      if (postgres) await recordPgBaseline(postgres, stagedPg);
      else {
        const writer = new Database(file as string, { fileMustExist: true });
        try {
          recordBaseline(writer, staged.out);
        } finally {
          writer.close();
        }
      }
      install(staged, schemaPath, out);
      installed = true;
    } finally {
      unstage(staged, installed);
    }

    const tables = model.tables.filter((t) => t.kind === 'table');
    const views = model.tables.filter((t) => t.kind === 'view');
    const list = (items: string[]) => (items.length ? items.join(', ') : 'none');
    log(`introspected ${source}: wrote ${shown(schemaPath)}`);
    log(`  tables (${tables.length}): ${list(tables.map((t) => t.name))}`);
    log(`  views (${views.length}, read-only): ${list(views.map((t) => t.name))}`);
    log(`  without a primary key (read-only): ${list(tables.filter((t) => t.key.length === 0).map((t) => t.name))}`);
    log(`  composite keys: ${list(tables.filter((t) => t.key.length > 1).map((t) => `${t.name}(${t.key.join(', ')})`))}`);
    log(`  related paths named: ${list(generated.relations.map((r) => `/${r.parent.name}/{id}/${r.name} (${r.child.name}.${r.column})`))}`);
    for (const skipped of model.skipped) log(`  left out: ${skipped}`);
    for (const table of model.tables) for (const note of table.notes) log(`  note: ${table.name}: ${note}`);
    log(
      `  SQLite migrations in ${shown(out)}: 0000_baseline (${file ? `recorded as applied in ${source}, not run` : 'for a new SQLite file'}),`,
    );
    log('    0001_restable_tables (restable_idempotency_keys, restable_secrets: applied at first start)');
    log(`  PostgreSQL migrations: ${pg}`);
    log(`next: ${file ? `DATABASE_PATH=${shown(file)}` : "DATABASE_URL='<the same url>'"} npm start`);
  }
}

/** One connection to the database to introspect. */
async function connectPostgres(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'restable-introspect' });
  try {
    await client.connect();
  } catch (error) {
    throw new UsageError(`cannot connect to ${redactUrl(url)}: ${(error as Error).message}`);
  }
  return client;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { force: { type: 'boolean', default: false }, schema: { type: 'string' }, out: { type: 'string' }, url: { type: 'string' } },
  });
  if (positionals.length !== (values.url ? 0 : 1)) {
    throw new UsageError(
      'usage: npm run introspect -- (<sqlite file> | --url <postgres url>) [--force] [--schema <path>] [--out <folder>]',
    );
  }
  if (values.url && !/^postgres(ql)?:\/\/./.test(values.url)) throw new UsageError('--url must be a postgres:// URL');
  await introspect({ file: positionals[0], url: values.url, force: values.force, schema: values.schema, out: values.out });
  return 0;
}

await runAsCommand(import.meta.url, 'introspect', main);

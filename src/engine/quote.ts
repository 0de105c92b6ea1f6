// Names and text quoted for SQL spelled as text (DDL, triggers, a copy's statements), the same in
// SQLite and PostgreSQL: every other statement is built by drizzle with parameters.

/** A table, column or trigger name as a quoted identifier. */
export const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
/** A string as a literal. */
export const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

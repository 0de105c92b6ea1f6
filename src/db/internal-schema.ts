// Tables the service keeps for itself; they are migrated like the resource tables but are never
// served as resources (the registry reads only schema.ts).
import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/** The first successful response to each Idempotency-Key, replayed on retries for 24 hours. */
export const idempotencyKeys = sqliteTable(
  'restable_idempotency_keys',
  {
    key: text('key').primaryKey(),
    /** Hash of method, path and canonical body: a retry must match it. */
    fingerprint: text('fingerprint').notNull(),
    status: integer('status').notNull(),
    /** JSON object of the headers to replay (Location, ETag). */
    headers: text('headers').notNull(),
    body: text('body').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('restable_idempotency_keys_created_at_idx').on(t.createdAt)],
);

/**
 * Secrets the service makes for itself, generated once and shared by every process serving the
 * database (the key that signs paging cursors, unless CURSOR_SECRET configures one).
 */
export const secrets = sqliteTable('restable_secrets', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

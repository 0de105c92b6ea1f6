// The resource kinds this service serves: drizzle tables only, the one file to edit to add one.
// Every table becomes /<table>, /<table>/<id>, and /<parent>/<id>/<table> per foreign key.
import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import { searchable } from './search.js';

const now = () => new Date().toISOString();

/** Server-managed timestamps (ISO 8601, UTC); clients can read them but never set them. */
const timestamps = {
  createdAt: text('created_at').notNull().$defaultFn(now),
  updatedAt: text('updated_at').notNull().$defaultFn(now).$onUpdateFn(now),
};

export const users = sqliteTable('users', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  name: text('name').notNull(),
  email: text('email').notNull().unique(),
  ...timestamps,
});

/** `q=` searches users by name (an FTS5 index on SQLite, tsvector on PostgreSQL: see docs/search.md). */
export const usersSearch = searchable(users, ['name']);

export const pets = sqliteTable(
  'pets',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    name: text('name').notNull(),
    species: text('species', { enum: ['cat', 'dog', 'bird', 'fish', 'other'] }).notNull(),
    ownerId: integer('owner_id').references(() => users.id, { onDelete: 'set null' }),
    ...timestamps,
  },
  (t) => [index('pets_owner_id_idx').on(t.ownerId)],
);

/** `q=` searches pets by name. */
export const petsSearch = searchable(pets, ['name']);

export const orders = sqliteTable(
  'orders',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'restrict' }),
    petId: integer('pet_id')
      .notNull()
      .references(() => pets.id, { onDelete: 'restrict' }),
    status: text('status', { enum: ['placed', 'approved', 'delivered'] })
      .notNull()
      .default('placed'),
    quantity: integer('quantity').notNull().default(1),
    ...timestamps,
  },
  (t) => [index('orders_user_id_idx').on(t.userId), index('orders_pet_id_idx').on(t.petId)],
);

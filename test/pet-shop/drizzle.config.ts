// drizzle-kit settings for the tests' pet shop: `npm run db:generate:test -- --name <what_changed>`
// writes test/pet-shop/migrations/ from the copy and the service's internal tables.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: ['./test/pet-shop/schema.ts', './src/db/internal-schema.ts'],
  out: './test/pet-shop/migrations',
});

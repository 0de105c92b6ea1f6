// drizzle-kit settings: `npm run db:generate` writes a migration for each change to the schema.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: ['./src/db/schema.ts', './src/db/internal-schema.ts'],
  out: './migrations',
  dbCredentials: { url: process.env.DATABASE_PATH ?? 'data/app.db' },
});

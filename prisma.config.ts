import { defineConfig } from 'prisma/config';

// Used by `prisma generate` only; migrations run through src/core/migrate.ts (no native engine offline).
export default defineConfig({
  schema: 'prisma/schema.prisma',
});

// `npm run test:unit`: the tests that need no PostgreSQL, Redis or other service (test/unit/).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
  },
});

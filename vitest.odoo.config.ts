// `npm run test:odoo`: the real-Odoo suite (test-odoo/), against the sources named by ODOO_SOURCE.
// One file at a time: each installs and runs Odoo on this machine (through the tests' sshd), and
// they share its `odoo` user, its OS packages and its CPU.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test-odoo/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 20 * 60_000,
    hookTimeout: 5 * 60_000,
  },
});

// `npm run test:odoo`: the real-Odoo suite (test-odoo/), against the sources named by ODOO_SOURCE.
// Two files at a time: each installs and runs its own Odoo services on this machine (through the
// tests' sshd) on ports, a base path and databases of its own; they share the `odoo` user and the OS
// packages (setup_odoo installs only what is missing, waiting for apt's lock). Much of a file's time
// is Odoo starting and installing modules, so two side by side finish well before one after the other.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test-odoo/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20 * 60_000,
    hookTimeout: 5 * 60_000,
  },
});

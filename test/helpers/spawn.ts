// Runs the service's own entry points as child processes, as a user would.
import { spawnSync } from 'node:child_process';

// Vite/Vitest put these into process.env (BASE_URL=/ would be read as the service's BASE_URL).
const VITEST_ENV = ['BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR'];

export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of VITEST_ENV) delete env[name];
  return { ...env, ...extra };
}

/** `tsx <entry> ...args`, synchronously; returns status, stdout and stderr. */
export function runEntry(entry: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], {
    env: childEnv(env),
    encoding: 'utf8',
    timeout: 60_000,
  });
}

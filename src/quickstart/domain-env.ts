// --domain <name>: the tenants' addresses become https://<database>.<name>, SUBSCRIPTION_URL written
// in .env (the one place for host names), so `npm start` and every later command read it too.
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type Config, environment, loadConfig } from '../core/config.js';
import { QuickstartError } from './quickstart-errors.js';

export const subscriptionUrlOf = (domain: string) => `https://{database_name}.${domain}`;

/**
 * Writes SUBSCRIPTION_URL for `domain` into `<dir>/.env` when it differs; answers the configuration
 * read again (from `env`, the process's environment unless given, over that file).
 */
export async function applyDomain(
  config: Config,
  domain: string,
  print: (line: string) => void,
  dir = process.cwd(),
  env?: NodeJS.ProcessEnv,
): Promise<Config> {
  const want = subscriptionUrlOf(domain);
  if (config.SUBSCRIPTION_URL === want) return config;
  const file = path.join(dir, '.env');
  const before = existsSync(file) ? await readFile(file, 'utf8') : '';
  const line = `SUBSCRIPTION_URL=${want}`;
  const after = /^SUBSCRIPTION_URL=.*$/m.test(before)
    ? before.replace(/^SUBSCRIPTION_URL=.*$/m, line)
    : `${before}${before === '' || before.endsWith('\n') ? '' : '\n'}${line}\n`;
  await writeFile(file, after);
  const reread = loadConfig(environment(dir, env));
  if (reread.SUBSCRIPTION_URL !== want) {
    throw new QuickstartError(
      `SUBSCRIPTION_URL is set in the environment (${reread.SUBSCRIPTION_URL}), which wins over .env: unset it, or set it to ${want}`,
    );
  }
  print(`SUBSCRIPTION_URL=${want} written in ${file} (--domain)`);
  return reread;
}

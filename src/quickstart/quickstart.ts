// `npm run cli -- quickstart`: this machine becomes svc's first Odoo host, from the prerequisites
// checked (nothing changed when one is missing) to a trial form that deploys at once. Every record
// goes through the API (api-session.ts); run again, it finds each record by its name or address,
// checks it and changes only what is not right.
import pino from 'pino';
import type { Config } from '../core/config.js';
import { loggerOptions } from '../core/logger.js';
import { applyMigrations } from '../core/migrate.js';
import type { ApiSession } from './api-session.js';
import { applyDomain } from './domain-env.js';
import { authorize, ensureMachineKey, isAuthorized, localUser } from './machine-key.js';
import { convergePostgresServer, convergeRootServer } from './machine-steps.js';
import {
  awaitStandby,
  convergeOdoo,
  convergeProxy,
  convergeTemplate,
  convergeTrialPackage,
  convergeVersion,
  TRIAL_URL_STRING,
} from './odoo-steps.js';
import { missingPrerequisites } from './prerequisites.js';
import type { QuickstartOptions } from './quickstart-options.js';
import { MissingPrerequisites, QuickstartError } from './quickstart-errors.js';

type Print = (line: string) => void;

export interface QuickstartOutcome {
  trialUrl: string;
  operatorEmail: string;
  operatorToken: string;
}

/** The operator quickstart prints a token of (a new one each run: tokens are shown once). */
async function operatorToken(api: ApiSession, email: string, print: Print): Promise<string> {
  const users = await api.call<{ items: { id: number; email: string; group: string; active: boolean }[] }>(
    'GET',
    `/api/v1/users?q=${encodeURIComponent(email)}&limit=100`,
  );
  let user = users.items.find((u) => u.email === email);
  if (!user) {
    user = await api.call('POST', '/api/v1/users', { email, name: 'Operator', group: 'operator' });
    print(`operator ${email} (user ${user!.id}): created`);
  } else if (!user.active || (user.group !== 'operator' && user.group !== 'administrator')) {
    throw new QuickstartError(`user ${email} (user ${user.id}) is not an active operator: change it (PATCH /api/v1/users/${user.id})`);
  }
  const made = await api.call<{ token: string }>('POST', '/api/v1/api-tokens', { user_id: user!.id, name: 'quickstart' });
  return made.token;
}

export async function runQuickstart(given: Config, o: QuickstartOptions, print: Print): Promise<QuickstartOutcome> {
  let config = given;
  // The login user's own authorized_keys unless --authorized-keys names another file.
  const user = await localUser(o.ssh.user);
  const keysFile = o.ssh.authorizedKeys ?? `${user?.home ?? `/home/${o.ssh.user}`}/.ssh/authorized_keys`;
  const key = await ensureMachineKey(config.SVC_MASTER_KEY_FILE);
  const missing = await missingPrerequisites(config, o, key, keysFile);
  if (missing.length > 0) throw new MissingPrerequisites(missing);

  if (!(await isAuthorized(keysFile, key))) {
    await authorize(keysFile, key, user!);
    print(`svc's SSH key (${key.file}.pub) added to ${keysFile} (--trust-this-machine)`);
  } else {
    print(`svc's SSH key is in ${keysFile}`);
  }

  if (o.domain) config = await applyDomain(config, o.domain, print);
  const applied = await applyMigrations(config.DATABASE_URL);
  if (applied.length > 0) print(`svc's database: ${applied.length} migrations applied`);
  // Quickstart speaks for itself: the service's log says only warnings here.
  const log = pino(loggerOptions(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL));
  // Loaded only now: the app and every feature take seconds to load, and a refusal needs none of them.
  const { createContext } = await import('../context.js');
  const { openApiSession } = await import('./api-session.js');
  const ctx = await createContext(config, log);
  const api = await openApiSession(ctx, o.adminEmail, print);
  try {
    const host = await convergeRootServer(api, o, key, print);
    const pgServer = await convergePostgresServer(api, config.DATABASE_URL, print);
    const version = await convergeVersion(api, o, print);
    const odooHost = await convergeOdoo(api, host, version, pgServer, print);
    await convergeProxy(api, odooHost, print);
    const svcDatabase = decodeURIComponent(new URL(config.DATABASE_URL).pathname.slice(1)) || 'svc';
    const template = await convergeTemplate(api, o, svcDatabase, odooHost, pgServer, print);
    const pkg = await convergeTrialPackage(api, o, template, print);
    await awaitStandby(api, pkg, print);
    const token = await operatorToken(api, o.operatorEmail, print);
    return { trialUrl: `${config.BASE_URL}/saas/trial/${TRIAL_URL_STRING}`, operatorEmail: o.operatorEmail, operatorToken: token };
  } finally {
    await api.close();
    await ctx.close();
  }
}

// What the steps of a subscription's deployment share (subscription-deployment.ts runs them): the
// run under way, what the instance is made from, and one step as the job's progress and an
// action-log row of its own.
import type { AppContext } from '../context.js';
import { runLoggedStep } from '../core/action-log.js';
import type { Author } from '../core/chatter.js';
import { UserError } from '../core/errors.js';
import type { Subscription } from '../generated/prisma/client.js';
import { serverWhere } from '../instances/index.js';
import { assertTemplateHasPackages } from '../odoo/index.js';
import { type actorFields, onSubscription } from './subscription-audit.js';
import type { Made } from './subscription-deployment-cleanup.js';
import { subscriptionUrl } from './subscription-service.js';

export type DeploymentStep =
  | 'connecting'
  | 'removing_leftovers'
  | 'placing'
  | 'taking_standby'
  | 'creating_database'
  | 'tenant_role'
  | 'identity'
  | 'customer_login'
  | 'package_limits'
  | 'filestore'
  | 'signing_in'
  | 'recording'
  | 'trial_ready_mail'
  | 'ready_mail'
  | 'done';

export type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'mailer' | 'config' | 'log' | 'queues'>;

/** One deployment under way: what its steps share. */
export interface Run {
  ctx: Ctx;
  /** The subscription as claimed (deploying, its database_name set). */
  sub: Subscription;
  databaseName: string;
  author: Author | null;
  audit: ReturnType<typeof actorFields>;
  report: (progress: { step: DeploymentStep }) => Promise<unknown>;
  made: Made;
  /** A failure outside any step gets an action-log row of its own. */
  stepsStarted: number;
}

/** What the instance is made from, and for whom. */
export type Source = Awaited<ReturnType<typeof sourceOf>>;

/** The template with its PostgreSQL server and Odoo host, the customer, and the instance's address. */
export async function sourceOf(ctx: Ctx, sub: Subscription) {
  const template = sub.database_template_id
    ? await ctx.db.databaseTemplate.findUnique({
        where: { id: sub.database_template_id },
        include: { postgresql_server: true, root_server: true },
      })
    : null;
  if (!template) throw new UserError('The subscription has no database template to deploy from');
  // Packages are apps: a template known to lack the subscription's modules deploys nothing (nor do its standbys).
  assertTemplateHasPackages(template, sub.packages);
  const server = template.postgresql_server;
  const partner = await ctx.db.partner.findUniqueOrThrow({ where: { id: sub.partner_id } });
  const url = subscriptionUrl(ctx.config, { database_name: sub.database_name, database_dropped_at: null })!;
  return { template, server, root: template.root_server, where: serverWhere(server), partner, url };
}

/** One step: the job's progress, an action-log row written before it starts, its outcome. */
export async function step<T>(run: Run, name: DeploymentStep, input: string, work: () => Promise<T>, output?: (r: T) => string) {
  run.stepsStarted++;
  await run.report({ step: name });
  const entry = { ...onSubscription(run.sub.id), action_type: 'deployment' as const, operation: 'deploy', input_text: input, ...run.audit };
  return runLoggedStep(run.ctx.db, entry, work, output);
}

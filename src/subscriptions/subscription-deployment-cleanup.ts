// What a deployment made, removed again when it fails, so deploy again starts clean. What a dead
// worker made is removed by the next attempt: the database's identity is recorded the moment it
// exists, and a subscription that has one but never ran holds a leftover.
import type { AppContext } from '../context.js';
import type { PostgresqlServer, RootServer, Subscription } from '../generated/prisma/client.js';
import {
  createFilestores,
  dropMadeDatabase,
  LONG_STATEMENT_TIMEOUT,
  onServer,
  removeTenantCredentials,
  type MadeDatabase,
} from '../instances/index.js';
import { runLoggedStep } from '../core/action-log.js';
import { onSubscription, type actorFields } from './subscription-audit.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Audit = ReturnType<typeof actorFields>;

/** What a deployment made so far. */
export interface Made {
  database: MadeDatabase | null;
  filestoreOn: RootServer | null;
  /** The Odoo host its role's credentials file was written on. */
  credentialsOn: RootServer | null;
}

/** The database an earlier attempt made (its identity recorded, never running), or null. */
export function leftoverOf(sub: Subscription): MadeDatabase | null {
  if (sub.database_oid === null || !sub.database_system_identifier) return null;
  return { name: sub.database_name!, systemIdentifier: sub.database_system_identifier, oid: sub.database_oid };
}

const dropMade = (ctx: Ctx, server: PostgresqlServer, database: MadeDatabase) =>
  onServer(ctx.secretBox, server, (query) => dropMadeDatabase(query, database), { timeout: LONG_STATEMENT_TIMEOUT });

/** The recorded identity (and its role: dropped with it) is no longer the subscription's database. */
export const forgetDatabase = (ctx: Ctx, subscriptionId: number) =>
  ctx.db.subscription.update({
    where: { id: subscriptionId },
    data: { database_system_identifier: null, database_oid: null, database_role: null, database_role_password: null },
  });

/** Removes an earlier attempt's database and the filestore of that name on the template's Odoo host. */
export async function removeLeftovers(
  ctx: Ctx,
  on: { server: PostgresqlServer; root: RootServer | null },
  leftover: MadeDatabase,
  audit: Audit,
) {
  await dropMade(ctx, on.server, leftover);
  if (on.root) {
    await createFilestores(ctx).remove(on.root, leftover.name, { ...audit, operation: 'deploy' });
    await removeTenantCredentials(ctx, on.root, leftover.name, { ...audit, operation: 'deploy' });
  }
}

/** The PostgreSQL server the deployment placed the subscription on (recorded before the database exists), else the template's. */
async function placedServer(ctx: Ctx, subscriptionId: number) {
  const now = await ctx.db.subscription.findUniqueOrThrow({
    where: { id: subscriptionId },
    include: { postgresql_server: true, database_template: { include: { postgresql_server: true } } },
  });
  if (now.placed_at && now.postgresql_server) return now.postgresql_server;
  return now.database_template!.postgresql_server;
}

/** Removes the database and filestore a failed deployment made; answers what it did, for the chatter. */
export async function removeMade(ctx: Ctx, sub: Subscription, made: Made, audit: Audit) {
  const done: string[] = [];
  if (made.database) {
    const database = made.database;
    try {
      await dropMade(ctx, await placedServer(ctx, sub.id), database);
      await forgetDatabase(ctx, sub.id);
      done.push(`Database ${database.name} it made was dropped.`);
    } catch (err) {
      done.push(`Database ${database.name} it made could not be dropped (${(err as Error).message}): deploy again removes it first.`);
    }
  }
  if (made.filestoreOn) {
    try {
      await createFilestores(ctx).remove(made.filestoreOn, sub.database_name!, { ...audit, operation: 'deploy' });
      done.push('Its filestore was removed.');
    } catch (err) {
      done.push(`Its filestore could not be removed: ${(err as Error).message}`);
    }
  }
  if (made.credentialsOn) {
    await removeTenantCredentials(ctx, made.credentialsOn, sub.database_name!, { ...audit, operation: 'deploy' }).then(
      () => done.push("Its role's credentials file was removed."),
      (err: Error) => done.push(`Its role's credentials file could not be removed: ${err.message}`),
    );
  }
  return done.join(' ');
}

/**
 * What a deployment whose job was lost may have made, removed: the database it recorded (by its
 * identity, with its role), and the filestore and credentials file of its name on the template's
 * Odoo host (the subscription was still deploying: nobody else's). One step of the action log (the
 * sweep's job); answers the alert for the chatter.
 */
export async function removeLostDeployment(ctx: Ctx, sub: Subscription, lostJobId: string, audit: Audit) {
  const template = sub.database_template_id
    ? await ctx.db.databaseTemplate.findUnique({ where: { id: sub.database_template_id }, include: { root_server: true } })
    : null;
  // Where the deployment placed it (placement records it before the database exists), else the template's.
  const placed =
    sub.placed_at && sub.root_server_id !== null ? await ctx.db.rootServer.findUnique({ where: { id: sub.root_server_id } }) : null;
  const host = placed ?? template?.root_server ?? null;
  const made: Made = { database: leftoverOf(sub), filestoreOn: host, credentialsOn: sub.database_role ? host : null };
  const entry = {
    ...onSubscription(sub.id),
    action_type: 'deployment' as const,
    operation: 'deploy',
    input_text: `remove what deploy_subscription (job ${lostJobId}, lost with Redis) made: database ${sub.database_name}${host ? ` and its files on root server ${host.id}` : ''}`,
    ...audit,
  };
  const removed = await runLoggedStep(
    ctx.db,
    entry,
    () => removeMade(ctx, sub, made, audit),
    (out) => out || 'nothing was made',
  );
  return `Deployment failed: Redis lost its job ${lostJobId}. ${removed}`.trim();
}

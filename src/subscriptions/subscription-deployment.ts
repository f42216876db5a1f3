// Deployment of a subscription (DESIGN §6): the customer database is created on the template's
// PostgreSQL server with CREATE DATABASE <database_name> TEMPLATE <template_db_name>. The state
// goes deploying → running, or failed with the error in the chatter; both outcomes are written
// to the action log, and a failure is also posted on the trial request(s) the subscription came from.
// A trial that is running for the first time gets its trial_ready mail at once (and again from the
// lifecycle run if the delivery failed). The job's progress names the step it is at
// ({step: DeploymentStep}): a failed job's progress says where it stopped.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { DbTx } from '../core/db.js';
import { startActionLog, writeActionLog, type ActionLogStep } from '../core/action-log.js';
import { authorOfUser, postMessage, type Author, type RecordRef } from '../core/chatter.js';
import { connectPostgresqlServer, quoteIdent } from '../postgresql/postgresql-connection.js';
import { createLifecycleMail } from './subscription-mail.js';
import { assertTemplateDatabase, createdDatabase } from './subscription-database.js';
import { assertState, DEPLOYABLE_STATES, lockSubscription, setSubscriptionState } from './subscription-service.js';

export interface DeploymentResult {
  subscription_id: number;
  database_name: string;
  template_db_name: string;
  postgresql_server_id: number;
}

export type DeploymentStep = 'connecting' | 'creating_database' | 'recording' | 'trial_ready_mail' | 'done';

const CREATE_DATABASE_TIMEOUT = '15min';

export async function deploySubscription(
  ctx: Pick<AppContext, 'db' | 'box' | 'mailer' | 'config' | 'log'>,
  subscriptionId: number,
  who: { userId: number | null; jobId: string | null },
  report: (progress: { step: DeploymentStep }) => Promise<unknown> = async () => {},
): Promise<DeploymentResult> {
  const author = await authorOfUser(ctx.db, who.userId);
  const ref: RecordRef = { model_name: 'svc.subscription', rec_id: subscriptionId };

  // Claim: only one deployment at a time, and only from a deployable state.
  const sub = await ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, subscriptionId);
    assertState(before, DEPLOYABLE_STATES, 'deploy');
    return setSubscriptionState(tx, before, 'deploying', author, {
      database_name: before.database_name ?? `sub_${before.id}`,
    });
  });
  const databaseName = sub.database_name!;
  let statement = `CREATE DATABASE ${quoteIdent(databaseName)}`;
  let step: ActionLogStep | null = null;

  try {
    const template = sub.database_template_id
      ? await ctx.db.databaseTemplate.findUnique({ where: { id: sub.database_template_id }, include: { postgresql_server: true } })
      : null;
    if (!template) throw new UserError('The subscription has no database template to deploy from');
    const server = template.postgresql_server;
    statement = `CREATE DATABASE ${quoteIdent(databaseName)} TEMPLATE ${quoteIdent(template.template_db_name)}`;

    // Written before the statement runs, so a worker that dies during the copy leaves a trace.
    step = await startActionLog(ctx.db, {
      ...ref,
      action_type: 'deployment',
      input_text: `${statement} -- on ${server.ip}:${server.port}`,
      user_id: who.userId,
      job_id: who.jobId,
    });
    await report({ step: 'connecting' });
    const { client } = await connectPostgresqlServer(ctx.box, server);
    const query = (sql: string, params?: unknown[]) => client.query(sql, params);
    let identity: Awaited<ReturnType<typeof createdDatabase>>;
    try {
      await report({ step: 'creating_database' });
      await assertTemplateDatabase(ctx.db, query, template.template_db_name, `${server.ip}:${server.port}`);
      // Copying a large template takes longer than an ordinary statement may.
      await client.query(`SET statement_timeout = '${CREATE_DATABASE_TIMEOUT}'`);
      await client.query(statement);
      identity = await createdDatabase(query, databaseName);
    } finally {
      await client.end().catch(() => {});
    }

    const result: DeploymentResult = {
      subscription_id: sub.id,
      database_name: databaseName,
      template_db_name: template.template_db_name,
      postgresql_server_id: server.id,
    };
    await report({ step: 'recording' });
    await ctx.db.$transaction(async (tx) => {
      // A database made again (after a drop) starts open and unsuspended.
      await setSubscriptionState(tx, await lockSubscription(tx, sub.id), 'running', author, {
        database_dropped_at: null,
        database_created_at: new Date(),
        ...identity,
        suspended_at: null,
        suspend_reason: null,
      });
      await postMessage(tx, {
        ...ref,
        body: `Database ${databaseName} created from template ${template.template_db_name} on ${server.ip}:${server.port}.`,
        message_type: 'notification',
        author,
      });
      await step!.finish('success', 'Database created', tx);
    });
    // The deployment is done whatever the mail does (a failure is in the chatter, and retried).
    await report({ step: 'trial_ready_mail' });
    await createLifecycleMail(ctx)
      .sendDue({ subscriptionId: sub.id, mails: ['trial_ready'] })
      .catch((err) => ctx.log.warn({ err, subscription_id: sub.id }, 'trial_ready mail not sent'));
    await report({ step: 'done' });
    return result;
  } catch (err) {
    const message = (err as Error).message;
    await ctx.db.$transaction(async (tx) => {
      await markDeploymentFailed(tx, sub.id, message, author);
      await postMessage(tx, {
        ...ref,
        body: `Deployment failed: ${message}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
        author,
      });
      if (step) await step.finish('failure', message, tx);
      else {
        await writeActionLog(tx, {
          ...ref,
          action_type: 'deployment',
          status: 'failure',
          input_text: statement,
          output_text: message,
          user_id: who.userId,
          job_id: who.jobId,
        });
      }
    });
    throw err;
  }
}

/**
 * A deployment that did not end: the subscription goes `failed` (from `deploying` only) and the
 * trial request(s) it came from are told. Used on an error and when the job was interrupted.
 */
export async function markDeploymentFailed(tx: DbTx, subscriptionId: number, message: string, author: Author | null) {
  const sub = await lockSubscription(tx, subscriptionId);
  if (sub.state !== 'deploying') return;
  await setSubscriptionState(tx, sub, 'failed', author);
  const requests = await tx.trialRequest.findMany({ where: { subscription_id: sub.id }, select: { id: true } });
  for (const r of requests) {
    await postMessage(tx, {
      model_name: 'svc.subscription.trial.request',
      rec_id: r.id,
      body: `Deployment of subscription ${sub.id} failed: ${message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
  }
}

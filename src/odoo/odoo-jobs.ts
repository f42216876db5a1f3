// The Odoo jobs' handlers, and what an interruption (the worker died while one ran) leaves: the
// server's Odoo in an unknown state, so `failed` with a message saying to run set-up again.
import type { AppContext } from '../context.js';
import type { RecordRef } from '../core/chatter.js';
import { postMessage } from '../core/chatter.js';
import type { Interruptions } from '../core/jobs.js';
import { featureJobs, type OdooChange, type Registry } from '../feature.js';
import { odooJobs } from './odoo-job-specs.js';
import { failLostSetups } from './odoo-lost-setups.js';
import { createOdooService } from './odoo-service.js';
import { createOdooSetup } from './odoo-setup.js';
import { createTemplateBuilder } from './odoo-template-build.js';

const onServer = (p: { root_server_id: number }): RecordRef => ({ model_name: 'svc.root.server', rec_id: p.root_server_id });
const onTemplate = (p: { database_template_id: number }): RecordRef => ({
  model_name: 'svc.database.template',
  rec_id: p.database_template_id,
});

const serverInterrupted = {
  record: onServer,
  action_type: 'ssh_command' as const,
  async onInterrupted(
    tx: Parameters<NonNullable<Interruptions<typeof odooJobs>['odoo_setup']['onInterrupted']>>[0],
    payload: { root_server_id: number },
    jobId: string,
  ) {
    await tx.rootServer.updateMany({
      where: { id: payload.root_server_id },
      data: {
        odoo_state: 'failed',
        odoo_error: `[interrupted] The worker stopped during job ${jobId}; Odoo's state on the host is unknown: run setup_odoo again (it converges).`,
      },
    });
  },
};

const interruptions: Interruptions<typeof odooJobs, AppContext> = {
  odoo_setup: serverInterrupted,
  odoo_restart: serverInterrupted,
  odoo_stop: serverInterrupted,
  odoo_start_again: serverInterrupted,
  // The database may be half-built: the next build refuses to overwrite it, and says so.
  odoo_build_template: { record: onTemplate, action_type: 'database' },
  // The template may be half-updated: its safety copy stays recorded, and the next update puts it back first.
  odoo_update_template: { record: onTemplate, action_type: 'database' },
};

/** A failed action is also told in the record's chatter, as an alert. */
async function told<T>(
  ctx: AppContext,
  action: string,
  id: number,
  work: () => Promise<T>,
  model: RecordRef['model_name'] = 'svc.root.server',
): Promise<T> {
  try {
    return await work();
  } catch (err) {
    await postMessage(ctx.db, {
      model_name: model,
      rec_id: id,
      body: `${action} failed: ${(err as Error).message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
    throw err;
  }
}

/** Tells the features following hosts and templates (pools' copies) what a job changed, once it succeeded. */
function changed(registry: Registry, change: OdooChange) {
  return async <T>(result: T): Promise<T> => {
    for (const observe of registry.odooChangeObservers) await observe(change);
    return result;
  };
}

export const odooJobHandlers = featureJobs(
  odooJobs,
  (ctx, registry) => {
    const setup = createOdooSetup(ctx);
    const service = createOdooService(ctx);
    const templates = createTemplateBuilder(ctx);
    return {
      odoo_setup: (payload, job) =>
        told(ctx, 'setup_odoo', payload.root_server_id, () => setup(payload, job)).then(
          changed(registry, { kind: 'host_set_up', root_server_id: payload.root_server_id }),
        ),
      odoo_restart: (payload, job) => told(ctx, 'restart_odoo', payload.root_server_id, () => service.restart(payload, job)),
      odoo_stop: (payload, job) => told(ctx, 'stop_odoo', payload.root_server_id, () => service.stop(payload, job)),
      odoo_start_again: (payload, job) => told(ctx, 'Starting Odoo again', payload.root_server_id, () => service.startAgain(payload, job)),
      odoo_lost_setups: () => failLostSetups(ctx),
      odoo_build_template: (payload, job) =>
        told(ctx, 'build', payload.database_template_id, () => templates.build(payload, job), 'svc.database.template').then(
          changed(registry, { kind: 'template_built', database_template_id: payload.database_template_id }),
        ),
      odoo_update_template: (payload, job) =>
        told(ctx, 'update', payload.database_template_id, () => templates.update(payload, job), 'svc.database.template').then(
          changed(registry, { kind: 'template_updated', database_template_id: payload.database_template_id }),
        ),
    };
  },
  interruptions,
);

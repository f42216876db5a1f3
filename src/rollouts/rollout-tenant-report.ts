// What a tenant's part of a rollout decides and says: which of its modules changed, the checksums it
// records, Odoo's words about a failed update, and how its end (and a failed clean-up) is told: the
// tenant's row, one action-log row, a failure also a message in its chatter.
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { postMessage } from '../core/chatter.js';
import { UserError } from '../core/errors.js';

export type Checksums = Record<string, string>;

/** What the report needs of the rollout's host. */
interface HostOfReport {
  rolloutId: number;
  serverId: number;
  commit: string | null;
  userId: number | null;
  jobId: string;
}

/** What the report needs of the tenant's row. */
interface TenantOfReport {
  id: number;
  subscription_id: number;
  database_name: string;
  modules: string[];
  started_at: Date | null;
}

/**
 * The installed modules whose code changed since the tenant's recorded checksums: those whose
 * checksum differs, and those without one that live in the rollout's deploy path (a tenant's first
 * rollout: what was deployed may be newer than what its database was made with). Modules not on
 * the addons path any more are left alone (Odoo could not update them).
 */
export function changedModules(
  installed: readonly string[],
  host: { sums: Checksums; dirs: Record<string, string>; deployPath: string | null },
  recorded: Checksums | null,
) {
  return installed
    .filter((m) => host.sums[m] !== undefined)
    .filter((m) => {
      const before = recorded?.[m];
      if (before === undefined) return host.deployPath !== null && host.dirs[m] === host.deployPath;
      return before !== host.sums[m];
    })
    .sort();
}

/** The checksums of the tenant's installed modules now (what the next rollout compares with). */
export const checksumsOf = (installed: readonly string[], sums: Checksums): Checksums =>
  Object.fromEntries(installed.filter((m) => sums[m] !== undefined).map((m) => [m, sums[m]!]));

/** Odoo's words about a failed update: the module it was loading, and its complaints (the end). */
export function updateError(stdout: string, exit: string): string {
  const last = /SVC-LAST-MODULE .*?(?:Loading module|module) ([A-Za-z0-9_]+)/.exec(stdout)?.[1];
  const said = stdout
    .split('\n')
    .filter((l) => !l.startsWith('SVC-LAST-MODULE '))
    .join('\n')
    .trim()
    .slice(-3000);
  return `${last ? `while updating module ${last}: ` : ''}odoo-bin exited with ${exit}\n${said}`;
}

const whatOf = (host: HostOfReport) => `${host.commit ? `commit ${host.commit}` : 'code'} on root server ${host.serverId}`;

/** The tenant's end: its state and duration recorded, its action-log row, and a failure in its chatter. */
export async function reportEnd(
  ctx: Pick<AppContext, 'db'>,
  host: HostOfReport,
  row: TenantOfReport,
  state: 'updated' | 'unchanged' | 'failed',
  data: { error?: string; checksums?: Checksums },
) {
  const db = ctx.db;
  const finished = new Date();
  const started = row.started_at ?? finished;
  const duration = finished.getTime() - started.getTime();
  await db.rolloutTenant.update({
    where: { id: row.id },
    data: {
      state,
      error: data.error ?? null,
      checksums: data.checksums,
      finished_at: finished,
      duration_ms: duration,
    },
  });
  const modules = row.modules.length ? ` -u ${row.modules.join(',')}` : '';
  const what = whatOf(host);
  const output =
    state === 'unchanged'
      ? 'unchanged: no installed module changed; nothing ran'
      : state === 'updated'
        ? `updated${modules} in ${(duration / 1000).toFixed(1)} s`
        : `update_failed${modules}: restored from its safety copy (database and filestore) after ${(duration / 1000).toFixed(1)} s\n${data.error ?? ''}`;
  await writeActionLog(db, {
    model_name: 'svc.subscription',
    rec_id: row.subscription_id,
    action_type: 'deployment',
    operation: 'rollout',
    input_text: `rollout ${host.rolloutId}: ${what}, database ${row.database_name}`,
    output_text: output,
    status: state === 'failed' ? 'failure' : 'success',
    user_id: host.userId,
    job_id: host.jobId,
  });
  if (state === 'failed') {
    await postMessage(db, {
      model_name: 'svc.subscription',
      rec_id: row.subscription_id,
      body: `update_failed: the rollout of ${what} could not update ${row.database_name}${modules}; it was put back as it was before (database and filestore).\n${data.error ?? ''}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
  }
}

/**
 * A clean-up that failed (the maintenance flag still on, or part of the safety copy still there): a
 * failure row in the tenant's action log, then the job fails with it; the rollout's next run tries again.
 */
export async function reportCleanUp(ctx: Pick<AppContext, 'db'>, host: HostOfReport, row: TenantOfReport, failed: readonly string[]) {
  const error = `The clean-up after the rollout of ${row.database_name} failed (the rollout's next run tries again):\n${failed.join('\n')}`;
  await writeActionLog(ctx.db, {
    model_name: 'svc.subscription',
    rec_id: row.subscription_id,
    action_type: 'deployment',
    operation: 'rollout',
    input_text: `rollout ${host.rolloutId}: ${whatOf(host)}, database ${row.database_name}: clean-up`,
    output_text: error,
    status: 'failure',
    user_id: host.userId,
    job_id: host.jobId,
  });
  throw new UserError(error);
}

// A restore a backup server runs in the background (svc's own answers its restore request with the
// restore's id): followed on GET /api/restores/{id} until it is done or failed, within
// BACKUP_WAIT_MS. Used by a subscription's restore and by a staging copy made from a backup.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { sleep } from '../core/sleep.js';
import { type BackupServerRecord, createBackupApi } from './backup-api.js';
import { REMOTE_STATES } from './backup-state.js';

const MAX_POLL_MS = 30_000;

export function createRestoreFollower(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>) {
  const api = createBackupApi(ctx);
  const { config } = ctx;
  return async function followRestore(server: BackupServerRecord, target: OutboundTarget, id: string | number) {
    const deadline = Date.now() + config.BACKUP_WAIT_MS;
    let wait = config.BACKUP_POLL_MS;
    let last = 'running';
    for (let left = deadline - Date.now(); left > 0; left = deadline - Date.now()) {
      await sleep(Math.min(wait, left));
      wait = Math.min(wait * 2, MAX_POLL_MS);
      const status = await api.restoreStatus(server, target, id);
      last = status.state;
      const state = REMOTE_STATES[status.state.toLowerCase()];
      if (state === 'ok') return { id: status.id, state: status.state };
      if (state === 'failed')
        throw new UserError(`The backup server reports restore ${id} as ${status.state}: ${status.error ?? 'no cause given'}`);
    }
    throw new UserError(`Restore ${id} was not reported done within ${config.BACKUP_WAIT_MS} ms (last state: ${last})`);
  };
}

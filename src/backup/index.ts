// Backup servers and their cloud accounts, and a subscription's backup state.
import type { Feature } from '../feature.js';
import { backupRepositoryModel, backupServerModel } from './backup-models.js';
import { registerBackupRoutes } from './backup-routes.js';
import { createBackupStateService } from './backup-state.js';

export const backup: Feature = {
  name: 'backup',
  models: [backupServerModel, backupRepositoryModel],
  routes: registerBackupRoutes,
  // A backup server's callback (an inbound webhook) asks for `_compute_backup_state()` on a subscription.
  webhookMethods: (ctx) => {
    const states = createBackupStateService(ctx);
    return {
      'svc.subscription': {
        _compute_backup_state: async (recId, { tx }) => {
          await states.computeBackupState(recId, { tx });
        },
      },
    };
  },
};

// What other features use from this one: they import it from here, never from the files.
export { createBackupApi } from './backup-api.js';
export { createRestoreFollower } from './backup-restore-follow.js';
export type { BackupServerRecord, RemoteBackup } from './backup-api.js';
export { REMOTE_STATES, backupServerFor } from './backup-state.js';
export { BACKUP_OVERDUE_MS, createBackupOverdue, recordBackupDone } from './backup-overdue.js';
export type { Notice as BackupNotice, OverdueResult } from './backup-overdue.js';

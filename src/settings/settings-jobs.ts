import type { AppContext } from '../context.js';
import type { JobHandlers } from '../worker.js';
import { writeActionLog } from '../action-log/action-log-service.js';
import { rotateEncryptionKey } from './key-rotation.js';
import { SETTINGS_MODEL } from './settings-service.js';

export function createSettingsJobs(ctx: AppContext): Pick<JobHandlers, 'rotate_encryption_key'> {
  return {
    async rotate_encryption_key(payload, job) {
      const result = await rotateEncryptionKey(ctx.db, ctx.box, {
        afterBatch: (reencrypted) => job.updateProgress({ reencrypted }),
      });
      await writeActionLog(ctx.db, {
        model_name: SETTINGS_MODEL,
        rec_id: 1,
        action_type: 'settings',
        input_text: 'rotate_encryption_key',
        output_text: JSON.stringify(result),
        user_id: payload.user_id,
        job_id: `${job.queueName}-${job.id}`,
      });
      return result;
    },
  };
}

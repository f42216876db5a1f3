// Settings jobs: key rotation, an idempotent maintenance job run again after a crash.
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { publicJobId } from '../core/queue.js';
import { featureJobs, type Registry } from '../feature.js';
import { rotateEncryptionKey } from './key-rotation.js';
import { settingsJobs } from './settings-job-specs.js';

export const settingsJobHandlers = featureJobs(
  settingsJobs,
  (ctx: AppContext, registry: Registry) => ({
    async rotate_encryption_key(payload, job) {
      const result = await rotateEncryptionKey(ctx, registry.models.secretColumns(), {
        afterBatch: (reencrypted) => job.updateProgress({ reencrypted }),
      });
      await writeActionLog(ctx.db, {
        model_name: 'svc.settings',
        rec_id: 1,
        action_type: 'settings',
        input_text: 'rotate_encryption_key',
        output_text: JSON.stringify(result),
        user_id: payload.user_id,
        job_id: publicJobId(job.queueName, job.id!),
      });
      return result;
    },
  }),
  {},
);

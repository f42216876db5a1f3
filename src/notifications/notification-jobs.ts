import type { AppContext } from '../context.js';
import type { JobHandlers } from '../worker.js';
import { createNotificationService } from './notification-service.js';

export function createNotificationJobs(ctx: AppContext): Pick<JobHandlers, 'generate_notification_tokens'> {
  const service = createNotificationService(ctx);
  return {
    generate_notification_tokens: (payload, job) =>
      service.generateUserTokens(payload.notification_server_id, { userId: payload.user_id, jobId: `${job.queueName}-${job.id}` }),
  };
}

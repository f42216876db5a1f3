// Notification jobs: per-user token generation on a self-hosted push server.
import { publicJobId } from '../core/queue.js';
import { featureJobs } from '../feature.js';
import { notificationJobs } from './notification-job-specs.js';
import { createNotificationService } from './notification-service.js';

export const notificationJobHandlers = featureJobs(
  notificationJobs,
  (ctx) => {
    const service = createNotificationService(ctx);
    return {
      generate_notification_tokens: (payload, job) =>
        service.generateUserTokens(payload.notification_server_id, { userId: payload.user_id, jobId: publicJobId(job.queueName, job.id!) }),
    };
  },
  {
    // Tokens may have been created on the push server: not run again after a crash.
    generate_notification_tokens: {
      record: (p) => ({ model_name: 'svc.ntfy.server', rec_id: p.notification_server_id }),
      action_type: 'api_call',
    },
  },
);

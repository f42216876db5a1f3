import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';
import { refId } from '../core/http/schemas.js';

export const notificationJobs = defineJobs({
  // Per-user tokens on a self-hosted push server (auto_generate_tokens); one run per server at a time.
  generate_notification_tokens: job({
    queue: 'notifications',
    payload: z.object({ notification_server_id: refId, ...requestedBy }),
    key: (p) => String(p.notification_server_id),
    afterCrash: 'interrupt', // creates tokens on the push server
  }),
});

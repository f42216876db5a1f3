import { z } from 'zod';
import { defineJobs, job } from '../core/jobs.js';
import { refId } from '../core/http/schemas.js';

export const ALERT_CHANNELS = ['push', 'mail'] as const;

export const alertJobs = defineJobs({
  // The push and mail notices of one alert event, apart from the poll (it never waits on them).
  // Retried with a growing delay; each channel is remembered in `delivered` as soon as it is sent,
  // so a retry after a failed mail, or a rerun after a crash, does not push again. A crash between
  // a send and that record runs it again: that notice may then be sent twice, never lost.
  alert_notify: job({
    queue: 'alerts',
    payload: z.object({
      alert_id: refId,
      event: z.enum(['fired', 'repeated', 'resolved']),
      /** Which repeat (repeat_minutes) a `repeated` notice is. */
      repeat: z.number().int().min(0).default(0),
      delivered: z.array(z.enum(ALERT_CHANNELS)).default([]),
    }),
    key: (p) => `${p.alert_id}:${p.event}:${p.repeat}`,
    attempts: 4,
    afterCrash: 'rerun',
  }),
});

// The monitoring methods an inbound webhook may name as trigger_action on a root server: starting
// and stopping monitoring only schedule work the operator configured, and are harmless repeated.
// Both run in the caller's transaction; the schedule changes once it commits.
import type { AppContext } from '../context.js';
import type { WebhookMethodTable } from '../core/webhook-methods.js';
import { createMonitorService } from './monitor-service.js';

export function monitorWebhookMethods(ctx: AppContext): WebhookMethodTable {
  const monitor = createMonitorService(ctx);
  return {
    'svc.root.server': {
      action_start_monitor: async (recId, call) => {
        await monitor.start(recId, null, call);
      },
      action_stop_monitor: async (recId, call) => {
        await monitor.stop(recId, null, call);
      },
    },
  };
}

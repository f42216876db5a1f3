// Server monitoring: start/stop_monitor, the polls of the monitor runner, monitor logs and their
// retention; it follows the root servers' changes (onRootServerChange).
import type { Feature } from '../feature.js';
import { monitorJobHandlers, registerMonitorSchedules, startMonitoring } from './monitor-jobs.js';
import { monitorMetrics } from './monitor-metrics.js';
import { registerMonitorRoutes } from './monitor-routes.js';
import { createMonitorService } from './monitor-service.js';
import { monitorWebhookMethods } from './monitor-webhook-methods.js';

export const monitoring: Feature = {
  name: 'monitoring',
  routes: registerMonitorRoutes,
  jobs: monitorJobHandlers,
  schedules: registerMonitorSchedules,
  webhookMethods: monitorWebhookMethods,
  onRootServerChange: (ctx) => createMonitorService(ctx).rootServerChanged,
  background: startMonitoring,
  metrics: monitorMetrics,
};

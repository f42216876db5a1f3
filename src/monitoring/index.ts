// Server monitoring (spec §4.4 start/stop_monitor; DESIGN §7): polls, monitor logs, retention.
import type { Feature } from '../feature.js';
import { monitorJobHandlers, registerMonitorSchedules, startMonitoring } from './monitor-jobs.js';
import { monitorMetrics } from './monitor-metrics.js';
import { registerMonitorRoutes } from './monitor-routes.js';

export const monitoring: Feature = {
  name: 'monitoring',
  routes: registerMonitorRoutes,
  jobs: monitorJobHandlers,
  schedules: registerMonitorSchedules,
  background: startMonitoring,
  metrics: monitorMetrics,
};

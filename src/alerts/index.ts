// Alerts: threshold rules over the monitoring samples, evaluated after every poll,
// with fire, repeat and resolve notices in the chatter, by push and by mail, held back during
// maintenance windows and, for a server's other alerts, while it is offline.
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { createAlertEvaluation } from './alert-evaluator.js';
import { alertJobs } from './alert-job-specs.js';
import { alertMetrics } from './alert-metrics.js';
import { alertModel, alertRuleModel } from './alert-models.js';
import { createAlertNotifier } from './alert-notify.js';
import { registerAlertRoutes } from './alert-routes.js';

export const alerts: Feature = {
  name: 'alerts',
  models: [alertRuleModel, alertModel],
  routes: registerAlertRoutes,
  jobs: featureJobs(
    alertJobs,
    (ctx) => {
      const notify = createAlertNotifier(ctx);
      return { alert_notify: (payload, job) => notify(payload, job) };
    },
    {},
  ),
  onMonitorPoll: (ctx) => createAlertEvaluation(ctx).evaluate,
  onMonitorStop: (ctx) => createAlertEvaluation(ctx).monitoringStopped,
  metrics: alertMetrics,
};

// What other features use from this one: they import it from here, never from the files.
export { formatDuration } from './alert-text.js';

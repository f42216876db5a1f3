// Maintenance windows: planned work on root servers. While a window is open its servers' alerts
// are recorded silenced (src/alerts) and usage enforcement waits (serversInMaintenance).
import type { Feature } from '../feature.js';
import { maintenanceWindowModel } from './maintenance-models.js';
import { registerMaintenanceRoutes } from './maintenance-routes.js';
import { serversInMaintenance } from './maintenance-state.js';

export const maintenance: Feature = {
  name: 'maintenance',
  models: [maintenanceWindowModel],
  routes: registerMaintenanceRoutes,
  metrics: (ctx) => [
    {
      name: 'maintenance',
      needs: 'postgresql',
      gauges: [{ name: 'svc_servers_in_maintenance', help: 'Root servers inside a maintenance window now' }],
      read: async () => ({ svc_servers_in_maintenance: [{ value: (await serversInMaintenance(ctx.db, new Date())).size }] }),
    },
  ],
};

// What other features use from this one: they import it from here, never from the files.
export { createMaintenanceCalendar, maintenanceVersionKey, serversInMaintenance, windowLabel } from './maintenance-state.js';
export type { OpenWindow } from './maintenance-state.js';

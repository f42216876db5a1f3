// Odoo on the hosts: the versions svc installs, and the root server actions that install, run and
// report Odoo (setup_odoo, restart_odoo, stop_odoo, odoo_status); Odoo started again when a host is
// back online (onMonitorPoll) and set-ups whose job Redis lost failed (a schedule).
import type { AppContext } from '../context.js';
import type { FastifyInstance } from 'fastify';
import type { Feature } from '../feature.js';
import { odooJobs } from './odoo-job-specs.js';
import { odooJobHandlers } from './odoo-jobs.js';
import { LOST_SETUPS_EVERY_MS } from './odoo-lost-setups.js';
import { startOdooWhenBackOnline } from './odoo-recovery.js';
import { registerOdooHostRoutes } from './odoo-routes.js';
import { odooVersionModel } from './odoo-version-models.js';
import { registerOdooVersionRoutes } from './odoo-version-routes.js';

export const odoo: Feature = {
  name: 'odoo',
  models: [odooVersionModel],
  routes: (app: FastifyInstance, ctx: AppContext) => {
    registerOdooVersionRoutes(app, ctx);
    registerOdooHostRoutes(app, ctx);
  },
  jobs: odooJobHandlers,
  onMonitorPoll: startOdooWhenBackOnline,
  schedules: (ctx: AppContext) =>
    ctx.queues.schedule('odoo-lost-setups', { every: LOST_SETUPS_EVERY_MS }, odooJobs.odoo_lost_setups, { user_id: null }),
};

// What other features use from this one.
export { hostsOdoo, signInAsCustomer } from './odoo-sign-in.js';
export type { CustomerSignIn } from './odoo-sign-in.js';
// For rollouts (src/rollouts): the host's layout, its Odoo's graceful restart.
export { connectionsInUse, hostConnections, postgresqlRoom, SVC_CONNECTIONS } from './odoo-connections.js';
export { otherHosts } from './odoo-host-fit.js';
export { geventPortOf, odooLayout, PYTHON } from './odoo-layout.js';
export type { OdooLayout } from './odoo-layout.js';
// The one way to run odoo-bin once as the odoo user (rollouts' updates, staging's neutralize).
export { asOdoo, odooBin } from './odoo-once.js';
export { createOdooService } from './odoo-service.js';
export { loadOdooHost } from './odoo-store.js';
export { odooJobs };
export { createTemplateBuilder } from './odoo-template-build.js';
// Packages are apps: a package's modules checked against its template and host (trial packages, subscriptions, deployments).
export { DEFAULT_OS_PACKAGES, isModuleName, moduleName } from './odoo-names.js';
export { assertPackageModules, assertTemplateHasPackages } from './odoo-modules.js';

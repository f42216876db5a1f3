// Customer instances: what makes a copy of a template a customer's Odoo (identity, login, package
// limits, filestore: used by the deployment) and the standby pool that keeps ready copies per trial
// package (its resource, its maintenance job every minute).
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { standbyJobs } from './standby-job-specs.js';
import { standbyDatabaseModel } from './standby-models.js';
import { createStandbyPool } from './standby-pool.js';
import { registerStandbyRoutes } from './standby-routes.js';

const STANDBY_POOL_EVERY_MS = 60_000;

export const instances: Feature = {
  name: 'instances',
  models: [standbyDatabaseModel],
  routes: registerStandbyRoutes,
  jobs: featureJobs(standbyJobs, (ctx) => ({ maintain_standby_pool: () => createStandbyPool(ctx).maintain() }), {}),
  schedules: (ctx: AppContext) =>
    ctx.queues.schedule('standby-pool', { every: STANDBY_POOL_EVERY_MS }, standbyJobs.maintain_standby_pool, { user_id: null }),
};

// What other features use from this one: they import it from here, never from the files.
export {
  copyFilestore,
  createFilestores,
  filestorePath,
  type OdooDataDir,
  removeFilestoreCopy,
  restoreFilestore,
  runOnOdooHost,
} from './filestore.js';
export { dumpAndRestore, type PgConnection } from './dump-restore.js';
export { setMaintenance } from './maintenance-flag.js';
export {
  LONG_STATEMENT_TIMEOUT,
  assertTemplateDatabase,
  copyTemplate,
  createEmptyDatabase,
  databaseLocale,
  dropDatabaseAndItsRole,
  dropMadeDatabase,
  endSessions,
  END_SESSIONS,
  onServer,
  renameMadeDatabase,
  serverWhere,
} from './instance-database.js';
export type { MadeDatabase, Query } from './instance-database.js';
export { assertTemplateIdentity, recordTemplateIdentity, TemplateSwapped } from './template-identity.js';
export { dropSafetyCopy, makeSafetyCopy, restoreSafetyCopy, type SafetyCopy, safetyCopyName } from './safety-copy.js';
export {
  assertOdooDatabase,
  setAddressAndDate,
  setBaseUrl,
  setCustomerLogin,
  setCustomerPassword,
  setIdentity,
  packageParams,
  setPackageLimits,
  setStorageUsed,
  writeRoundParams,
  setSuspension,
  SVC_ADDON,
} from './odoo-database.js';
export type { Suspension } from './odoo-database.js';
export { hashOdooPassword, newPassword } from './odoo-password.js';
export { newSignInToken, SIGN_IN_LINK_MINUTES, SIGN_IN_LINK_TABLE, signInTokenHash, storeSignInLink } from './sign-in-link.js';
export { assertTenantRole, databaseOwner, insideTenant, lockTenantTables, TenantRefusal, tenantRoleOf } from './tenant-session.js';
export type { TenantRole } from './tenant-session.js';
export {
  giveTenantRole,
  handOverToTenantRole,
  hasTenantRoles,
  newRolePassword,
  tenantRoleName,
} from './tenant-role.js';
export { removeTenantCredentials, writeTenantCredentials } from './tenant-credentials.js';
export { standbyJobs } from './standby-job-specs.js';
export {
  installationPrefix,
  MAX_STANDBY_POOL_SIZE,
  STANDBY_PREFIX,
  STANDBY_REFILL_DELAY_MS,
  standbyHandedOver,
  standbyLost,
  takeStandby,
} from './standby-pool.js';
export type { Standby } from './standby-pool.js';
export { loadPlacement, PLACEMENT_INCLUDE, placementOf, type Placement } from './placement.js';
export { copyInStep, readyTemplateHosts, type TemplateHost, templateOn } from './template-hosts.js';

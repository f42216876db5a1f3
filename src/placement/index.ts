// Placement on a fleet of Odoo hosts (issue 49, DESIGN §22): which host of a pool a new tenant goes
// to (filtered, scored, its room taken under the host's lock), hosts cordoned and uncordoned, and
// the pools' room alert (a schedule every 5 minutes).
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { placementJobs } from './placement-job-specs.js';
import { checkPoolRoom } from './placement-room.js';
import { registerPlacementRoutes } from './placement-routes.js';

const POOL_ROOM_EVERY_MS = 5 * 60_000;

export const placement: Feature = {
  name: 'placement',
  routes: registerPlacementRoutes,
  jobs: featureJobs(placementJobs, (ctx) => ({ check_pool_room: () => checkPoolRoom(ctx) }), {}),
  schedules: (ctx: AppContext) =>
    ctx.queues.schedule('pool-room', { every: POOL_ROOM_EVERY_MS }, placementJobs.check_pool_room, { user_id: null }),
};

// What other features use from this one.
export { NoRoomError, place, standbyHosts, type Candidate, type Decision } from './placement-service.js';
export { capacityOf, fillOf, judge, roomOf, unhealthy, type HostFigures } from './placement-capacity.js';
export { loadHosts, tenantDiskEstimate, HOLDS_ROOM } from './placement-load.js';
export { checkPoolRoom, poolRooms, tellOperators } from './placement-room.js';
export { createPlacementHosts } from './placement-hosts.js';

// Which root servers are under maintenance at a time, for the features that hold back what they
// would do to them (alert notices, usage enforcement). The windows change rarely and are read on
// every monitoring poll: each process keeps those not yet ended in memory and reloads them when
// the version in Redis moved (every window write bumps it) or at the latest after a minute.
import type { AppContext } from '../context.js';
import type { Db } from '../core/db.js';

export const maintenanceVersionKey = (prefix: string) => `${prefix}:maintenance:version`;

/** Windows are reloaded at least this often, even if a version bump was lost. */
const MAX_AGE_MS = 60_000;

export interface OpenWindow {
  id: number;
  servers: ReadonlySet<number>;
  starts: number;
  ends: number;
  reason: string;
}

/** The root servers inside a maintenance window at `at` (usage enforcement waits for them). */
export async function serversInMaintenance(db: Pick<Db, '$queryRaw'>, at: Date): Promise<Set<number>> {
  const rows = await db.$queryRaw<{ id: number }[]>`
    SELECT DISTINCT unnest(root_server_ids) AS id FROM maintenance_windows WHERE starts_at <= ${at} AND ends_at > ${at}`;
  return new Set(rows.map((r) => r.id));
}

/**
 * The windows not yet ended, cached per process. `version` is the value of maintenanceVersionKey
 * as the caller read it (the alert evaluation reads it with its own state, in one command).
 */
export function createMaintenanceCalendar(ctx: Pick<AppContext, 'db'>) {
  let cache: { version: string | null; loadedAt: number; windows: OpenWindow[] } | null = null;

  async function windows(version: string | null): Promise<OpenWindow[]> {
    if (cache && cache.version === version && Date.now() - cache.loadedAt < MAX_AGE_MS) return cache.windows;
    const loadedAt = Date.now();
    const rows = await ctx.db.maintenanceWindow.findMany({ where: { ends_at: { gt: new Date(loadedAt) } }, orderBy: { id: 'asc' } });
    const open = rows.map((w) => ({
      id: w.id,
      servers: new Set(w.root_server_ids),
      starts: w.starts_at.getTime(),
      ends: w.ends_at.getTime(),
      reason: w.reason,
    }));
    cache = { version, loadedAt, windows: open };
    return open;
  }

  return {
    windows,
    /** The window the server is in at `at` (ms), if any. */
    windowOf(open: readonly OpenWindow[], serverId: number, at: number): OpenWindow | undefined {
      return open.find((w) => w.starts <= at && at < w.ends && w.servers.has(serverId));
    },
  };
}

/** How a window is named in the alerts it silences. */
export function windowLabel(w: Pick<OpenWindow, 'id' | 'reason'>): string {
  return `maintenance window ${w.id}${w.reason ? ` (${w.reason.slice(0, 100)})` : ''}`;
}

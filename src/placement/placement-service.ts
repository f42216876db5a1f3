// Placement (issue 49, DESIGN §22): where a new tenant (a subscription's database, a standby) goes
// among the hosts holding a ready copy of its template. Filter (healthy, room for one more), score
// (least filled; ties to the host that waited longest), then take the best host's room under a
// transaction-scoped advisory lock of that host: the room is read again under the lock and the
// caller's reservation (the subscription's servers, the standby's row) is written before the lock
// goes, so two placements at once never both take a host's last room. The figures are read without
// a lock first, so placements on different hosts never wait on each other.
import type { Db, DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { explain, fillOf, type HostFigures, hostLabel, type Judged, judge, unhealthy } from './placement-capacity.js';
import { loadHosts, tenantDiskEstimate } from './placement-load.js';

/** Where a template is ready: an Odoo host (or none) with its PostgreSQL server. */
export interface Candidate {
  root_server_id: number | null;
  postgresql_server_id: number;
}

export interface Decision<C extends Candidate> {
  candidate: C;
  /** The host's figures as they were when it was taken (null: a template without an Odoo host). */
  host: HostFigures | null;
  /** Why, for the action log: the chosen host, then every host with its fill or why it was left out. */
  text: string;
}

/** No host of the pool fits: the message names each host and why it was left out. */
export class NoRoomError extends UserError {
  constructor(
    readonly what: string,
    readonly left: readonly { host: string; reason: string }[],
  ) {
    super(
      left.length === 0
        ? `No host has a ready copy of the template for ${what}`
        : `No host fits ${what}: ${left.map((l) => `${l.host}: ${l.reason}`).join('; ')}`,
    );
  }
}

/** A tenant being placed: what it is (for messages) and how its room is recorded. */
export interface PlaceRequest<C extends Candidate> {
  candidates: readonly C[];
  what: string;
  /** A subscription placed again is not counted where its earlier attempt put it. */
  exceptSubscription?: number;
  /** Records the tenant on the chosen host, in the transaction that holds the host's lock. */
  reserve: (tx: DbTx, chosen: C, host: HostFigures | null) => Promise<void>;
  /** How long `reserve` may hold the host's lock (Prisma's transaction timeout; default 5 s). */
  holdMs?: number;
}

/** The two-key advisory lock of one host's room (a key space of its own: session locks use one key). */
const lockHost = (tx: DbTx, hostId: number) =>
  tx.$queryRaw`SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext('svc.placement.host'), ${hostId}::int)) l`;

/** The lines of a decision: at most this many hosts each way ("and N more"). */
const LISTED = 20;

function listed(judged: readonly Judged[]): string[] {
  const lines = judged.slice(0, LISTED).map(explain);
  if (judged.length > LISTED) lines.push(`… and ${judged.length - LISTED} more`);
  return lines;
}

/**
 * The figures of a pool's hosts, kept per process (read again behind a placement once older than
 * FIGURES_MAX_AGE_MS, before it once older than FIGURES_STALE_MS) and brought up to date by
 * each placement with what it read under the chosen host's lock: reading 200 hosts' tenants for
 * every decision cost more than the decision's budget. A stale figure only orders the candidates
 * (the host's room and health are read again under its lock: a host found full or cordoned there is
 * passed over), and a pool that looks full is read again before the deployment is refused.
 */
const figureCache = new Map<string, { at: number; hosts: Map<number, HostFigures>; refreshing: boolean }>();
/**
 * What this process placed is in its figures at once; what other processes placed, after this
 * long. Reading a pool's figures holds a CPU for tens of ms: every 5 s it was the decisions' slowest percent.
 */
const FIGURES_MAX_AGE_MS = 30_000;
/** Older than this, a placement waits for the pool's figures; younger, they are read again behind it. */
const FIGURES_STALE_MS = 120_000;

async function readFigures(db: Db, key: string, all: readonly Candidate[], now: Date, except?: number) {
  const hosts = new Map((await loadHosts(db, all as (Candidate & { root_server_id: number })[], now, except)).map((h) => [h.id, h]));
  if (figureCache.size > 1000) figureCache.clear();
  figureCache.set(key, { at: Date.now(), hosts, refreshing: false });
  return hosts;
}

async function figuresOf(db: Db, key: string, all: readonly Candidate[], fresh: boolean, now: Date, except?: number) {
  const cached = figureCache.get(key);
  const age = cached ? Date.now() - cached.at : Number.POSITIVE_INFINITY;
  if (!fresh && cached && age < FIGURES_STALE_MS) {
    // Past their age, read again behind this placement (one reading at a time), not before it.
    if (age >= FIGURES_MAX_AGE_MS && !cached.refreshing) {
      cached.refreshing = true;
      readFigures(db, key, all, new Date()).catch(() => {
        cached.refreshing = false;
      });
    }
    return { hosts: cached.hosts, cached: true };
  }
  return { hosts: await readFigures(db, key, all, now, except), cached: false };
}

/** What a placement read of a host under its lock (and the tenant it added there) replaces in the cached figures. */
function noteHost(key: string, host: HostFigures, placed: boolean, now: Date) {
  const entry = figureCache.get(key);
  if (!entry) return;
  entry.hosts.set(
    host.id,
    placed ? { ...host, tenants: host.tenants + 1, tenants_since_sample: host.tenants_since_sample + 1, last_placed_at: now } : host,
  );
}

/** Places one tenant: the host chosen and recorded through `reserve`; a NoRoomError when none fits. */
export async function place<C extends Candidate>(db: Db, req: PlaceRequest<C>, now = new Date()): Promise<Decision<C>> {
  const withHost = req.candidates.filter((c): c is C & { root_server_id: number } => c.root_server_id !== null);
  if (withHost.length === 0) {
    const bare = req.candidates[0];
    if (!bare) throw new NoRoomError(req.what, []);
    // A template without an Odoo host lives on its PostgreSQL server only: nothing to choose.
    await db.$transaction((tx) => req.reserve(tx, bare, null));
    return { candidate: bare, host: null, text: `on PostgreSQL server ${bare.postgresql_server_id} (the template has no Odoo host)` };
  }
  const tenantDisk = await tenantDiskEstimate(
    db,
    withHost.map((c) => c.root_server_id),
  );
  const key = withHost.map((c) => c.root_server_id).join(',');
  // Hosts found full under their lock (another placement took the room meanwhile), with why.
  const lost = new Map<number, Judged>();
  let fresh = false;
  for (;;) {
    const open = withHost.filter((c) => !lost.has(c.root_server_id));
    const figures = await figuresOf(db, key, withHost, fresh, now, req.exceptSubscription);
    const { fits, left } = judge(
      open.flatMap((c) => figures.hosts.get(c.root_server_id) ?? []),
      tenantDisk,
    );
    const out = [...left, ...lost.values()];
    const best = fits[0];
    if (!best && figures.cached) {
      // Before refusing: the pool as it is now (a host uncordoned or given room meanwhile).
      fresh = true;
      lost.clear();
      continue;
    }
    if (!best)
      throw new NoRoomError(
        req.what,
        out.map((j) => ({ host: hostLabel(j.host), reason: j.reason! })),
      );
    const chosen = open.find((c) => c.root_server_id === best.host.id)!;
    const taken = await db.$transaction(
      async (tx) => {
        await lockHost(tx, best.host.id);
        const [again] = await loadHosts(tx, [chosen], now, req.exceptSubscription);
        const judged = judge(again ? [again] : [], tenantDisk);
        if (judged.fits.length === 0) return judged.left[0] ?? null;
        await req.reserve(tx, chosen, again!);
        return judged.fits[0]!;
      },
      req.holdMs ? { timeout: req.holdMs } : undefined,
    );
    if (taken) noteHost(key, taken.host, taken.reason === null, now);
    if (taken && taken.reason === null) {
      const text = [
        `${req.what}: ${hostLabel(taken.host)} — the least filled of ${fits.length} host(s) that fit (fill ${(taken.fill.fill * 100).toFixed(1)} %, a new tenant counted at ${(tenantDisk / 1024 ** 2).toFixed(0)} MB of disk)`,
        ...listed(fits),
        ...listed(out),
      ].join('\n');
      return { candidate: chosen, host: taken.host, text };
    }
    lost.set(best.host.id, taken ?? { ...best, reason: 'gone' });
  }
}

/**
 * The hosts of `candidates` a ready standby may be taken from, least filled first: healthy and not
 * over capacity (a standby is counted on its host already, so taking it needs no new room).
 */
export async function standbyHosts(db: Db | DbTx, candidates: readonly Candidate[], now = new Date()): Promise<number[]> {
  const withHost = candidates.filter((c): c is Candidate & { root_server_id: number } => c.root_server_id !== null);
  if (withHost.length === 0) return [];
  const tenantDisk = await tenantDiskEstimate(
    db,
    withHost.map((c) => c.root_server_id),
  );
  return (await loadHosts(db, withHost, now))
    .filter((h) => unhealthy(h) === null)
    .map((h) => ({ id: h.id, fill: fillOf(h, tenantDisk).fill }))
    .filter((h) => h.fill <= 1)
    .sort((a, b) => a.fill - b.fill || a.id - b.id)
    .map((h) => h.id);
}

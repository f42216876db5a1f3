// A host's capacity and how full it is (issue 49, DESIGN §22), derived without touching the host:
// memory from what setup_odoo read (else the newest monitoring sample), disk from the newest
// monitoring sample, tenants from the memory; an operator's capacity_* fields win over each
// derived figure. Pure functions: the figures come from placement-load.ts.

const MB = 1024 * 1024;
/**
 * What one tenant holds of a host's memory, on average: every Odoo worker keeps the registry of each
 * database it served (tens of MB), and a tenant's requests go to every worker in turn.
 */
export const TENANT_MEMORY_BYTES = 64 * MB;
/** The share of a host's memory for Odoo's tenants (the rest: the OS, Caddy, svc's own steps). */
export const MEMORY_FOR_TENANTS = 0.8;
/** The share of a host's disk kept free: a host is full before its disk is. */
export const DISK_KEPT_FREE = 0.1;
/** A new tenant's disk before any tenant of the pool was measured (the usage round measures the rest). */
export const DEFAULT_TENANT_DISK_BYTES = 256 * MB;
/** A host whose capacity nobody knows (no facts, no sample, no operator figure) is scored as if it held this many. */
export const UNKNOWN_CAPACITY_TENANTS = 100;

/** What placement knows of one host: its record, its newest sample, what is placed on it. */
export interface HostFigures {
  id: number;
  name: string | null;
  ip: string;
  postgresql_server_id: number;
  state: string;
  odoo_state: string;
  server_state: string;
  cordoned_at: Date | null;
  cordon_reason: string | null;
  capacity_tenants: number | null;
  capacity_memory_bytes: bigint | null;
  capacity_disk_bytes: bigint | null;
  memory_bytes: bigint | null;
  /** The newest monitoring sample (null: never monitored). */
  sample: { ram_total_bytes: bigint; disk_total_bytes: bigint; disk_used_bytes: bigint; at: Date } | null;
  /** Subscriptions living on it (or being deployed there), standbys on it and moves to it not switched yet. */
  tenants: number;
  /** Those placed after the newest sample was taken: their disk is not in the sample yet. */
  tenants_since_sample: number;
  /** When a tenant was last placed on it (ties go to the host that waited longest). */
  last_placed_at: Date | null;
  /** The maintenance window it is in now, described (null: none). */
  maintenance: string | null;
}

export interface Capacity {
  /** How many tenants fit (null: unknown), and from what. */
  tenants: number | null;
  tenants_from: 'operator' | 'memory' | 'unknown';
  memory_bytes: number | null;
  memory_from: 'operator' | 'facts' | 'sample' | 'unknown';
  /** Disk usable by tenants (total less what is kept free; null: unknown). */
  disk_bytes: number | null;
  disk_from: 'operator' | 'sample' | 'unknown';
}

export interface Fill {
  capacity: Capacity;
  /** Disk used now, counting the tenants placed since the sample at the estimate each (null: unknown). */
  disk_used_bytes: number | null;
  /** The fullest of its dimensions, 0..1 (and above when over capacity). */
  fill: number;
  /** What one more tenant would leave: a reason when it does not fit, null when it does. */
  full: string | null;
}

const n = (v: bigint | number | null | undefined) => (v === null || v === undefined ? null : Number(v));

/** The host's capacity from the operator's figures, its facts and its newest sample. */
export function capacityOf(h: HostFigures): Capacity {
  const operatorMemory = n(h.capacity_memory_bytes);
  const facts = n(h.memory_bytes) ?? n(h.sample?.ram_total_bytes);
  const memory = operatorMemory ?? (facts === null ? null : Math.floor(facts * MEMORY_FOR_TENANTS));
  const memory_from = operatorMemory !== null ? 'operator' : h.memory_bytes !== null ? 'facts' : h.sample ? 'sample' : 'unknown';
  const byMemory = memory === null ? null : Math.floor(memory / TENANT_MEMORY_BYTES);
  const tenants = h.capacity_tenants ?? byMemory;
  const operatorDisk = n(h.capacity_disk_bytes);
  const totalDisk = operatorDisk ?? n(h.sample?.disk_total_bytes);
  return {
    tenants,
    tenants_from: h.capacity_tenants !== null ? 'operator' : byMemory !== null ? 'memory' : 'unknown',
    memory_bytes: memory,
    memory_from,
    disk_bytes: totalDisk === null ? null : Math.floor(totalDisk * (1 - DISK_KEPT_FREE)),
    disk_from: operatorDisk !== null ? 'operator' : h.sample ? 'sample' : 'unknown',
  };
}

const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GB`;

/** How full the host is, and whether one more tenant of `tenantDisk` bytes fits. */
export function fillOf(h: HostFigures, tenantDisk: number): Fill {
  const capacity = capacityOf(h);
  // The sample holds the disk of everything but what was placed after it; with no sample, only tenants are counted.
  const disk_used_bytes = h.sample
    ? Number(h.sample.disk_used_bytes) + h.tenants_since_sample * tenantDisk
    : capacity.disk_bytes === null
      ? null
      : h.tenants * tenantDisk;
  const parts: number[] = [];
  let full: string | null = null;
  if (capacity.tenants !== null) {
    parts.push(capacity.tenants === 0 ? Number.POSITIVE_INFINITY : h.tenants / capacity.tenants);
    if (h.tenants + 1 > capacity.tenants) {
      full = `full: ${h.tenants} tenant(s) of ${capacity.tenants} (${capacity.tenants_from === 'operator' ? 'set by an operator' : `${gb(capacity.memory_bytes!)} of memory for tenants at ${TENANT_MEMORY_BYTES / MB} MB each`})`;
    }
  } else {
    parts.push(h.tenants / UNKNOWN_CAPACITY_TENANTS);
  }
  if (capacity.disk_bytes !== null && disk_used_bytes !== null) {
    parts.push(capacity.disk_bytes === 0 ? Number.POSITIVE_INFINITY : disk_used_bytes / capacity.disk_bytes);
    if (!full && disk_used_bytes + tenantDisk > capacity.disk_bytes) {
      full = `disk full: ${gb(disk_used_bytes)} used of ${gb(capacity.disk_bytes)} usable (${DISK_KEPT_FREE * 100} % kept free), a new tenant needs about ${gb(tenantDisk)}`;
    }
  }
  return { capacity, disk_used_bytes, fill: Math.max(...parts), full };
}

/** How many more tenants of `tenantDisk` bytes fit on the host (null: no limit known). */
export function roomOf(h: HostFigures, tenantDisk: number): number | null {
  const { capacity, disk_used_bytes } = fillOf(h, tenantDisk);
  const limits: number[] = [];
  if (capacity.tenants !== null) limits.push(capacity.tenants - h.tenants);
  if (capacity.disk_bytes !== null && disk_used_bytes !== null && tenantDisk > 0) {
    limits.push(Math.floor((capacity.disk_bytes - disk_used_bytes) / tenantDisk));
  }
  return limits.length === 0 ? null : Math.max(0, Math.min(...limits));
}

/** Why the host gets no new tenant whatever its room (null: healthy). */
export function unhealthy(h: HostFigures): string | null {
  if (h.state === 'cancel') return 'the root server is cancelled';
  if (h.cordoned_at) return `cordoned since ${h.cordoned_at.toISOString()}${h.cordon_reason ? ` (${h.cordon_reason})` : ''}`;
  // A host where svc never set up Odoo holds filestores only (a template's host without svc's Odoo).
  if (h.odoo_state !== 'not_installed' && h.odoo_state !== 'running') return `Odoo is ${h.odoo_state}`;
  if (h.server_state === 'offline') return 'the server is offline (monitoring)';
  if (h.maintenance) return `in ${h.maintenance}`;
  return null;
}

export interface Judged {
  host: HostFigures;
  fill: Fill;
  /** Why it was left out; null: it fits. */
  reason: string | null;
}

/** Filters the hosts (healthy, with room for one more) and scores the rest: least filled first, ties to the host that waited longest. */
export function judge(hosts: readonly HostFigures[], tenantDisk: number): { fits: Judged[]; left: Judged[] } {
  const all = hosts.map((host) => {
    const fill = fillOf(host, tenantDisk);
    return { host, fill, reason: unhealthy(host) ?? fill.full };
  });
  const fits = all.filter((j) => j.reason === null).sort(byScore);
  return { fits, left: all.filter((j) => j.reason !== null) };
}

/** Fills closer than this are a tie (one tenant on a large host is about 0.002). */
const TIE = 1e-9;

function byScore(a: Judged, b: Judged) {
  if (Math.abs(a.fill.fill - b.fill.fill) > TIE) return a.fill.fill - b.fill.fill;
  const at = (j: Judged) => j.host.last_placed_at?.getTime() ?? 0;
  return at(a) - at(b) || a.host.id - b.host.id;
}

/** A host as messages name it. */
export const hostLabel = (h: Pick<HostFigures, 'id' | 'name' | 'ip'>) => `root server ${h.id}${h.name ? ` ${h.name}` : ''} (${h.ip})`;

/** One line per host: the choice's why, for the action log. */
export function explain(j: Judged): string {
  const c = j.fill.capacity;
  const cap = c.tenants === null ? 'capacity unknown' : `${j.host.tenants}/${c.tenants} tenants`;
  const disk = c.disk_bytes !== null && j.fill.disk_used_bytes !== null ? `, disk ${gb(j.fill.disk_used_bytes)}/${gb(c.disk_bytes)}` : '';
  return `${hostLabel(j.host)}: ${cap}${disk}, fill ${(j.fill.fill * 100).toFixed(1)} %${j.reason ? ` — left out: ${j.reason}` : ''}`;
}

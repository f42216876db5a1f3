// A subscription's usage against its package limits: the measures, and the state they make
// (warning at 80 % of any limit, exceeded at 100 %). Pure: the usage round decides with it, and the
// lifecycle run decides with it whether an over_limit suspension can be lifted.
import type { UsageState } from '../generated/prisma/enums.js';

/** What the last round measured; a measure it could not take is absent, with its reason in `missing`. */
export interface Usage {
  db_size_bytes: number | null;
  /** null: the template names no Odoo host (no filestore to measure), or see missing.filestore. */
  filestore_bytes: number | null;
  active_users: number | null;
  record_counts: Record<string, number>;
  measured_at: string;
  /** measure (db_size, filestore, active_users, model:<name>) → why it is missing */
  missing: Record<string, string>;
}

interface UsageLimits {
  storage_limit_gb: number;
  user_limit: number;
  model_limits: unknown;
}

/** One measure against its limit. */
export interface Measure {
  measure: string;
  value: number;
  limit: number;
  /** Not measured: the tenant's own database withheld it round after round (counted as exceeded). */
  withheldRounds?: number;
}

const GIB = 1024 ** 3;
const WARNING_RATIO = 0.8;

/** Every measure that has both a value and a limit (0 or empty: no limit); a missing one is left out. */
function measuresOf(limits: UsageLimits, usage: Usage): Measure[] {
  const out: Measure[] = [];
  if (limits.storage_limit_gb > 0 && usage.db_size_bytes !== null && !usage.missing.filestore) {
    out.push({ measure: 'storage', value: usage.db_size_bytes + (usage.filestore_bytes ?? 0), limit: limits.storage_limit_gb * GIB });
  }
  if (limits.user_limit > 0 && usage.active_users !== null) {
    out.push({ measure: 'active_users', value: usage.active_users, limit: limits.user_limit });
  }
  const models = (limits.model_limits ?? {}) as Record<string, number>;
  for (const [model, limit] of Object.entries(models)) {
    const value = usage.record_counts[model];
    if (limit > 0 && value !== undefined) out.push({ measure: `model:${model}`, value, limit });
  }
  return out;
}

/** The state the usage makes, and the measure nearest to (or furthest over) its limit. */
export function usageStateOf(limits: UsageLimits, usage: Usage): { state: UsageState; worst: Measure | null } {
  let worst: Measure | null = null;
  for (const m of measuresOf(limits, usage)) if (!worst || m.value / m.limit > worst.value / worst.limit) worst = m;
  const ratio = worst ? worst.value / worst.limit : 0;
  return { state: ratio >= 1 ? 'exceeded' : ratio >= WARNING_RATIO ? 'warning' : 'ok', worst };
}

/**
 * The limited measures the round could not take. While there are any, the state cannot fall and an
 * over_limit suspension is not lifted: an unreachable host or database proves no usage went down.
 * (A limited model whose table does not exist holds no records: that is a measure, of zero.)
 */
export function unjudgedMeasures(limits: UsageLimits, usage: Usage): string[] {
  const out: string[] = [];
  if (limits.storage_limit_gb > 0 && (usage.db_size_bytes === null || usage.missing.filestore)) out.push('storage');
  if (limits.user_limit > 0 && usage.active_users === null) out.push('active_users');
  for (const [model, limit] of Object.entries((limits.model_limits ?? {}) as Record<string, number>)) {
    const why = usage.missing[`model:${model}`];
    if (limit > 0 && usage.record_counts[model] === undefined && !why?.startsWith('no table')) out.push(`model:${model}`);
  }
  return out;
}

const RANK: Record<UsageState, number> = { ok: 0, warning: 1, exceeded: 2 };
export const rises = (from: UsageState, to: UsageState) => RANK[to] > RANK[from];

/**
 * A tenant can make its own counts fail (lock its tables, turn them into views) and a missing
 * measure lowers nothing: so after this many rounds in a row in which a limited count of this tenant
 * alone was missing (its PostgreSQL server measured, the other tenants there counted), it counts as
 * exceeded, and the notices and enforcement follow as for any exceeded limit.
 */
export const WITHHELD_ROUNDS_LIMIT = 3;

/** The usage state with the withheld measures judged: exceeded once they were withheld long enough. */
export function judgedUsageState(
  limits: UsageLimits,
  usage: Usage,
  withheld: { measures: string[]; rounds: number },
): { state: UsageState; worst: Measure | null } {
  const measured = usageStateOf(limits, usage);
  if (withheld.rounds < WITHHELD_ROUNDS_LIMIT || withheld.measures.length === 0) return measured;
  const measure = withheld.measures[0]!;
  const limit =
    measure === 'active_users'
      ? limits.user_limit
      : ((limits.model_limits ?? {}) as Record<string, number>)[measure.slice('model:'.length)]!;
  return { state: 'exceeded', worst: { measure, value: limit, limit, withheldRounds: withheld.rounds } };
}

/** "12 active users of 10 allowed", "2.4 GiB of storage of 2 GiB allowed" */
export function describeMeasure(m: Measure): string {
  if (m.withheldRounds) {
    const what = m.measure === 'active_users' ? 'active users' : `${m.measure.slice('model:'.length)} records`;
    return `${what} (limit ${m.limit}) could not be counted in ${m.withheldRounds} rounds in a row: the instance's own database withheld the count, so the limit counts as exceeded`;
  }
  if (m.measure === 'storage') return `${(m.value / GIB).toFixed(2)} GiB of storage (database and files) of ${m.limit / GIB} GiB allowed`;
  if (m.measure === 'active_users') return `${m.value} active users of ${m.limit} allowed`;
  return `${m.value} ${m.measure.slice('model:'.length)} records of ${m.limit} allowed`;
}

// Rule matching: the active rules, kept in memory per process and reloaded when the rules version
// in Redis moved (every rule write bumps it; at the latest after a minute), so a change or a
// deactivation takes effect on the next poll of every worker; which of them watch a server, and
// whether a sample meets a rule.
import type { AppContext } from '../context.js';
import type { AlertMetric } from '../generated/prisma/enums.js';
import { rulesVersionKey } from './alert-state.js';

/** The active rules are reloaded at least this often, even if a version bump was lost. */
const RULES_MAX_AGE_MS = 60_000;

export type ValueMetric = Exclude<AlertMetric, 'server_offline'>;

export interface Rule {
  id: number;
  name: string;
  metric: AlertMetric;
  threshold: number | null;
  duration_seconds: number;
  notify_resolved: boolean;
  repeat_minutes: number;
  /** null = every monitored server */
  servers: Set<number> | null;
  /** Changes with every write of the rule: a pending count started under another version restarts. */
  version: number;
}

/** What a notice needs of a rule. */
export type RuleFacts = Pick<Rule, 'id' | 'name' | 'metric' | 'threshold' | 'duration_seconds' | 'notify_resolved' | 'repeat_minutes'>;

/** The active rules as loaded: server_offline ones first, and their ids. */
export interface ActiveRules {
  list: Rule[];
  offline: Set<number>;
}

export const meets = (value: number, threshold: number | null) => threshold !== null && value >= threshold;

/** The rules that watch the server. */
export const rulesOf = (rules: ActiveRules, serverId: number) => rules.list.filter((r) => r.servers === null || r.servers.has(serverId));

export function createRuleCache(ctx: Pick<AppContext, 'db' | 'queues' | 'redis'>) {
  const { db, redis } = ctx;
  const versionKey = rulesVersionKey(ctx.queues.prefix);
  let cache: { version: string; loadedAt: number; rules: ActiveRules } | null = null;

  return {
    /** The Redis key of the rules version (read with the servers' states, in one command). */
    versionKey,
    /** The active rules under that version. */
    async activeRules(version: string | null): Promise<ActiveRules> {
      if (version === null) {
        // No version yet (or Redis lost it): start one, so every process agrees from now on.
        await redis.set(versionKey, String(Date.now()), 'NX');
        version = (await redis.get(versionKey)) ?? '';
      }
      if (cache && cache.version === version && Date.now() - cache.loadedAt < RULES_MAX_AGE_MS) return cache.rules;
      const rows = await db.alertRule.findMany({ where: { active: true }, orderBy: { id: 'asc' } });
      const list = rows.map((r) => ({
        id: r.id,
        name: r.name,
        metric: r.metric,
        threshold: r.threshold,
        duration_seconds: r.duration_seconds,
        notify_resolved: r.notify_resolved,
        repeat_minutes: r.repeat_minutes,
        servers: r.root_server_ids.length > 0 ? new Set(r.root_server_ids) : null,
        version: r.updated_at.getTime(),
      }));
      // server_offline rules first: whether a server's other alerts are held back depends on them.
      const rules: ActiveRules = {
        list: list.sort((a, b) => Number(b.metric === 'server_offline') - Number(a.metric === 'server_offline')),
        offline: new Set(list.filter((r) => r.metric === 'server_offline').map((r) => r.id)),
      };
      cache = { version, loadedAt: Date.now(), rules };
      return rules;
    },
  };
}

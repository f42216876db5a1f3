// Durations: duration_seconds is sustained, the rule fires once the condition has held on every
// poll for that long. While Redis holds a server's state the count is kept there (`s:<rule>`);
// when it is missing (Redis lost it, or a quiet server's hash expired) it is rebuilt here from
// PostgreSQL with one indexed range scan of the server's monitor log (and its firing alerts).
// server_offline counts from the first poll that saw the server offline (after a rebuild: from
// the last good poll, or the server's creation).
import type { AppContext } from '../context.js';
import type { MonitorPollEvent } from '../feature.js';
import { Prisma } from '../generated/prisma/client.js';
import { meets, type Rule, type ValueMetric } from './alert-rules.js';

interface SampleRow {
  created_at: Date;
  cpu_percent: number;
  ram_percent: number;
  disk_percent: number;
  load_1: number;
}

/** How long (ms) the condition has held without a break, judged on samples newest first; -1 when it does not hold. */
export function sustainedMs(samples: readonly SampleRow[], metric: ValueMetric, threshold: number): number {
  const newest = samples[0];
  if (!newest || !meets(newest[metric], threshold)) return -1;
  let start = newest.created_at.getTime();
  for (const s of samples) {
    if (!meets(s[metric], threshold)) break;
    start = s.created_at.getTime();
  }
  return newest.created_at.getTime() - start;
}

export function createStateRebuild(ctx: Pick<AppContext, 'db'>) {
  const { db } = ctx;

  /** The server's samples of the last `seconds` before its newest, newest first, plus the one before them. */
  function window(serverId: number, seconds: number) {
    const since = Prisma.sql`(SELECT created_at FROM root_server_monitor_logs WHERE root_server_id = ${serverId}
      ORDER BY created_at DESC LIMIT 1) - make_interval(secs => ${seconds})`;
    return db.$queryRaw<SampleRow[]>`
      (SELECT created_at, cpu_percent, ram_percent, disk_percent, load_1 FROM root_server_monitor_logs
        WHERE root_server_id = ${serverId} AND created_at >= ${since} ORDER BY created_at DESC)
      UNION ALL
      (SELECT created_at, cpu_percent, ram_percent, disk_percent, load_1 FROM root_server_monitor_logs
        WHERE root_server_id = ${serverId} AND created_at < ${since} ORDER BY created_at DESC LIMIT 1)`;
  }

  /** Since when the server is failing: its last good poll, else its creation (ms since the epoch). */
  async function failingSince(serverId: number): Promise<number> {
    const [row] = await db.$queryRaw<{ at: Date | null }[]>`
      SELECT coalesce(
        (SELECT created_at FROM root_server_monitor_logs WHERE root_server_id = ${serverId} ORDER BY created_at DESC LIMIT 1),
        (SELECT created_at FROM root_servers WHERE id = ${serverId})) AS at`;
    return row?.at?.getTime() ?? 0;
  }

  /** The server's state rebuilt from PostgreSQL: its firing alerts (when last told), and since when its duration rules hold. */
  return async function rebuild(event: MonitorPollEvent, rules: Rule[]): Promise<Record<string, string>> {
    const serverId = event.root_server_id;
    const state: Record<string, string> = { init: '1' };
    const firing = await db.alert.findMany({
      where: { root_server_id: serverId, state: 'firing' },
      select: { rule_id: true, last_notice_at: true },
    });
    for (const a of firing) state[`f:${a.rule_id}`] = String(a.last_notice_at?.getTime() ?? 0);
    const pending = rules.filter((r) => r.duration_seconds > 0 && !state[`f:${r.id}`]);
    const valueRules = pending.filter((r) => r.metric !== 'server_offline');
    if (valueRules.length > 0 && event.metrics) {
      const samples = await window(serverId, Math.max(...valueRules.map((r) => r.duration_seconds)));
      for (const r of valueRules) {
        const held = sustainedMs(samples, r.metric as ValueMetric, r.threshold ?? Number.POSITIVE_INFINITY);
        if (held >= 0) state[`s:${r.id}`] = `${event.at.getTime() - held}:${r.version}`;
      }
    }
    if (event.server_state === 'offline' && pending.some((r) => r.metric === 'server_offline')) {
      const since = await failingSince(serverId);
      for (const r of pending) if (r.metric === 'server_offline') state[`s:${r.id}`] = `${since}:${r.version}`;
    }
    return state;
  };
}

// What the notices of an alert say (chatter, push, mail): the title names the server (name, else
// ip), the metric, the value and the threshold; a resolve notice says how long the alert lasted.
import type { AlertMetric } from '../generated/prisma/enums.js';

export interface AlertFacts {
  metric: AlertMetric;
  threshold: number | null;
  value: number;
  resolved_value: number | null;
  started_at: Date;
  resolved_at: Date | null;
  duration_seconds: number;
  rule_name: string;
  /** A fire notice told late: what held it back until now (a maintenance window, its server offline). */
  held_reason?: string | null;
  /** Why it resolved when no sample did (monitoring stopped, the rule no longer watches the server). */
  resolved_reason?: string | null;
}

export interface Notice {
  title: string;
  message: string;
}

const UNITS: Record<AlertMetric, string> = {
  cpu_percent: ' %',
  ram_percent: ' %',
  disk_percent: ' %',
  load_1: '',
  server_offline: '',
};
const LABELS: Record<AlertMetric, string> = {
  cpu_percent: 'CPU',
  ram_percent: 'RAM',
  disk_percent: 'disk',
  load_1: 'load (1 min)',
  server_offline: 'offline',
};

const round = (n: number) => String(Math.round(n * 100) / 100);

/** "2 h 5 min", "4 min 10 s", "12 s". */
export function formatDuration(ms: number): string {
  let s = Math.max(0, Math.round(ms / 1000));
  const parts: string[] = [];
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['min', 60],
  ] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)} ${unit}`);
      s %= size;
    }
  }
  if (s > 0 || parts.length === 0) parts.push(`${s} s`);
  return parts.slice(0, 2).join(' ');
}

export function serverLabel(server: { name: string | null; ip: string }): string {
  return server.name?.trim() || server.ip;
}

export function fireNotice(server: string, a: AlertFacts): Notice {
  const notice = openNotice(server, a);
  if (!a.held_reason) return notice;
  return { title: notice.title, message: `${notice.message} Its notice was held back until now (${a.held_reason}).` };
}

/** A firing alert told again (repeat_minutes): the fire notice, saying since when. */
export function repeatNotice(server: string, a: AlertFacts, repeat: number, at: Date): Notice {
  const notice = openNotice(server, a);
  const firing = formatDuration(at.getTime() - a.started_at.getTime());
  return {
    title: `${notice.title}, still firing after ${firing} (reminder ${repeat})`,
    message: `${notice.message} Still firing after ${firing} (reminder ${repeat}).`,
  };
}

function openNotice(server: string, a: AlertFacts): Notice {
  const sustained = a.duration_seconds > 0 ? ` for ${formatDuration(a.duration_seconds * 1000)}` : '';
  if (a.metric === 'server_offline') {
    return {
      title: `[ALERT] ${server}: server_offline (${round(a.value)} failed polls in a row)${sustained}`,
      message: `Rule "${a.rule_name}": ${server} does not answer the monitoring polls (${round(a.value)} failed in a row) since about ${a.started_at.toISOString()}.`,
    };
  }
  const unit = UNITS[a.metric];
  return {
    title: `[ALERT] ${server}: ${a.metric} ${round(a.value)}${unit} >= ${round(a.threshold ?? 0)}${unit}${sustained}`,
    message: `Rule "${a.rule_name}": ${LABELS[a.metric]} of ${server} is ${round(a.value)}${unit}, at or above the threshold of ${round(a.threshold ?? 0)}${unit}${sustained}. Since ${a.started_at.toISOString()}.`,
  };
}

export function resolveNotice(server: string, a: AlertFacts): Notice {
  const lasted = formatDuration((a.resolved_at ?? new Date()).getTime() - a.started_at.getTime());
  if (a.resolved_value === null && a.resolved_reason) {
    return {
      title: `[RESOLVED] ${server}: ${a.metric}, ${a.resolved_reason}, lasted ${lasted}`,
      message: `Rule "${a.rule_name}": the alert on ${server} was resolved: ${a.resolved_reason}. The alert lasted ${lasted} (since ${a.started_at.toISOString()}).`,
    };
  }
  if (a.metric === 'server_offline' && a.resolved_value === null) {
    return {
      title: `[RESOLVED] ${server}: server_offline no longer watched, lasted ${lasted}`,
      message: `Rule "${a.rule_name}" no longer watches ${server} (deactivated or changed). The alert lasted ${lasted}.`,
    };
  }
  if (a.metric === 'server_offline') {
    return {
      title: `[RESOLVED] ${server}: server_offline, back online after ${lasted}`,
      message: `Rule "${a.rule_name}": ${server} answers the monitoring polls again. The alert lasted ${lasted}.`,
    };
  }
  const unit = UNITS[a.metric];
  const now = a.resolved_value === null ? 'no longer watched' : `${round(a.resolved_value)}${unit}`;
  return {
    title: `[RESOLVED] ${server}: ${a.metric} ${now} (threshold ${round(a.threshold ?? 0)}${unit}), lasted ${lasted}`,
    message:
      a.resolved_value === null
        ? `Rule "${a.rule_name}" no longer watches ${server} (deactivated or changed). The alert lasted ${lasted} (since ${a.started_at.toISOString()}).`
        : `Rule "${a.rule_name}": ${LABELS[a.metric]} of ${server} is ${now}, below the threshold of ${round(a.threshold ?? 0)}${unit}. The alert lasted ${lasted} (since ${a.started_at.toISOString()}).`,
  };
}

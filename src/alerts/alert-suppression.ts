// Root-cause suppression: notices are held back while the server is inside a maintenance window,
// and, for its other alerts, while a server_offline alert of the server is firing and was told
// (one notice per outage, not one per rule). An alert opened then is recorded `silenced` and told
// only if it still fires once nothing holds it back; no repeat or resolve notice goes out meanwhile.
import { type OpenWindow, windowLabel } from '../maintenance/index.js';

/** When a firing alert was last told, from its state field: 0 = never (held back so far); a legacy '1' counts as told. */
export const toldAt = (field: string | undefined) => Number(field ?? 0) || 0;

/**
 * What holds back the notices of a rule's alert on a server now, judged on the server's state
 * (its `f:<rule>` fields) as it is when asked: the maintenance window it is in, or another told
 * server_offline alert; null when nothing does.
 */
export function holdBack(maintenance: OpenWindow | undefined, state: Record<string, string>, offlineRules: ReadonlySet<number>) {
  return (ruleId: number): string | null => {
    if (maintenance) return windowLabel(maintenance);
    for (const [field, value] of Object.entries(state)) {
      if (!field.startsWith('f:')) continue;
      const other = Number(field.slice(2));
      if (other !== ruleId && offlineRules.has(other) && toldAt(value) > 0) return 'server_offline is firing';
    }
    return null;
  };
}

// How many backups of a tenant the backup server keeps: backup_keep_daily, _weekly and _monthly
// (svc's backup server prunes with restic forget --keep-daily/weekly/monthly). A package supplies
// them to its subscriptions; each can be changed on either. All three at 0 would keep nothing (a
// backup pruned as soon as it is made): refused, on create and on PATCH (judged on the record as
// the PATCH would leave it).
import { ValidationError } from '../core/errors.js';

export const RETENTION_DEFAULTS = { backup_keep_daily: 7, backup_keep_weekly: 4, backup_keep_monthly: 3 } as const;
const FIELDS = Object.keys(RETENTION_DEFAULTS) as (keyof typeof RETENTION_DEFAULTS)[];

type Data = Record<string, unknown>;

/** The record as a write would leave it: `before` (or the defaults, for a create) with the fields sent. */
export function refuseNoRetention(before: Data | null, data: Data) {
  if (!FIELDS.some((f) => data[f] !== undefined)) return;
  const value = (f: (typeof FIELDS)[number]) => Number(data[f] ?? before?.[f] ?? RETENTION_DEFAULTS[f]);
  if (FIELDS.some((f) => value(f) > 0)) return;
  throw new ValidationError(
    'backup_keep_daily, backup_keep_weekly and backup_keep_monthly cannot all be 0: no backup would be kept',
    FIELDS.map((f) => ({ field: `body.${f}`, message: 'at least one of the three must be above 0' })),
  );
}

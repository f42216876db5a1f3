// Trial packages: the record operations, and the rule that a package can deploy. An auto-run
// package deploys every verified trial at once from its database template, so one without a
// template would tell each visitor "your trial is being set up" and then fail: it is refused when
// written, on create and on PATCH (judged on the record as the PATCH would leave it). So is a
// package that would keep no backup (subscription-retention.ts).
import type { AppContext } from '../context.js';
import { ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { refuseNoRetention } from '../subscriptions/index.js';
import { trialPackageModel } from './trial-models.js';

type Data = Record<string, unknown>;

function refuseUndeployable(pkg: Data) {
  if (pkg.auto_run_subscription !== true || (pkg.database_template_id ?? null) !== null) return;
  throw new ValidationError('An auto-run package needs a database template: its trials are deployed from it', [
    {
      field: 'body.database_template_id',
      message: 'required while auto_run_subscription is true (trials are deployed from this template)',
    },
  ]);
}

export function createTrialPackageService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  return createRecordService(ctx, trialPackageModel, {
    async prepareCreate(_tx, data) {
      refuseUndeployable(data);
      refuseNoRetention(null, data);
      return data;
    },
    async prepareUpdate(_tx, before, data) {
      refuseUndeployable({ ...before, ...Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)) });
      refuseNoRetention(before, data);
      return undefined;
    },
  });
}

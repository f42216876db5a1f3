// Trial packages: the record operations, and the rule that a package can deploy. An auto-run
// package deploys every verified trial at once from its database template, so one without a
// template would tell each visitor "your trial is being set up" and then fail: it is refused when
// written, on create and on PATCH (judged on the record as the PATCH would leave it). So is a
// package that would keep no backup (subscription-retention.ts). Its `packages` are Odoo modules:
// one its template's host does not have, or its built template lacks, is refused (400 naming it;
// src/odoo/odoo-modules.ts).
import type { AppContext } from '../context.js';
import { ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { assertPackageModules } from '../odoo/index.js';
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

/** The modules and the template of a package as it will be written. */
const modulesOf = (pkg: Data) => ({
  packages: (pkg.packages as string[] | undefined) ?? [],
  database_template_id: (pkg.database_template_id as number | null | undefined) ?? null,
});

export function createTrialPackageService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  return createRecordService(ctx, trialPackageModel, {
    async prepareCreate(tx, data) {
      refuseUndeployable(data);
      refuseNoRetention(null, data);
      await assertPackageModules(tx, modulesOf(data));
      return data;
    },
    async prepareUpdate(tx, before, data) {
      const next = { ...before, ...Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)) };
      refuseUndeployable(next);
      refuseNoRetention(before, data);
      // Judged when the modules or the template change (a template rebuilt since does not block a rename).
      if ('packages' in data || ('database_template_id' in data && data.database_template_id !== before.database_template_id)) {
        await assertPackageModules(tx, modulesOf(next));
      }
      return undefined;
    },
  });
}

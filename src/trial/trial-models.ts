import { defineModel } from '../core/models.js';

export const trialPackageModel = defineModel({
  name: 'svc.subscription.trial.package',
  delegate: 'trialPackage',
  table: 'trial_packages',
  resource: 'trial-packages',
  readGroup: 'user',
  search: ['name', 'url_string'],
  tracked: ['name', 'url_string', 'auto_run_subscription', 'database_template_id', 'active', 'standby_pool_size'],
});

/** The fields marked (T) are tracked. */
export const trialRequestModel = defineModel({
  name: 'svc.subscription.trial.request',
  delegate: 'trialRequest',
  table: 'trial_requests',
  resource: 'trial-requests',
  readGroup: 'user',
  search: ['name', 'company_name', 'email'],
  sortable: ['name', 'company_name', 'state'],
  tracked: ['name', 'company_name', 'email', 'mobile', 'company_size', 'trial_package_id', 'partner_id', 'subscription_id', 'state'],
});

export const trialVerificationModel = defineModel({
  name: 'svc.subscription.trial.otp',
  delegate: 'trialVerification',
  table: 'trial_verifications',
  resource: 'trial-verifications',
  readGroup: 'user',
  search: ['contact_name', 'company_name', 'email'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.subscription.trial.package': true;
    'svc.subscription.trial.request': true;
    'svc.subscription.trial.otp': true;
  }
}

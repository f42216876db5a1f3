// The code e-mail, the spec's template svc_subscription_trial.mail_template_trial_otp: a plain-text
// and an HTML part, both rendered from views/mail/ with eta.
import { renderMail, type MailMessage } from '../core/mail.js';

export interface TrialOtpMail {
  to: string;
  contactName: string;
  packageName: string;
  /** The brand_name setting: the sign-off. */
  brand: string;
  code: string;
  validityMinutes: number;
}

export function trialOtpMail(m: TrialOtpMail): MailMessage {
  const data = { name: m.contactName, packageName: m.packageName, brand: m.brand, code: m.code, minutes: m.validityMinutes };
  return {
    to: m.to,
    subject: `Your verification code for the ${m.packageName} trial`,
    ...renderMail('trial_otp', data),
  };
}

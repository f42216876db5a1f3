// The code e-mail, the spec's template svc_subscription_trial.mail_template_trial_otp: a plain-text
// and an HTML part, both rendered from views/mail/ with eta.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';
import type { MailMessage } from '../core/mail.js';

export const TRIAL_OTP_TEMPLATE = 'svc_subscription_trial.mail_template_trial_otp';

const views = path.resolve(fileURLToPath(new URL('../../views', import.meta.url)));
const eta = new Eta({ views, cache: true });

export interface TrialOtpMail {
  to: string;
  contactName: string;
  packageName: string;
  code: string;
  validityMinutes: number;
}

export function trialOtpMail(m: TrialOtpMail): MailMessage {
  const data = { name: m.contactName, packageName: m.packageName, code: m.code, minutes: m.validityMinutes };
  return {
    to: m.to,
    subject: `Your verification code for the ${m.packageName} trial`,
    text: eta.render('mail/trial_otp_text', data),
    html: eta.render('mail/trial_otp_html', data),
  };
}

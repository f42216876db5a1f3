// E-mail code verification of the public trial form.
// The code is 6 digits from a CSPRNG, stored only as SHA-256(access_token + code) and compared in
// constant time. Every limit is enforced in PostgreSQL, so it holds under concurrency and across
// API processes: submits take advisory locks per e-mail and per IP before counting the last hour;
// verify and resend lock the verification row (SELECT ... FOR UPDATE), so concurrent guesses are
// counted one after the other. Times are the database's clock, the same for every process.
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Logger } from 'pino';
import { isUniqueViolation, type Db, type DbTx } from '../core/db.js';
import type { Mailer } from '../core/mail.js';
import type { Queues } from '../core/queue.js';
import { postMessage } from '../core/chatter.js';
import { normalizeEmail } from '../partners/index.js';
import { trialOtpMail } from './trial-mail.js';
import { COMPANY_SIZES, insertTrialRequest, queueAutoProcessing, type CompanySizeValue } from './trial-request-service.js';

/** Limits of the e-mail code: how long it holds, how often it may be tried, sent and asked for. */
const TRIAL_LIMITS = {
  codeValidityMinutes: 10,
  maxFailedAttempts: 5,
  maxCodesSent: 3,
  resendCooldownSeconds: 60,
  verificationsPerEmailPerHour: 3,
  verificationsPerIpPerHour: 10,
} as const;

/** The signup form; messages are shown next to the fields. */
const signupForm = z.object({
  contact_name: z.string({ error: 'Enter your name' }).trim().min(1, 'Enter your name').max(200, 'At most 200 characters'),
  company_name: z.string({ error: 'Enter your company name' }).trim().min(1, 'Enter your company name').max(200, 'At most 200 characters'),
  email: z.string({ error: 'Enter your e-mail address' }).trim().pipe(z.email('Enter a valid e-mail address').max(254)),
  mobile: z
    .string({ error: 'Enter your mobile number' })
    .trim()
    .min(5, 'Enter at least 5 characters: digits, spaces and + ( ) . / -')
    .max(30, 'At most 30 characters')
    .regex(/^\+?[0-9 ()./-]+$/, 'Use only digits, spaces and + ( ) . / -'),
  company_size: z.enum(COMPANY_SIZES, { error: 'Choose your company size' }),
  trial_package_id: z.coerce.number({ error: 'Choose a trial package' }).int().positive('Choose a trial package'),
});
export type SignupForm = z.infer<typeof signupForm>;
export type SignupField = keyof SignupForm;

/** What the code-entry page needs. */
export interface CodeEntry {
  token: string;
  maskedEmail: string;
  attemptsLeft: number;
  codesLeft: number;
  validityMinutes: number;
}

export type SubmitOutcome =
  | ({ kind: 'code_sent' } & CodeEntry)
  | { kind: 'invalid'; errors: Partial<Record<SignupField, string>> }
  | { kind: 'rate_limited'; reason: 'email' | 'ip'; retryAfterSeconds: number }
  | { kind: 'mail_failed' };

export type VerifyOutcome =
  | { kind: 'verified'; trialRequestId: number; packageName: string; autoRun: boolean; maskedEmail: string }
  | { kind: 'not_found' }
  | { kind: 'not_pending' }
  | ({ kind: 'malformed_code' } & CodeEntry)
  | ({ kind: 'wrong_code' } & CodeEntry)
  | { kind: 'attempts_exhausted' }
  | { kind: 'expired'; token: string; canResend: boolean }
  | { kind: 'duplicate' };

export type ResendOutcome =
  | ({ kind: 'code_sent' } & CodeEntry)
  | { kind: 'not_found' }
  | { kind: 'not_pending' }
  | ({ kind: 'rate_limited'; reason: 'cooldown' | 'codes'; retryAfterSeconds: number | null } & CodeEntry)
  | { kind: 'mail_failed' };

/** `jane@example.com` → `j***@example.com`. */
function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 1) return '***';
  return `${email[0]}***${email.slice(at)}`;
}

function hashCode(accessToken: string, code: string): string {
  return createHash('sha256')
    .update(accessToken + code)
    .digest('hex');
}

function codeMatches(accessToken: string, code: string, storedHash: string): boolean {
  const given = Buffer.from(hashCode(accessToken, code), 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return given.length === stored.length && timingSafeEqual(given, stored);
}

/** A 6-digit code from the CSPRNG (crypto.randomInt), leading zeros kept. */
function newCode(): string {
  return randomInt(0, 1_000_000).toString().padStart(6, '0');
}

const TOKEN = /^[0-9a-f]{64}$/;

/** The verification row as verify/resend read it under the row lock, with database-clock facts. */
interface LockedVerification {
  id: number;
  email: string;
  contact_name: string;
  company_name: string;
  mobile: string;
  company_size: CompanySizeValue;
  trial_package_id: number;
  ip_address: string;
  code_hash: string;
  failed_attempts: number;
  codes_sent: number;
  state: 'pending' | 'verified' | 'cancelled';
  expired: boolean;
  cooldown_left: number;
}

export interface TrialVerificationDeps {
  db: Db;
  mailer: Mailer;
  queues: Queues;
  log: Logger;
}

export function createTrialVerificationService(deps: TrialVerificationDeps) {
  const { db, mailer, log } = deps;
  const L = TRIAL_LIMITS;

  function codeEntry(token: string, v: { email: string; failed_attempts: number; codes_sent: number }): CodeEntry {
    return {
      token,
      maskedEmail: maskEmail(v.email),
      attemptsLeft: Math.max(0, L.maxFailedAttempts - v.failed_attempts),
      codesLeft: Math.max(0, L.maxCodesSent - v.codes_sent),
      validityMinutes: L.codeValidityMinutes,
    };
  }

  /** Sends the code; false when the SMTP server refused it or could not be reached. */
  async function sendCode(to: string, contactName: string, packageId: number, code: string, verificationId: number) {
    const pkg = await db.trialPackage.findUnique({ where: { id: packageId }, select: { name: true } });
    const { brand_name: brand } = await db.settings.findUniqueOrThrow({ where: { id: 1 }, select: { brand_name: true } });
    try {
      const packageName = pkg?.name ?? brand;
      await mailer.send(trialOtpMail({ to, contactName, packageName, brand, code, validityMinutes: L.codeValidityMinutes }));
      return true;
    } catch (err) {
      log.warn({ err, verification_id: verificationId }, 'trial code could not be sent');
      // Cancelled, and the code that was never delivered is not counted against the visitor.
      await db.$executeRaw`
        UPDATE trial_verifications SET state = 'cancelled', codes_sent = greatest(codes_sent - 1, 0), updated_at = now()
        WHERE id = ${verificationId}`;
      return false;
    }
  }

  async function lockByToken(tx: DbTx, token: string) {
    const rows = await tx.$queryRaw<LockedVerification[]>`
      SELECT id, email, contact_name, company_name, mobile, company_size::text AS company_size, trial_package_id,
             ip_address, code_hash, failed_attempts, codes_sent, state::text AS state,
             code_expiry <= now() AS expired,
             greatest(0, ceil(extract(epoch FROM last_code_sent + make_interval(secs => ${L.resendCooldownSeconds}) - now())))::int AS cooldown_left
      FROM trial_verifications WHERE access_token = ${token} FOR UPDATE`;
    return rows[0] ?? null;
  }

  return {
    /** Form submit: checks the limits, stores a pending verification and e-mails its code. */
    async submit(input: unknown, ip: string): Promise<SubmitOutcome> {
      const parsed = signupForm.safeParse(input);
      if (!parsed.success) {
        const errors: Partial<Record<SignupField, string>> = {};
        for (const issue of parsed.error.issues) {
          const field = issue.path[0] as SignupField;
          errors[field] ??= issue.message;
        }
        return { kind: 'invalid', errors };
      }
      const form = parsed.data;
      const email = normalizeEmail(form.email);
      const pkg = await db.trialPackage.findFirst({ where: { id: form.trial_package_id, active: true } });
      if (!pkg) return { kind: 'invalid', errors: { trial_package_id: 'Choose a trial package' } };

      const token = randomBytes(32).toString('hex');
      const code = newCode();
      const result = await db.$transaction(async (tx) => {
        // One submit at a time per e-mail and per IP (always in this order: no deadlock), so the
        // counts below cannot be raced past the limits by concurrent submits.
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('svc.trial.email'), hashtext(${email}))`;
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('svc.trial.ip'), hashtext(${ip}))`;
        // A verification whose code could not be delivered has codes_sent = 0 and does not count.
        const [window] = await tx.$queryRaw<{ by_email: number; by_ip: number; email_retry: number | null; ip_retry: number | null }[]>`
          SELECT count(*) FILTER (WHERE email = ${email})::int AS by_email,
                 count(*) FILTER (WHERE ip_address = ${ip})::int AS by_ip,
                 ceil(extract(epoch FROM min(created_at) FILTER (WHERE email = ${email}) + interval '1 hour' - now()))::int AS email_retry,
                 ceil(extract(epoch FROM min(created_at) FILTER (WHERE ip_address = ${ip}) + interval '1 hour' - now()))::int AS ip_retry
          FROM trial_verifications
          WHERE (email = ${email} OR ip_address = ${ip}) AND codes_sent > 0 AND created_at > now() - interval '1 hour'`;
        if (window!.by_email >= L.verificationsPerEmailPerHour) {
          return { limited: 'email' as const, retry: Math.max(1, window!.email_retry ?? 1) };
        }
        if (window!.by_ip >= L.verificationsPerIpPerHour) {
          return { limited: 'ip' as const, retry: Math.max(1, window!.ip_retry ?? 1) };
        }
        // A new verification cancels the pending ones for the same e-mail and package.
        await tx.trialVerification.updateMany({
          where: { email, trial_package_id: pkg.id, state: 'pending' },
          data: { state: 'cancelled' },
        });
        const [row] = await tx.$queryRaw<{ id: number }[]>`
          INSERT INTO trial_verifications (contact_name, company_name, email, mobile, company_size, trial_package_id,
            access_token, code_hash, code_expiry, codes_sent, last_code_sent, ip_address, updated_at)
          VALUES (${form.contact_name}, ${form.company_name}, ${email}, ${form.mobile}, ${form.company_size}::"CompanySize", ${pkg.id},
            ${token}, ${hashCode(token, code)}, now() + make_interval(mins => ${L.codeValidityMinutes}), 1, now(), ${ip}, now())
          RETURNING id`;
        return { id: row!.id };
      });
      if (result.limited) return { kind: 'rate_limited', reason: result.limited, retryAfterSeconds: result.retry };

      if (!(await sendCode(email, form.contact_name, pkg.id, code, result.id!))) return { kind: 'mail_failed' };
      return { kind: 'code_sent', ...codeEntry(token, { email, failed_attempts: 0, codes_sent: 1 }) };
    },

    /** Code entry: on the right code before expiry, the trial request is created from the form data. */
    async verify(input: { token?: unknown; code?: unknown }): Promise<VerifyOutcome> {
      const token = typeof input.token === 'string' ? input.token : '';
      const code = typeof input.code === 'string' ? input.code.replace(/\s+/g, '') : '';
      if (!TOKEN.test(token)) return { kind: 'not_found' };

      let outcome: VerifyOutcome;
      try {
        outcome = await db.$transaction(async (tx): Promise<VerifyOutcome> => {
          const v = await lockByToken(tx, token);
          if (!v) return { kind: 'not_found' };
          if (v.state !== 'pending') return { kind: 'not_pending' };
          if (v.expired) {
            const canResend = v.codes_sent < L.maxCodesSent;
            // An expired code with no code left to send ends the verification.
            if (!canResend) await tx.trialVerification.update({ where: { id: v.id }, data: { state: 'cancelled' } });
            return { kind: 'expired', token, canResend };
          }
          // Not a 6-digit code: cannot be a guess, so it is not counted as an attempt.
          if (!/^[0-9]{6}$/.test(code)) return { kind: 'malformed_code', ...codeEntry(token, v) };

          if (!codeMatches(token, code, v.code_hash)) {
            const failed = v.failed_attempts + 1;
            const exhausted = failed >= L.maxFailedAttempts;
            await tx.trialVerification.update({
              where: { id: v.id },
              data: { failed_attempts: failed, ...(exhausted ? { state: 'cancelled' } : {}) },
            });
            return exhausted
              ? { kind: 'attempts_exhausted' }
              : { kind: 'wrong_code', ...codeEntry(token, { ...v, failed_attempts: failed }) };
          }

          const request = await insertTrialRequest(
            tx,
            {
              name: v.contact_name,
              company_name: v.company_name,
              email: v.email,
              mobile: v.mobile,
              company_size: v.company_size,
              trial_package_id: v.trial_package_id,
            },
            null,
          );
          await postMessage(tx, {
            model_name: 'svc.subscription.trial.request',
            rec_id: request.id,
            body: `Created by the trial form after the e-mail address was verified (verification ${v.id}, from ${v.ip_address}).`,
            message_type: 'notification',
          });
          await tx.trialVerification.update({ where: { id: v.id }, data: { state: 'verified', trial_request_id: request.id } });
          const pkg = await tx.trialPackage.findUniqueOrThrow({
            where: { id: v.trial_package_id },
            select: { name: true, auto_run_subscription: true },
          });
          return {
            kind: 'verified',
            trialRequestId: request.id,
            packageName: pkg.name,
            autoRun: pkg.auto_run_subscription,
            maskedEmail: maskEmail(v.email),
          };
        });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        // The address is proven, but it already has a trial of this package: the verification
        // ends without a request (the transaction above was rolled back as a whole).
        await db.trialVerification.updateMany({ where: { access_token: token, state: 'pending' }, data: { state: 'cancelled' } });
        return { kind: 'duplicate' };
      }

      if (outcome.kind === 'verified') {
        const request = await db.trialRequest.findUniqueOrThrow({ where: { id: outcome.trialRequestId } });
        await queueAutoProcessing(deps, request);
      }
      return outcome;
    },

    /** The packages the form offers. */
    activePackages() {
      return db.trialPackage.findMany({
        where: { active: true },
        orderBy: { name: 'asc' },
        select: { id: true, name: true, trial_duration_days: true },
      });
    },

    /** The active package of a form address (/saas/trial/<url_string>), or null. */
    packageAt(urlString: string) {
      return db.trialPackage.findFirst({ where: { url_string: urlString, active: true } });
    },

    /** What every page shows of the settings: the brand in titles, the privacy link under the form. */
    async pageSettings(): Promise<{ brand: string; privacyUrl: string | null }> {
      const s = await db.settings.findUniqueOrThrow({ where: { id: 1 }, select: { brand_name: true, privacy_url: true } });
      return { brand: s.brand_name, privacyUrl: s.privacy_url };
    },

    /** A fresh code for the same verification: at most 3 codes, 60 s apart. */
    async resend(input: { token?: unknown }): Promise<ResendOutcome> {
      const token = typeof input.token === 'string' ? input.token : '';
      if (!TOKEN.test(token)) return { kind: 'not_found' };
      const code = newCode();

      const result = await db.$transaction(async (tx) => {
        const v = await lockByToken(tx, token);
        if (!v) return { kind: 'not_found' as const };
        if (v.state !== 'pending') return { kind: 'not_pending' as const };
        if (v.codes_sent >= L.maxCodesSent) {
          if (v.expired) {
            await tx.trialVerification.update({ where: { id: v.id }, data: { state: 'cancelled' } });
            return { kind: 'not_pending' as const };
          }
          return { kind: 'rate_limited' as const, reason: 'codes' as const, retryAfterSeconds: null, ...codeEntry(token, v) };
        }
        if (v.cooldown_left > 0) {
          return { kind: 'rate_limited' as const, reason: 'cooldown' as const, retryAfterSeconds: v.cooldown_left, ...codeEntry(token, v) };
        }
        await tx.$executeRaw`
          UPDATE trial_verifications
          SET code_hash = ${hashCode(token, code)}, code_expiry = now() + make_interval(mins => ${L.codeValidityMinutes}),
              codes_sent = codes_sent + 1, last_code_sent = now(), updated_at = now()
          WHERE id = ${v.id}`;
        return { kind: 'send' as const, v: { ...v, codes_sent: v.codes_sent + 1 } };
      });
      if (result.kind !== 'send') return result;

      const { v } = result;
      if (!(await sendCode(v.email, v.contact_name, v.trial_package_id, code, v.id))) return { kind: 'mail_failed' };
      return { kind: 'code_sent', ...codeEntry(token, v) };
    },
  };
}

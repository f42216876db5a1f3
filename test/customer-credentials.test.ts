// The customer's credentials beyond the trial: a paid subscription's ready mail and the operator's
// resend_credentials, on real parts (the Odoo-shaped template on the real PostgreSQL, a real sshd
// as the Odoo host, a real SMTP server, Debian's passlib checking the hash as Odoo would).
import { describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { adminRow, credentialsIn, everythingStored, passlibVerifies } from './helpers/customer-credentials.js';
import { act, get, messages } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { textOf, type ReceivedMail } from './helpers/smtp.js';

const f = useOdooHost({ 'ab/abcdef0123': 'logo bytes' });
const { t } = f;

const subjectOf = (mail: ReceivedMail) => /^Subject: (.*)$/m.exec(mail.raw)?.[1]?.trim();
const mailsTo = (email: string) => f.smtp.messages.filter((m) => m.to.includes(email));
const emailOf = async (partnerId: unknown) =>
  (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${partnerId}` })).json().email as string;

async function runLifecycle() {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
  expect((await waitForJob(t.app, t.as.user, res.json().job_id)).state).toBe('completed');
}

/** resend_credentials, waited for. */
async function resend(id: number) {
  const res = await act(t, id, 'resend_credentials');
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.user, res.json().job_id, 30_000);
}

describe('a paid subscription', () => {
  it('deployed directly gets a ready mail with its login and a password of its own, told once and stored nowhere', async () => {
    const sub = await f.fx.deployed();
    const email = await emailOf(sub.partner_id);
    const mail = await f.smtp.waitFor(email);
    expect(subjectOf(mail)).toBe('Your subscription is ready');
    const text = textOf(mail);
    expect(text).toContain(sub.url as string);
    const { login, password } = credentialsIn(text);
    expect(login).toBe(email);
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(passlibVerifies(password, (await adminRow(sub.database_name)).password)).toBe(true);
    expect(await get(t, sub.id)).toMatchObject({ ready_sent_at: expect.any(String), trial_ready_sent_at: null });

    expect(await everythingStored(t)).not.toContain(password);
    const copy = (await messages(t, sub.id)).find((m) => m.message_type === 'email')!;
    expect(copy.body).toMatch(/^Your subscription is ready\n/);
    expect(copy.body).toContain('Password: ********');

    // Told once: the lifecycle run sends it no other mail.
    await runLifecycle();
    expect(mailsTo(email)).toHaveLength(1);
  });

  it('converted from a trial gets no second ready mail: the trial_ready one told its credentials', async () => {
    const sub = await f.fx.deployed({ is_trial: true, trial_end_date: new Date(Date.now() + 5 * 86_400_000).toISOString() });
    const email = await emailOf(sub.partner_id);
    expect(subjectOf(await f.smtp.waitFor(email))).toBe('Your trial is ready');
    expect((await act(t, sub.id, 'convert_to_paid')).statusCode).toBe(200);
    await runLifecycle();
    expect(mailsTo(email).map(subjectOf)).toEqual(['Your trial is ready']);
    expect((await get(t, sub.id)).ready_sent_at).toBeNull();
  });
});

describe('resend_credentials', () => {
  it('sets a new password in the running instance and mails it; the earlier one no longer works; stored nowhere', async () => {
    const sub = await f.fx.deployed();
    const email = await emailOf(sub.partner_id);
    const first = credentialsIn(textOf(await f.smtp.waitFor(email)));
    expect((await act(t, sub.id, 'resend_credentials', undefined, t.as.user)).statusCode).toBe(403);

    const job = await resend(sub.id);
    expect(job.state, job.error).toBe('completed');
    expect(job.result).toEqual({ subscription_id: sub.id, database_name: sub.database_name, login: email, mailed_to: email });
    const mail = await f.smtp.waitFor(email, 2);
    expect(subjectOf(mail)).toBe('Your new password');
    const second = credentialsIn(textOf(mail));
    expect(second.login).toBe(email);
    expect(second.password).not.toBe(first.password);
    const admin = await adminRow(sub.database_name);
    expect(passlibVerifies(second.password, admin.password)).toBe(true);
    expect(passlibVerifies(first.password, admin.password)).toBe(false);

    const stored = await everythingStored(t);
    expect(stored).not.toContain(second.password);
    expect(stored).not.toContain(first.password);
    const copy = (await messages(t, sub.id)).filter((m) => m.message_type === 'email').at(-1)!;
    expect(copy.body).toMatch(/^Your new password\n/);
    expect(copy.body).toContain('Password: ********');
    const rows = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, input_text: { startsWith: 'resend_credentials: ' } },
    });
    expect(rows).toEqual([
      expect.objectContaining({ status: 'success', user_id: t.as.operator.userId, job_id: job.id, action_type: 'database' }),
    ]);
  });

  it('is refused with 409 when the subscription is not running or has no database, and nothing changes', async () => {
    const sub = await f.fx.deployed();
    const hash = (await adminRow(sub.database_name)).password;
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    const suspended = await act(t, sub.id, 'resend_credentials');
    expect(suspended.statusCode).toBe(409);
    expect(suspended.json().error.message).toMatch(/is suspended; resend_credentials needs running/);
    expect((await act(t, sub.id, 'reactivate')).statusCode).toBe(200);

    // Running, but no database its deployment made (as one deployed before that was recorded).
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { database_created_at: null } });
    const noDatabase = await act(t, sub.id, 'resend_credentials');
    expect(noDatabase.statusCode).toBe(409);
    expect(noDatabase.json().error.message).toMatch(/has no database/);
    expect((await adminRow(sub.database_name)).password).toBe(hash);

    const partner = await f.fx.partner();
    const draft = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Not deployed', partner_id: partner.id },
    });
    expect((await act(t, draft.json().id, 'resend_credentials')).statusCode).toBe(409);
    expect((await act(t, 999_999, 'resend_credentials')).statusCode).toBe(404);
  });

  it('a mail that cannot be sent fails the job saying to run it again; the chatter says so and no password is kept', async () => {
    const sub = await f.fx.deployed();
    const email = await emailOf(sub.partner_id);
    await f.smtp.waitFor(email);
    f.smtp.refuse((address) => address === email);
    try {
      const job = await resend(sub.id);
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(/the mail could not be sent .*550.*run resend_credentials again/);
    } finally {
      f.smtp.refuse(() => false);
    }
    expect((await messages(t, sub.id)).at(-1)!.body).toMatch(
      /^The credentials e-mail "Your new password" to .* could not be sent: .*run resend_credentials again\.$/,
    );
    // Run again, the customer gets a password that works.
    expect((await resend(sub.id)).state).toBe('completed');
    const { password } = credentialsIn(textOf(await f.smtp.waitFor(email, 2)));
    expect(passlibVerifies(password, (await adminRow(sub.database_name)).password)).toBe(true);
  });
});

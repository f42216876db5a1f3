// The trial lifecycle end to end on real parts: a real SMTP server receives the
// trial_ready, trial_ending and trial_expired mails; the trial_lifecycle job runs in the real BullMQ
// workers (two sets of workers at once, like two worker processes); databases are deployed from a
// real template and really closed, and dropped after a real final backup (svc's own backup server,
// restic on a local repository).
import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../src/context.js';
import { subscriptionJobs } from '../src/subscriptions/subscription-job-specs.js';
import { runTrialLifecycle } from '../src/subscriptions/subscription-lifecycle.js';
import { startWorkers, type Workers } from '../src/worker.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, canConnect, databaseRow, get, messages, stateHistory, useLifecycle } from './helpers/lifecycle.js';
import { codeFrom, textOf, useSmtpServer, type ReceivedMail } from './helpers/smtp.js';
import { createTrialPackage, injectTransport, Visitor } from './helpers/trial.js';

const DAY = 86_400_000;
const smtp = useSmtpServer();
let second: { ctx: AppContext; workers: Workers } | null = null;
let n = 0;

const t = useTestApp({
  workers: true,
  env: () => ({ SMTP_URL: smtp.url, BACKUP_POLL_MS: '20' }),
});

const fx = useLifecycle(t, { backups: 'real' });

afterAll(async () => {
  await second?.workers.close();
  await second?.ctx.close();
});

const iso = (ms: number) => new Date(ms).toISOString();
const address = () => `customer-${++n}@example.com`;
const mailsTo = (to: string) => smtp.messages.filter((m) => m.to.includes(to));

const subjectOf = (mail: ReceivedMail) => /^Subject: (.*)$/m.exec(mail.raw)![1]!.trim();

async function runLifecycle() {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
  expect(res.statusCode, res.body).toBe(202);
  const job = await waitForJob(t.app, t.as.user, res.json().job_id, 30_000);
  expect(job.state, job.error).toBe('completed');
  return job.result as {
    suspended: number[];
    suspend_failed: unknown[];
    drops_queued: { subscription_id: number; job_id: string }[];
    mails: { sent: number; failed: unknown[] };
  };
}

async function trial(email: string, data: Record<string, unknown> = {}) {
  const partner = await fx.partner(email);
  return fx.deployed({ partner_id: partner.id, is_trial: true, ...data });
}

const setSettings = (payload: object, caller = t.as.admin) => request(t.app, caller, { method: 'PATCH', url: '/api/v1/settings', payload });
const patch = (id: number, payload: object) =>
  request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${id}`, payload });
const emails = async (id: number) => (await messages(t, id)).filter((m) => m.message_type === 'email').map((m) => m.body.split('\n')[0]);

describe('the lifecycle job', () => {
  it('is scheduled every 5 minutes (one BullMQ job scheduler for every worker process); run now by operators', async () => {
    const scheduler = await t.ctx.queues.queue('lifecycle').getJobScheduler('trial-lifecycle');
    expect(scheduler).toMatchObject({ name: 'trial_lifecycle', every: 300_000 });
    expect((await request(t.app, t.as.user, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' })).statusCode).toBe(403);
    expect(await runLifecycle()).toMatchObject({ suspend_failed: [], mails: { failed: [] } });
  });

  it('settings trial_reminder_days (0..365) and drop_expired_trials: administrators write them, tracked', async () => {
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/settings' })).json()).toMatchObject({
      trial_reminder_days: 3,
      drop_expired_trials: false,
    });
    expect((await setSettings({ trial_reminder_days: 5 }, t.as.operator)).statusCode).toBe(403);
    for (const bad of [
      { trial_reminder_days: -1 },
      { trial_reminder_days: 366 },
      { trial_reminder_days: 2.5 },
      { drop_expired_trials: 'yes' },
    ]) {
      expect((await setSettings(bad)).statusCode, JSON.stringify(bad)).toBe(400);
    }
    const res = await setSettings({ trial_reminder_days: 5 });
    expect(res.json()).toMatchObject({ trial_reminder_days: 5, drop_expired_trials: false });
    expect((await setSettings({ trial_reminder_days: 3 })).statusCode).toBe(200);
    const tracked = await t.ctx.db.trackingValue.findMany({ where: { field: 'trial_reminder_days' } });
    expect(tracked.map((v) => [v.old_value, v.new_value])).toEqual([
      ['3', '5'],
      ['5', '3'],
    ]);
  });
});

describe('the mails', () => {
  it('trial_ready when a trial first runs; trial_ending once, 3 days before; trial_expired when the expiry suspends it', async () => {
    const email = address();
    const sub = await trial(email, { trial_end_date: iso(Date.now() + 10 * DAY), grace_end_date: iso(Date.now() + 17 * DAY) });
    const ready = await smtp.waitFor(email);
    expect(subjectOf(ready)).toBe('Your trial is ready');
    expect(textOf(ready)).toContain(`http://${sub.database_name}.localhost`);
    expect(textOf(ready)).toMatch(/The trial runs until \d{1,2} \w+ \d{4}, \d\d:\d\d UTC\. We will remind you 3 days before it ends\./);
    expect(ready.raw).toMatch(/Content-Type: text\/html/i);
    expect((await get(t, sub.id)).trial_ready_sent_at).not.toBeNull();

    // A paid subscription gets none of them: its own ready mail only.
    const paidEmail = address();
    await fx.deployed({ partner_id: (await fx.partner(paidEmail)).id });
    await smtp.waitFor(paidEmail);

    await runLifecycle(); // 10 days left: nothing due
    expect(mailsTo(email)).toHaveLength(1);

    await patch(sub.id, { trial_end_date: iso(Date.now() + 2 * DAY) });
    await runLifecycle();
    await runLifecycle(); // once
    const ending = mailsTo(email);
    expect(ending.map(subjectOf)).toEqual(['Your trial is ready', expect.stringMatching(/^Your trial ends on \d{1,2} \w+ \d{4}/)]);
    expect(textOf(ending[1]!)).toMatch(/in 2 days/);

    await patch(sub.id, { trial_end_date: iso(Date.now() - 60_000) });
    const result = await runLifecycle();
    expect(result.suspended).toContain(sub.id);
    await runLifecycle(); // once
    const all = mailsTo(email);
    expect(all.map(subjectOf)).toEqual(['Your trial is ready', expect.stringMatching(/^Your trial ends on/), 'Your trial has ended']);
    expect(textOf(all[2]!)).toContain('Your data is kept.');
    expect(mailsTo(paidEmail).map(subjectOf)).toEqual(['Your subscription is ready']);

    expect(await get(t, sub.id)).toMatchObject({
      state: 'suspended',
      suspend_reason: 'trial_expired',
      trial_expired_sent_at: expect.any(String),
    });
    expect(await canConnect(sub.database_name)).toMatch(/not currently accepting connections/);
    expect(await emails(sub.id)).toEqual(['Your trial is ready', all[1] && subjectOf(all[1]), 'Your trial has ended']);
    const mailMessage = (await messages(t, sub.id)).find((m) => m.message_type === 'email')!;
    expect(mailMessage.body).toContain(`To: ${email}`);
    expect((await stateHistory(t, sub.id)).filter((s) => s === 'suspended')).toHaveLength(1);
  });

  it('trial_reminder_days 0: no reminder', async () => {
    expect((await setSettings({ trial_reminder_days: 0 })).statusCode).toBe(200);
    try {
      const email = address();
      const sub = await trial(email, { trial_end_date: iso(Date.now() + DAY) });
      await smtp.waitFor(email);
      await runLifecycle();
      expect(mailsTo(email).map(subjectOf)).toEqual(['Your trial is ready']);
      expect((await get(t, sub.id)).trial_reminder_sent_at).toBeNull();
    } finally {
      await setSettings({ trial_reminder_days: 3 });
    }
  });

  it('a refused delivery is recorded once in the chatter, never blocks the suspension, and the next run sends it', async () => {
    const email = address();
    const sub = await trial(email, { trial_end_date: iso(Date.now() + 10 * DAY) });
    await smtp.waitFor(email);
    await patch(sub.id, { trial_end_date: iso(Date.now() - 60_000) });
    smtp.refuse((to) => to === email);
    try {
      const first = await runLifecycle();
      expect(first.suspended).toContain(sub.id);
      expect(first.mails.failed).toContainEqual({ subscription_id: sub.id, mail: 'trial_expired', error: expect.stringMatching(/550/) });
      await runLifecycle();
    } finally {
      smtp.refuse(() => false);
    }
    expect(await get(t, sub.id)).toMatchObject({ state: 'suspended', trial_expired_sent_at: null });
    const alerts = (await messages(t, sub.id)).filter((m) => /could not be sent/.test(m.body));
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({
      subtype_xmlid: 'mail.mt_alert',
      body: expect.stringMatching(
        new RegExp(
          `^The trial_expired e-mail "Your trial has ended" to ${email} could not be sent: .*550.*The next lifecycle run sends it again\\.$`,
        ),
      ),
    });

    await runLifecycle();
    expect(mailsTo(email).map(subjectOf)).toEqual(['Your trial is ready', 'Your trial has ended']);
    expect((await get(t, sub.id)).trial_expired_sent_at).not.toBeNull();
  });
});

describe('two workers running the lifecycle at once', () => {
  it('each subscription is suspended once and each mail sent once', async () => {
    const expiring = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const email = address();
        const sub = await trial(email, { trial_end_date: iso(Date.now() + 20 * DAY), grace_end_date: iso(Date.now() + 30 * DAY) });
        return { email, sub };
      }),
    );
    const reminded = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const email = address();
        const sub = await trial(email, { trial_end_date: iso(Date.now() + 20 * DAY) });
        return { email, sub };
      }),
    );
    for (const { email } of [...expiring, ...reminded]) await smtp.waitFor(email);
    for (const { sub } of expiring) await patch(sub.id, { trial_end_date: iso(Date.now() - 60_000) });
    for (const { sub } of reminded) await patch(sub.id, { trial_end_date: iso(Date.now() + DAY) });

    // A second worker process (its own connections to PostgreSQL and Redis) on the same queues.
    const other = await createContext(t.ctx.config, t.ctx.log);
    second = { ctx: other, workers: await startWorkers(other) };
    const ids = await Promise.all(
      Array.from({ length: 4 }, () => t.ctx.queues.enqueue(subscriptionJobs.trial_lifecycle, { user_id: null })),
    );
    // And two runs straight from two contexts, sure to overlap.
    await Promise.all([runTrialLifecycle(t.ctx, { userId: null, jobId: null }), runTrialLifecycle(other, { userId: null, jobId: null })]);
    for (const id of ids) expect((await waitForJob(t.app, t.as.user, id, 30_000)).state).toBe('completed');

    for (const { email, sub } of expiring) {
      expect(mailsTo(email).map(subjectOf)).toEqual(['Your trial is ready', 'Your trial has ended']);
      expect((await stateHistory(t, sub.id)).filter((s) => s === 'suspended')).toHaveLength(1);
      expect((await get(t, sub.id)).state).toBe('suspended');
      const closes = await t.ctx.db.actionLog.count({
        where: { rec_id: sub.id, model_name: 'svc.subscription', input_text: { contains: 'ALLOW_CONNECTIONS false' } },
      });
      expect(closes).toBe(1);
    }
    for (const { email } of reminded)
      expect(mailsTo(email).map(subjectOf)).toEqual(['Your trial is ready', expect.stringMatching(/^Your trial ends on/)]);
  });
});

describe('the trial pages', () => {
  it('the confirmation and the duplicate (409) pages say truthfully what happens next', async () => {
    const pkg = await createTrialPackage(t.ctx); // no Auto Run: the team sets it up
    const email = `pages-${Date.now()}@example.com`;
    const signUp = async (nth: number) => {
      const visitor = new Visitor(injectTransport(t.app));
      const page = await visitor.submit(email, pkg.id);
      return visitor.verify(page.token!, codeFrom(await smtp.waitFor(email, nth)));
    };
    const confirmed = await signUp(1);
    expect(confirmed.status).toBe(200);
    expect(confirmed.html).toContain(
      'Our team sets up your trial. As soon as it is ready, we send an e-mail to <strong>p***@example.com</strong>',
    );
    const duplicate = await signUp(2);
    expect(duplicate.status).toBe(409);
    expect(duplicate.html).toContain('so no new one was made. When that trial is ready, we send its address to this e-mail address');
  });
});

describe('end to end', () => {
  it('form → verified → deployed → ready mail → expiry → extend_trial → expiry → grace passed → final backup → dropped', async () => {
    const pkg = await createTrialPackage(t.ctx, {
      auto_run_subscription: true,
      database_template_id: fx.templateId,
      trial_duration_days: 14,
      grace_period_days: 7,
    });
    const email = `e2e-${Date.now()}@example.com`;
    const visitor = new Visitor(injectTransport(t.app));
    const code = await visitor.submit(email, pkg.id, { company_name: `${t.ctx.dbName} E2E` });
    expect(code.status).toBe(200);
    const confirmed = await visitor.verify(code.token!, codeFrom(await smtp.waitFor(email)));
    expect(confirmed.status).toBe(200);
    expect(confirmed.html).toMatch(
      /Your trial is being set up now\. As soon as it is ready, we send an e-mail to <strong>e\*\*\*@example\.com<\/strong> with the address to open it/,
    );

    // Processed and deployed by the workers: the ready mail carries the address.
    const ready = await smtp.waitFor(email, 2, 30_000);
    expect(subjectOf(ready)).toBe('Your trial is ready');
    const request_ = await t.ctx.db.trialRequest.findFirstOrThrow({ where: { email } });
    const id = request_.subscription_id!;
    let sub = await get(t, id);
    expect(sub).toMatchObject({ state: 'running', is_trial: true, url: `http://${sub.database_name}.localhost` });
    expect(textOf(ready)).toContain(sub.url as string);
    expect(await canConnect(sub.database_name)).toBe(true);

    // The trial ends.
    await patch(id, { trial_end_date: iso(Date.now() - 60_000) });
    expect((await runLifecycle()).suspended).toContain(id);
    expect(subjectOf(await smtp.waitFor(email, 3))).toBe('Your trial has ended');
    expect(await get(t, id)).toMatchObject({ state: 'suspended', suspend_reason: 'trial_expired' });
    expect(await canConnect(sub.database_name)).toMatch(/not currently accepting connections/);

    // Extended: running again.
    const extended = await act(t, id, 'extend_trial', { days: 5 });
    expect(extended.statusCode, extended.body).toBe(200);
    expect(extended.json()).toMatchObject({ state: 'running', suspend_reason: null });
    expect(await canConnect(sub.database_name)).toBe(true);

    // It ends again, and so does the grace period, with drop_expired_trials on.
    await patch(id, { trial_end_date: iso(Date.now() - 2 * 3600_000), grace_end_date: iso(Date.now() - 3600_000) });
    expect((await runLifecycle()).suspended).toContain(id);
    const expiredAgain = await smtp.waitFor(email, 4);
    expect(subjectOf(expiredAgain)).toBe('Your trial has ended');
    expect((await setSettings({ drop_expired_trials: true })).statusCode).toBe(200);
    try {
      const result = await runLifecycle();
      const queued = result.drops_queued.find((d) => d.subscription_id === id)!;
      expect(queued.job_id).toMatch(/^backups-/);
      const drop = await waitForJob(t.app, t.as.user, queued.job_id, 120_000);
      expect(drop.state, drop.error).toBe('completed');
      // Queued once, even though the next run sees the same dates.
      expect((await runLifecycle()).drops_queued).toEqual([]);
    } finally {
      await setSettings({ drop_expired_trials: false });
    }

    // The final backup is the backup server's, done and downloadable.
    const [backup] = await fx.backups.backups(sub.database_name);
    expect(backup).toMatchObject({ state: 'done', url: expect.stringMatching(/\/download\/\d+\?expires=\d+&signature=/) });
    expect(await databaseRow(sub.database_name)).toBeNull();
    sub = await get(t, id);
    expect(sub).toMatchObject({ state: 'cancelled', database_dropped_at: expect.any(String), backup_state: 'ok', url: null });
    expect(await stateHistory(t, id)).toEqual([
      'draft',
      'confirmed',
      'deploying',
      'running',
      'suspended',
      'running',
      'suspended',
      'cancelled',
    ]);
    expect(await emails(id)).toEqual(['Your trial is ready', 'Your trial has ended', 'Your trial has ended']);
    expect(mailsTo(email)).toHaveLength(4); // the code, ready, expired twice
  }, 180_000);
});

// A feature is a manifest in a list (src/features.ts): this test adds one the way CONTRIBUTING.md
// describes, without touching any other file, and checks that every contribution is wired: its
// REST resource and action, its model's chatter routes, its job through the real BullMQ worker,
// its schedule, its webhook method. Real PostgreSQL and Redis. The model reuses the partners
// table under a name of its own, so no migration is needed for the test.
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { FEATURES } from '../src/features.js';
import { featureJobs, type Feature } from '../src/feature.js';
import { defineModel } from '../src/core/models.js';
import { defineJobs, job } from '../src/core/jobs.js';
import { action, registerActions } from '../src/core/http/actions.js';
import { registerCrud } from '../src/core/http/crud.js';
import { createRecordService } from '../src/core/records.js';
import { postMessage } from '../src/core/chatter.js';
import { refId, timestamp } from '../src/core/http/schemas.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

declare module '../src/core/models.js' {
  interface ModelNames {
    'test.contact': true;
  }
}

const contactModel = defineModel({
  name: 'test.contact',
  delegate: 'partner',
  table: 'partners',
  resource: 'test-contacts',
  readGroup: 'user',
  tracked: ['name'],
});

const contactJobs = defineJobs({
  greet_contact: job({ queue: 'test_contacts', payload: z.object({ contact_id: refId }), afterCrash: 'rerun' }),
});

const contactOut = z.object({ id: z.number(), name: z.string(), email: z.string(), created_at: timestamp, updated_at: timestamp });

const contacts: Feature = {
  name: 'test-contacts',
  models: [contactModel],
  routes(app, ctx) {
    const service = createRecordService(ctx, contactModel);
    registerCrud(app, {
      path: '/test-contacts',
      tag: 'test',
      service,
      output: contactOut,
      create: z.object({ name: z.string(), email: z.email() }).strict(),
      read: 'user',
      write: 'operator',
    });
    registerActions(app, {
      path: '/test-contacts',
      tag: 'test',
      group: 'operator',
      actions: {
        greet: action({
          summary: 'Greet a contact',
          description: 'Queues a greeting in the contact’s chatter.',
          response: 'job',
          run: ({ id }) => ctx.queues.enqueue(contactJobs.greet_contact, { contact_id: id }),
        }),
      },
    });
  },
  jobs: featureJobs(
    contactJobs,
    (ctx) => ({
      async greet_contact({ contact_id }) {
        await postMessage(ctx.db, { model_name: 'test.contact', rec_id: contact_id, body: 'Hello!' });
        return { greeted: contact_id };
      },
    }),
    {},
  ),
  async schedules(ctx) {
    await ctx.queues.schedule('greet-nobody', { every: 3_600_000 }, contactJobs.greet_contact, { contact_id: 999_999 });
  },
  webhookMethods: () => ({ 'test.contact': { action_wave: async () => {} } }),
};

const t = useTestApp({ workers: true, features: [...FEATURES, contacts] });

describe('a feature added to the list', () => {
  it('contributes its resource, action, chatter routes, job, schedule and webhook method', async () => {
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/test-contacts',
      payload: { name: 'Ada', email: 'ada@example.com' },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id;

    const queued = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/test-contacts/${id}/actions/greet` });
    expect(queued.statusCode).toBe(202);
    expect(await waitForJob(t.app, t.as.user, queued.json().job_id)).toMatchObject({ state: 'completed', result: { greeted: id } });

    const thread = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/test-contacts/${id}/messages` })).json();
    expect(thread.items.map((m: { body: string }) => m.body)).toEqual(['Hello!', 'Record created']);

    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    expect(doc.paths['/api/v1/test-contacts/{id}/actions/greet'].post).toMatchObject({
      operationId: 'testContacts.greet',
      summary: 'Greet a contact',
    });

    expect(await t.ctx.queues.queue('test_contacts').getJobScheduler('greet-nobody')).toMatchObject({ every: 3_600_000 });

    const hook = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/webhooks',
      payload: { model_name: 'test.contact', rec_id: id, trigger_action: 'action_wave' },
    });
    expect(hook.statusCode, hook.body).toBe(201);
  });
});

// HTTP helpers over app.inject(): users of each group with their bearer tokens.
import type { FastifyInstance, InjectOptions } from 'fastify';
import { expect, vi } from 'vitest';
import type { AppContext } from '../../src/context.js';
import type { UserGroup } from '../../src/core/groups.js';
import { createAuthService } from '../../src/auth/auth-service.js';
import { composeFeatures } from '../../src/features.js';
import { passwordLogin, type Sshd } from './sshd.js';

export interface Caller {
  userId: number;
  token: string;
  headers: { authorization: string };
}

let seq = 0;

export async function createCaller(ctx: AppContext, group: UserGroup): Promise<Caller> {
  const auth = createAuthService(ctx);
  const user = await auth.createUser({ email: `${group}-${++seq}-${Date.now()}@svc.test`, group });
  const { token } = await auth.createToken(user.id, 'test');
  return { userId: user.id, token, headers: { authorization: `Bearer ${token}` } };
}

export type Callers = Awaited<ReturnType<typeof callers>>;

export async function callers(ctx: AppContext) {
  return {
    user: await createCaller(ctx, 'user'),
    operator: await createCaller(ctx, 'operator'),
    admin: await createCaller(ctx, 'administrator'),
  };
}

/** inject() with the caller's token; the body is sent as JSON. */
export function request(app: FastifyInstance, caller: Caller | null, opts: InjectOptions) {
  return app.inject({ ...opts, headers: { ...(caller?.headers ?? {}), ...(opts.headers ?? {}) } });
}

/** POSTs action `name` of record `id` of a REST resource such as 'root-servers', with `payload` as its JSON body. */
export function postAction(app: FastifyInstance, caller: Caller, resource: string, id: number | string, name: string, payload?: object) {
  return request(app, caller, { method: 'POST', url: `/api/v1/${resource}/${id}/actions/${name}`, payload });
}

/**
 * postAction() bound to a test file's app and one resource: `act(id, name, payload?, caller?)`, as the
 * caller of group `by` unless told. `t` is read at each call, so the binding may come before the app.
 */
export function actionsOf(t: { app: FastifyInstance; as: Callers }, resource: string, by: keyof Callers = 'operator') {
  return (id: number | string, name: string, payload?: object, caller: Caller = t.as[by]) =>
    postAction(t.app, caller, resource, id, name, payload);
}

/**
 * A root server on the test sshd, created and confirmed (which records its host key) by `caller`;
 * `body` gives the login and any other field (default: the password user). Returns the record.
 */
export async function confirmedRootServer(
  app: FastifyInstance,
  caller: Caller,
  sshd: Pick<Sshd, 'host' | 'port'>,
  body: Record<string, unknown> = passwordLogin(),
) {
  const created = await request(app, caller, {
    method: 'POST',
    url: '/api/v1/root-servers',
    payload: { ip: sshd.host, port: sshd.port, ...body },
  });
  expect(created.statusCode, created.body).toBe(201);
  const confirmed = await postAction(app, caller, 'root-servers', created.json().id, 'confirm');
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  return confirmed.json() as { id: number; [field: string]: unknown };
}

/** Polls a job until it leaves waiting/active, and returns its representation. */
export function waitForJob(app: FastifyInstance, caller: Caller, jobId: string, timeoutMs = 20_000) {
  return vi.waitFor(
    async () => {
      const job = (await request(app, caller, { method: 'GET', url: `/api/v1/jobs/${jobId}` })).json();
      if (job.state !== 'completed' && job.state !== 'failed') throw new Error(`job ${jobId} still ${job.state}`);
      return job;
    },
    { timeout: timeoutMs, interval: 50 },
  );
}

/** The BullMQ job behind a public job id (e.g. to read its counters), or null. */
export function findJob(ctx: AppContext, jobId: string) {
  return ctx.queues.find(jobId, composeFeatures(ctx).jobs.queueNames());
}

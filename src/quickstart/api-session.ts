// Quickstart's way to svc: the ordinary API, built in this process (buildApp) and called with
// app.inject() under an administrator's token made for this run and revoked at its end, with the
// workers running here for the jobs the calls queue. Quickstart can do nothing the API cannot.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { buildApp } from '../app.js';
import { createAuthService } from '../auth/index.js';
import { startWorkers, type Workers } from '../worker.js';
import { QuickstartError } from './quickstart-errors.js';

export interface JobView {
  id: string;
  name: string;
  state: string;
  progress: unknown;
  result: unknown;
  error: string | null;
}

export interface ApiSession {
  /** The answer's JSON; a QuickstartError saying the call and svc's answer when it is not a 2xx. */
  call<T = Record<string, unknown>>(method: string, url: string, body?: unknown): Promise<T>;
  /** Like call, but answers the status too (a 404 or a 409 is an answer quickstart acts on). */
  send(method: string, url: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Posts an action that answers 202 {job_id} and waits for its job; a failed job is a QuickstartError. */
  runJob(url: string, body: unknown, what: string): Promise<JobView>;
  close(): Promise<void>;
}

const JOB_POLL_MS = 500;

/** Prints a job's progress each time it changes, then answers the finished job. */
export async function followJob(read: () => Promise<JobView>, print: (line: string) => void): Promise<JobView> {
  let last = '';
  for (;;) {
    const job = await read();
    const progress = job.progress == null ? '' : JSON.stringify(job.progress);
    if (progress && progress !== last) print(`  ${job.name} ${job.id}: ${progress}`);
    last = progress || last;
    if (job.state === 'completed' || job.state === 'failed') return job;
    await new Promise((r) => setTimeout(r, JOB_POLL_MS));
  }
}

export async function openApiSession(ctx: AppContext, adminEmail: string, print: (line: string) => void): Promise<ApiSession> {
  const app: FastifyInstance = await buildApp(ctx);
  const workers: Workers = await startWorkers(ctx);
  const auth = createAuthService(ctx);
  // The administrator quickstart acts as: made (or promoted) as `npm run cli -- create-admin` does.
  const existing = await ctx.db.user.findUnique({ where: { email: adminEmail.toLowerCase() } });
  const session =
    existing?.group === 'administrator' && existing.active
      ? await auth.createToken(existing.id, 'quickstart (revoked at its end)')
      : await auth.createAdmin(adminEmail);
  const headers = { authorization: `Bearer ${session.token}` };

  const send = async (method: string, url: string, body?: unknown) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      payload: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.statusCode, body: res.body ? (res.json() as Record<string, unknown>) : {} };
  };
  const call = async <T>(method: string, url: string, body?: unknown): Promise<T> => {
    const res = await send(method, url, body);
    if (res.status >= 300) throw new QuickstartError(`${method} ${url} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body as T;
  };
  return {
    call,
    send,
    async runJob(url, body, what) {
      const { job_id } = await call<{ job_id: string }>('POST', url, body);
      print(`  ${what}: job ${job_id}`);
      const job = await followJob(() => call<JobView>('GET', `/api/v1/jobs/${job_id}`), print);
      if (job.state === 'failed') throw new QuickstartError(`${what} failed (job ${job_id}): ${job.error}`);
      return job;
    },
    async close() {
      await send('DELETE', `/api/v1/api-tokens/${session.id}`);
      await workers.close();
      await app.close();
    },
  };
}

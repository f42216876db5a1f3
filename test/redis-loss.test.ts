// Redis keeps nothing on disk: when it restarts empty, the workers notice within their check
// interval and put the schedules back from PostgreSQL (the job schedulers of every feature and the
// monitoring schedule), and job ids never repeat one used before the loss. A private redis-server
// of this file is killed and started again empty on the same port; the workers run in-process.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../src/context.js';
import { composeFeatures } from '../src/features.js';
import { startWorkers } from '../src/worker.js';
import { useTestApp } from './helpers/app.js';
import { actionsOf, confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import { passwordLogin, useSshd } from './helpers/sshd.js';

let redis: RedisServer;
const sshd = useSshd();
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});
const t = useTestApp({ workers: true, env: () => ({ REDIS_URL: redis.url, REDIS_LOSS_CHECK_MS: '500' }) });

/** Every job scheduler in Redis, as "<queue>/<scheduler id>". */
async function schedulers(): Promise<string[]> {
  const out: string[] = [];
  for (const name of composeFeatures(t.ctx).jobs.queueNames()) {
    for (const s of await t.ctx.queues.queue(name).getJobSchedulers()) out.push(`${name}/${s.key}`);
  }
  return out.sort();
}

const act = actionsOf(t, 'root-servers');
const getJob = (id: string) => request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${id}` });

const confirmedServer = async () =>
  (await confirmedRootServer(t.app, t.as.operator, sshd, { monitor_update_interval: '5s', ...passwordLogin() })).id;

/** run_cmd in a job, waited for; its public job id. */
async function runCmd(serverId: number, cmd: string): Promise<string> {
  const res = await act(serverId, 'run_cmd', { cmd });
  expect(res.statusCode, res.body).toBe(202);
  const id = res.json().job_id as string;
  expect(await waitForJob(t.app, t.as.user, id, 30_000)).toMatchObject({ state: 'completed' });
  return id;
}

describe('Redis restarted empty', () => {
  it('the job schedulers and the monitoring schedule come back from PostgreSQL; a monitored server gets new samples', async () => {
    const id = await confirmedServer();
    expect((await act(id, 'start_monitor')).statusCode).toBe(200);
    const samplesSince = (since: Date) => t.ctx.db.monitorLog.count({ where: { root_server_id: id, created_at: { gt: since } } });
    await expect.poll(() => samplesSince(new Date(0)), { timeout: 30_000, interval: 250 }).toBeGreaterThan(0);
    const expected = [
      'lifecycle/backup-schedule',
      'lifecycle/lost-operations',
      'lifecycle/trial-lifecycle',
      'maintenance/collect-usage',
      'maintenance/monitor-log-retention',
      'maintenance/odoo-lost-setups',
      'maintenance/pool-room',
      'maintenance/prune_webhook_calls',
      'maintenance/standby-pool',
      'maintenance/verify-domains',
      'moves/moves-sweep',
      'pools/pools-sweep',
      'rollouts/rollout-resume',
      'staging/staging-expire',
      'staging/staging-follow',
    ];
    expect(await schedulers()).toEqual(expected);

    // A second worker process: both see the loss and put the same schedules back.
    const other = await createContext(t.ctx.config, pino({ level: 'silent' }));
    const otherWorkers = await startWorkers(other);
    try {
      await redis.restart();
      const restartedAt = new Date();
      await expect.poll(schedulers, { timeout: 30_000, interval: 250 }).toEqual(expected);
      await expect.poll(() => samplesSince(restartedAt), { timeout: 60_000, interval: 250 }).toBeGreaterThan(0);
      expect(t.ctx.logText()).toContain('Redis lost its data: putting the schedules back from PostgreSQL');
    } finally {
      await otherWorkers.close();
      await other.close();
    }
  }, 180_000);

  it('job ids do not repeat those used before the loss; an id from before it is a clean 404', async () => {
    const id = await confirmedServer();
    const before = await runCmd(id, 'echo before');

    await redis.restart();
    expect((await getJob(before)).statusCode).toBe(404);
    const cancel = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/jobs/${before}/actions/cancel` });
    expect(cancel.statusCode).toBe(404);
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/jobs' })).statusCode).toBe(200);

    const after = await runCmd(id, 'echo after');
    expect(after).not.toBe(before);
    expect((await getJob(before)).statusCode).toBe(404);
    // The action log tells the two jobs apart.
    const logs = await t.ctx.db.actionLog.findMany({ where: { job_id: { in: [before, after] } }, orderBy: { id: 'asc' } });
    expect(logs.map((l) => [l.job_id, l.input_text])).toEqual([
      [before, 'echo before'],
      [after, 'echo after'],
    ]);
  }, 120_000);
});

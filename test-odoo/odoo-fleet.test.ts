// A fleet of Odoo hosts on the real Odoo (issue 49, DESIGN §22): three Odoo hosts of one version on
// this machine (three ports and base paths; A and B on the machine's PostgreSQL, C on a second
// cluster). The template built on A is copied to B and C (its pool); twelve deployments are spread
// over the three; a cordoned host gets none, nor a host whose Odoo is stopped; `drain` empties A
// through moves, and every moved customer still signs in, on its new host.
// Odoo's ports: 20600 (A), 20610 (B), 20620 (C); the first source of ODOO_SOURCE only (18.0 when given).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { type LocalCluster, startLocalCluster } from '../test/helpers/pg-cluster.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { freePort } from '../test/helpers/sshd.js';
import { jsonRpc, odooSources, rpcResult, useOdooFixture } from './odoo-fixture.js';
import { newOdooVersion } from './odoo-host.js';

const all = odooSources();
const src = all.find((s) => s.series === 18) ?? all[0]!;
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

let cluster: LocalCluster;
let pgC: number;
beforeAll(async () => {
  cluster = startLocalCluster(await freePort());
  const res = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/postgresql-servers',
    payload: { name: 'second cluster', ip: '127.0.0.1', port: cluster.port, username: 'postgres' },
  });
  expect(res.statusCode, res.body).toBe(201);
  pgC = res.json().id;
}, 120_000);
afterAll(() => cluster?.stop());

const PORTS = { A: 20600, B: 20610, C: 20620 } as const;
type Name = keyof typeof PORTS;

describe(`a fleet of three Odoo ${src.name} hosts`, () => {
  test('copies on every host of the pool, trials spread, cordoned and stopped hosts skipped, a host drained', async () => {
    const version = await newOdooVersion(f, src, 'fleet');
    const setup = async (pgServer: number, port: number, base?: string) => {
      const host = await f.newHost();
      const res = await f.runJob(host, 'setup_odoo', {
        odoo_version_id: version.id,
        postgresql_server_id: pgServer,
        http_port: port,
        workers: 0,
        max_cron_threads: 0,
        ...(base ? { base_path: base } : {}),
      });
      expect(res.state, JSON.stringify(res)).toBe('completed');
      return host;
    };
    const hosts: Record<Name, number> = {
      A: await setup(f.pgServerId, PORTS.A),
      B: await setup(f.pgServerId, PORTS.B, `${f.base}/host-b`),
      C: await setup(pgC, PORTS.C, `${f.base}/host-c`),
    };
    const nameOf = (id: number) => (Object.keys(hosts) as Name[]).find((n) => hosts[n] === id)!;

    // The template, built on A, is copied to B and C (its pool) by the sync its build queues.
    const templateDb = `svc_odoo_fleet_tpl_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: {
        name: `Odoo ${src.name} fleet`,
        postgresql_server_id: f.pgServerId,
        template_db_name: templateDb,
        root_server_id: hosts.A,
      },
    });
    expect(template.statusCode, template.body).toBe(201);
    const templateId = template.json().id as number;
    expect((await f.runJob(templateId, 'build', { modules: ['base'] }, 'database-templates')).state).toBe('completed');
    const copies = async () =>
      (await request(f.t.app, f.t.as.user, { method: 'GET', url: `/api/v1/database-templates/${templateId}/copies` })).json().items as {
        root_server_id: number;
        in_step: boolean;
        state: string;
        error: string | null;
      }[];
    await expect
      .poll(
        async () =>
          (await copies())
            .filter((c) => c.in_step)
            .map((c) => c.root_server_id)
            .sort(),
        { timeout: 10 * 60_000, interval: 1000 },
      )
      .toEqual([hosts.B, hosts.C].sort());

    let n = 0;
    const customers: { id: number; database: string; login: string; password: string }[] = [];
    /** A subscription deployed from the template; answers the host it was placed on. */
    const deploy = async (): Promise<Name> => {
      const email = `fleet-${++n}-${Date.now()}@example.com`;
      const partner = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/partners',
        payload: { name: `Jane ${n}`, email },
      });
      const database = `svc_odoo_fleet_c${n}_${Date.now().toString(36)}`;
      const created = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: {
          name: `Trial ${n}`,
          partner_id: partner.json().id,
          database_template_id: templateId,
          database_name: database,
          is_trial: true,
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().id as number;
      const act = (name: string) =>
        request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
      expect((await act('confirm')).statusCode).toBe(200);
      const started = await act('deploy');
      expect(started.statusCode, started.body).toBe(202);
      const job = await waitForJob(f.t.app, f.t.as.operator, started.json().job_id, 10 * 60_000);
      expect(job.state, JSON.stringify(job)).toBe('completed');
      const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));
      customers.push({ id, database, login, password });
      const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id } });
      return nameOf(sub.root_server_id!);
    };
    const count = (placed: Name[]) => ({
      A: placed.filter((p) => p === 'A').length,
      B: placed.filter((p) => p === 'B').length,
      C: placed.filter((p) => p === 'C').length,
    });

    // Twelve, one after the other: the least filled host each time.
    const first: Name[] = [];
    for (let i = 0; i < 12; i++) first.push(await deploy());
    expect(count(first)).toEqual({ A: 4, B: 4, C: 4 });

    // Cordoned: C gets none.
    const cordon = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/root-servers/${hosts.C}/actions/cordon`,
      payload: { reason: 'fleet test' },
    });
    expect(cordon.statusCode, cordon.body).toBe(200);
    const whileCordoned = [await deploy(), await deploy()];
    expect(whileCordoned).not.toContain('C');
    const uncordon = await request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${hosts.C}/actions/uncordon` });
    expect(uncordon.statusCode, uncordon.body).toBe(200);

    // Odoo stopped on B: B gets none.
    expect((await f.runJob(hosts.B, 'stop_odoo')).state).toBe('completed');
    const whileStopped = [await deploy(), await deploy()];
    expect(whileStopped).not.toContain('B');
    expect((await f.runJob(hosts.B, 'restart_odoo')).state).toBe('completed');

    // Drain A: cordoned, its tenants moved to B and C, each customer signing in there.
    const onA = async () => f.t.ctx.db.subscription.findMany({ where: { root_server_id: hosts.A }, select: { id: true } });
    const leaving = (await onA()).map((s) => s.id);
    expect(leaving.length).toBeGreaterThanOrEqual(4);
    const drained = await f.runJob(hosts.A, 'drain', { batch_size: 2 });
    expect(drained.state, JSON.stringify(drained)).toBe('completed');
    expect(drained.result).toMatchObject({ state: 'done', moved: leaving.length, left_over: null });
    expect(await onA()).toEqual([]);
    expect((await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: hosts.A } })).cordoned_at).not.toBeNull();
    for (const c of customers.filter((x) => leaving.includes(x.id))) {
      const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: c.id } });
      const to = nameOf(sub.root_server_id!);
      expect(to).not.toBe('A');
      const uid = rpcResult((await jsonRpc(PORTS[to], 'common', 'authenticate', [c.database, c.login, c.password, {}])).body);
      expect(uid, `${c.database} on ${to}`).toBeGreaterThan(0);
    }
    // A new trial goes to B or C: A is cordoned.
    expect(await deploy()).not.toBe('A');
  });
});

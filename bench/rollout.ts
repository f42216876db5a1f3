// ODOO_SOURCE=<tarball> npm run bench:rollout [-- --tenants 50 --workers 2]
// A code rollout (DESIGN §18) through the real service (HTTP API, jobs, workers) on this machine as
// the Odoo host (a local sshd, root through sudo), the machine's PostgreSQL, mails on a local SMTP
// server, the local git host of the tests, and the real Odoo of ODOO_SOURCE (its first tarball), in
// prefork mode (--workers, default 2):
// 1. setup_odoo, a repository deploying a small addon (one model), setup_odoo again (the deploy
//    path on the addons path), a template with the addon, --tenants tenants deployed from it; one
//    of them holds a record the next version refuses (its update fails on purpose);
// 2. a push of the next version (a new field) while a client asks every tenant's login page in
//    turn (X-Odoo-Database, as svc's proxy sends it) and /web/health, without pause;
// 3. prints the rollout's total time (push → done), per-tenant downtime (each tenant's time in
//    maintenance, from the rollout: p50/p95/max), the requests to tenants not being updated at that
//    moment that failed (target 0; any answer but 200 counts), the maintenance pages served, the
//    restored tenant, and met/missed for DESIGN §18's targets.
// Needs root (sshd, sudo) and the OS packages of Odoo (run npm run test:odoo once). Port 18790.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sleep } from '../src/core/sleep.js';
import { startFakeGitHost } from '../test/helpers/git-host.js';
import { benchOdooSource, serverWideModulesOf } from '../test/helpers/odoo-source.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { startSmtpServer, textOf } from '../test/helpers/smtp.js';
import { startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { completedJob, startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const TENANTS = arg('tenants', 50);
const WORKERS = arg('workers', 2);
const PORT = 18790;
const TOKEN = 'ghp_bench-rollout-token-0123456789';
const MODULE = 'svc_bench_rollout';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : 0;
};
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

function addon(version: 1 | 2): Record<string, string> {
  return {
    [`${MODULE}/__init__.py`]: 'from . import models\n',
    [`${MODULE}/__manifest__.py`]: `{"name": "bench rollout", "version": "${version}.0", "depends": ["base"], "data": ["security/ir.model.access.csv"], "license": "LGPL-3"}\n`,
    [`${MODULE}/security/ir.model.access.csv`]:
      'id,name,model_id:id,group_id:id,perm_read,perm_write,perm_create,perm_unlink\naccess_b,b,model_svc_bench_rollout,base.group_user,1,1,1,1\n',
    [`${MODULE}/models/__init__.py`]: 'from . import thing\n',
    [`${MODULE}/models/thing.py`]: [
      'from odoo import fields, models',
      '',
      'class Thing(models.Model):',
      '    _name = "svc.bench.rollout"',
      '    _description = "bench"',
      '    name = fields.Char()',
      ...(version === 2
        ? [
            '    code = fields.Char(default="v2")',
            '',
            '    def _auto_init(self):',
            '        res = super()._auto_init()',
            '        self.env.cr.execute("SELECT 1 FROM svc_bench_rollout WHERE name = %s", ["poison"])',
            '        if self.env.cr.fetchone():',
            '            raise ValueError("bench: this tenant fails on purpose")',
            '        return res',
          ]
        : []),
      '',
    ].join('\n'),
  };
}

async function main() {
  const src = benchOdooSource('bench:rollout', process.env.ODOO_SOURCE);
  const smtp = await startSmtpServer();
  const sshd = await startSshd();
  const git = await startFakeGitHost(TOKEN);
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-rollout-'));
  await chmod(base, 0o755);
  const bench = await createBenchContext('rollout', {
    SMTP_URL: smtp.url,
    GIT_API_URL: git.url,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
    ODOO_HEALTH_TIMEOUT_MS: '120000',
  });
  const { ctx } = bench;
  let closeAll = async () => {};
  let rootId: number | null = null;
  let api: Awaited<ReturnType<typeof startBenchService>>['api'] | null = null;
  try {
    console.log(`Odoo ${src.series}.0, ${TENANTS} tenants, ${WORKERS} workers; ${os.cpus().length} CPUs; load average ${loadavg()}`);
    const service = await startBenchService(ctx);
    closeAll = service.close;
    api = service.api;
    const pgServer = await api('POST', '/postgresql-servers', { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' });
    const root = await api('POST', '/root-servers', {
      ip: sshd.host,
      port: sshd.port,
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    rootId = root.id;
    await api('POST', `/root-servers/${root.id}/actions/confirm`);
    const version = await api('POST', '/odoo-versions', {
      name: `${src.series}.0-bench-rollout`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: src.packages,
      server_wide_modules: serverWideModulesOf(src.series),
    });
    const setup = async () => {
      const job = await api!<{ job_id: string }>('POST', `/root-servers/${root.id}/actions/setup_odoo`, {
        odoo_version_id: version.id,
        postgresql_server_id: pgServer.id,
        http_port: PORT,
        workers: WORKERS,
        max_cron_threads: 0,
      });
      await completedJob(api!, job.job_id);
    };
    await setup();

    const account = await api('POST', '/git-accounts', { access_token: TOKEN });
    const repoName = 'bench/rollout-addons';
    const remote = await git.repo(repoName);
    remote.commit(addon(1), 'v1');
    const repo = await api('POST', '/git-repositories', {
      name: repoName,
      branch_name: 'main',
      git_account_id: account.id,
      root_server_id: root.id,
    });
    const push = async () => {
      const job = await api!<{ job_id: string }>('POST', `/git-repositories/${repo.id}/actions/push_commit`);
      await completedJob(api!, job.job_id);
      return (await ctx.db.gitCommit.findFirstOrThrow({ where: { repository_id: repo.id }, orderBy: { id: 'desc' } })).id;
    };
    type RolloutOut = {
      state: string;
      counts: Record<string, number>;
      tenants: {
        subscription_id: number;
        database_name: string;
        state: string;
        started_at: string | null;
        finished_at: string | null;
        duration_ms: number | null;
        error: string | null;
      }[];
    };
    const rolloutOf = async (commitId: number): Promise<RolloutOut> => {
      for (;;) {
        const { items } = await api!<{ items: RolloutOut[] }>('GET', `/git-repositories/${repo.id}/commits/${commitId}/rollouts`);
        if (items[0]?.state === 'done') return items[0];
        await sleep(250);
      }
    };
    await rolloutOf(await push());
    await setup();

    const templateDb = `${ctx.config.QUEUE_PREFIX}_tpl`;
    const template = await api('POST', '/database-templates', {
      name: 'bench rollout',
      postgresql_server_id: pgServer.id,
      template_db_name: templateDb,
      root_server_id: root.id,
    });
    await completedJob(
      api,
      (await api<{ job_id: string }>('POST', `/database-templates/${template.id}/actions/build`, { modules: [MODULE] })).job_id,
    );

    let t0 = performance.now();
    const databases: string[] = [];
    const deployOne = async (n: number) => {
      const email = `bench-${n}@example.com`;
      const partner = await api!('POST', '/partners', { name: `Tenant ${n}`, email });
      const database = `${ctx.config.QUEUE_PREFIX}_t${n}`;
      const sub = await api!('POST', '/subscriptions', {
        name: `Tenant ${n}`,
        partner_id: partner.id,
        database_template_id: template.id,
        database_name: database,
        is_trial: n % 2 === 0,
        trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
      });
      await api!('POST', `/subscriptions/${sub.id}/actions/confirm`);
      await completedJob(api!, (await api!<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/deploy`)).job_id);
      textOf(await smtp.waitFor(email, 1, 120_000));
      databases[n - 1] = database;
    };
    for (let n = 1; n <= TENANTS; n += 5) {
      await Promise.all(Array.from({ length: Math.min(5, TENANTS - n + 1) }, (_, i) => deployOne(n + i)));
    }
    console.log(`${TENANTS} tenants deployed in ${secs(performance.now() - t0)}; load average ${loadavg()}`);
    for (const db of databases) await queryIn(db, "INSERT INTO svc_bench_rollout (name) VALUES ('a record')");
    const poisoned = databases[Math.floor(TENANTS / 2)]!;
    await queryIn(poisoned, "INSERT INTO svc_bench_rollout (name) VALUES ('poison')");

    // The push, with a client asking every tenant (and /web/health) in turn, without pause.
    remote.commit(addon(2), 'v2');
    const asked: { db: string | null; at: number; status: number | string }[] = [];
    let asking = true;
    const client = (async () => {
      let i = 0;
      while (asking) {
        const db = i % (TENANTS + 1) === TENANTS ? null : databases[i % (TENANTS + 1)]!;
        i++;
        const at = Date.now();
        try {
          const res = await fetch(`http://127.0.0.1:${PORT}${db ? '/web/login' : '/web/health'}`, {
            headers: db ? { 'x-odoo-database': db, 'x-forwarded-host': `${db}.odoo.test`, 'x-forwarded-proto': 'https' } : {},
            redirect: 'manual',
            signal: AbortSignal.timeout(30_000),
          });
          await res.arrayBuffer();
          asked.push({ db, at, status: res.status });
        } catch (err) {
          asked.push({ db, at, status: String((err as Error).cause ?? err) });
        }
      }
    })();
    t0 = performance.now();
    const rollout = await rolloutOf(await push());
    const totalMs = performance.now() - t0;
    asking = false;
    await client;

    const windows = new Map(
      rollout.tenants.map((t) => [
        t.database_name,
        [Date.parse(t.started_at ?? '0') - 1000, Date.parse(t.finished_at ?? '0') + 1000] as const,
      ]),
    );
    const beingUpdated = (a: { db: string | null; at: number }) => {
      const w = a.db ? windows.get(a.db) : undefined;
      return w !== undefined && a.at >= w[0] && a.at <= w[1];
    };
    const others = asked.filter((a) => !beingUpdated(a));
    const failed = others.filter((a) => a.status !== 200);
    const maintenance = asked.filter((a) => beingUpdated(a) && a.status === 503).length;
    const downtime = rollout.tenants.filter((t) => t.state === 'updated' || t.state === 'failed').map((t) => t.duration_ms ?? 0);
    const restored = rollout.tenants.find((t) => t.database_name === poisoned);
    const columns = await queryIn<{ c: string }>(
      poisoned,
      "SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'svc_bench_rollout' AND column_name = 'code'",
    );
    console.log(`rollout: ${secs(totalMs)} from the push to its end; counts ${JSON.stringify(rollout.counts)}; load average ${loadavg()}`);
    console.log(
      `per-tenant downtime (in maintenance): p50 ${secs(pct(downtime, 50))}, p95 ${secs(pct(downtime, 95))}, max ${secs(Math.max(...downtime))}`,
    );
    console.log(
      `requests: ${asked.length} in all; ${others.length} to tenants not being updated (or /web/health), ${failed.length} failed${failed.length ? `: ${JSON.stringify(failed.slice(0, 5))}` : ''}; ${maintenance} maintenance pages to tenants being updated`,
    );
    console.log(
      `the tenant failing on purpose: ${restored?.state} (${(restored?.error ?? '').split('\n')[0]}); its new column ${columns.length ? 'exists (not restored!)' : 'is absent (restored)'}`,
    );
    const retried = await ctx.db.actionLog.count({ where: { output_text: { startsWith: 'refused for want of PostgreSQL connections' } } });
    const [{ max }] = (await adminQuery<{ max: string }>("SELECT current_setting('max_connections') AS max")) as [{ max: string }];
    console.log(`PostgreSQL max_connections ${max}; tries refused for want of connections and run again: ${retried}`);
    console.log(`${verdict(failed.length === 0)}: failed requests to tenants not being updated ${failed.length} = 0`);
    console.log(`${verdict(pct(downtime, 95) <= 15_000)}: per-tenant downtime p95 ${secs(pct(downtime, 95))} ≤ 15 s`);
    console.log(
      `${verdict(restored?.state === 'failed' && columns.length === 0 && rollout.counts.updated === TENANTS - 1)}: the failing tenant restored, the ${TENANTS - 1} others updated`,
    );
  } finally {
    if (api && rootId !== null) {
      const stop = await api<{ job_id: string }>('POST', `/root-servers/${rootId}/actions/stop_odoo`).catch(() => null);
      if (stop) await completedJob(api, stop.job_id).catch(() => {});
    }
    await closeAll();
    await bench.close(); // with the host's role, its template and every customer database and role
    await git.close();
    await smtp.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);

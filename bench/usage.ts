// npm run bench:usage [-- --tenants 1000] [--rounds 3]
// A usage round over --tenants databases on the machine's PostgreSQL, copied by the bench from a
// small Odoo-shaped template (with users and model limits to count) and each handed to a role of its
// own as a deployment does (svc_db_<oid>, an ordinary login role: svc measures a tenant only as its
// own role, never as a superuser) with the package's parameters written inside, their filestores on
// a local sshd host. Prints per round: its time, the service's CPU (this process runs the round) and
// PostgreSQL's CPU (its live processes, plus what its ended backends left in the postmaster's
// children times), with met/missed for the targets: a round ≤ 30 s, service CPU ≤ 10 s per round,
// and every tenant measured (no missing measure: a refused tenant would be a refusal path timed).
// Needs root (sshd with sudo, /proc of the postgres processes).
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { mapLimited } from '../src/core/session-lock.js';
import { handOverToTenantRole, newRolePassword, setPackageLimits } from '../src/instances/index.js';
import { onInstance } from '../src/subscriptions/index.js';
import { createUsageRound } from '../src/usage/usage-round.js';
import { createOdooTemplate, queryIn, TENANT_ROLE } from '../test/helpers/odoo-template.js';
import { adminQuery, dropDatabase } from '../test/helpers/pg.js';
import { startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { createBenchContext, runBench, verdict } from './bench-context.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const TENANTS = arg('tenants', 1000);
const ROUNDS = arg('rounds', 3);
const TICK = 100; // clock ticks per second (USER_HZ)

/** CPU seconds of every postgres process now alive, plus its postmaster's ended children. */
function postgresCpu(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    if (comm !== 'postgres') continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields 14..17 (utime, stime, cutime, cstime) are f[11..14] after the state field
    ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return ticks / TICK;
}

async function main() {
  const sshd = await startSshd();
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-usage-'));
  const bench = await createBenchContext('usage', { ODOO_BASE_PATH: base, LOG_LEVEL: 'error' });
  const { ctx } = bench;
  const template = `${ctx.config.QUEUE_PREFIX}_tpl`;
  const tenants: string[] = [];
  const roles: string[] = [];
  try {
    console.log(
      `load average at start: ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; ${os.cpus().length} × ${os.cpus()[0]?.model}`,
    );
    await createOdooTemplate(template);
    await queryIn(
      template,
      `INSERT INTO res_users (login, active, share, partner_id, company_id)
       SELECT 'user' || g || '@example.com', g % 5 <> 0, g % 7 = 0, 1, 1 FROM generate_series(1, 40) g;
       INSERT INTO res_groups_users_rel (gid, uid) SELECT CASE WHEN share THEN 2 ELSE 1 END, id FROM res_users WHERE id > 2;
       INSERT INTO res_partner (name) SELECT 'Partner ' || g FROM generate_series(1, 2000) g`,
    );
    const server = await ctx.db.postgresqlServer.create({ data: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' } });
    const root = await ctx.db.rootServer.create({
      data: {
        ip: sshd.host,
        port: sshd.port,
        username: TEST_USERS.sudoNoPassword.name,
        password: await ctx.secretBox.encrypt(TEST_USERS.sudoNoPassword.password),
        sudo_user: true,
        sudo_user_no_password: true,
        state: 'confirmed',
      },
    });
    const tpl = await ctx.db.databaseTemplate.create({
      data: { name: 'Odoo', postgresql_server_id: server.id, template_db_name: template, root_server_id: root.id },
    });
    const partner = await ctx.db.partner.create({ data: { name: 'Bench', email: 'bench@example.com' } });
    const [{ cluster }] = (await adminQuery<{ cluster: string }>('SELECT system_identifier::text AS cluster FROM pg_control_system()')) as [
      { cluster: string },
    ];

    let t0 = performance.now();
    // As a deployment makes them: a copy of the template, handed over (database and objects) to its own role.
    await mapLimited(
      Array.from({ length: TENANTS }, (_, i) => i),
      4,
      async (i) => {
        const name = `${template}_t${i}`;
        await adminQuery(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
        tenants.push(name);
        const [{ oid }] = (await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [name])) as [
          { oid: string },
        ];
        const password = newRolePassword();
        const made = { name, oid: BigInt(oid), systemIdentifier: cluster };
        const role = await handOverToTenantRole(ctx.secretBox, server, made, TENANT_ROLE, password);
        roles.push(role);
        const dir = path.join(base, 'data', 'filestore', name, 'ab');
        await mkdir(dir, { recursive: true });
        await writeFile(path.join(dir, 'logo'), Buffer.alloc(4096 * (1 + (i % 8)), 1));
        const sub = await ctx.db.subscription.create({
          data: {
            name: `Tenant ${i}`,
            partner_id: partner.id,
            state: 'running',
            database_template_id: tpl.id,
            database_name: name,
            database_created_at: new Date(),
            database_system_identifier: cluster,
            database_oid: BigInt(oid),
            database_role: role,
            database_role_password: await ctx.secretBox.encrypt(password),
            postgresql_server_id: server.id,
            root_server_id: root.id,
            user_limit: 30,
            storage_limit_gb: 1,
            model_limits: { 'res.partner': 5000 },
          },
        });
        // The package inside the instance, as the deployment writes it (svc's addon enforces it).
        await onInstance(ctx, sub, (query) => setPackageLimits(query, sub));
      },
    );
    console.log(`${TENANTS} tenant databases and filestores made in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const usageRound = createUsageRound(ctx);
    let worst = { seconds: 0, cpu: 0, missing: 0 };
    for (let r = 1; r <= ROUNDS; r++) {
      const cpu0 = process.cpuUsage();
      const pg0 = postgresCpu();
      t0 = performance.now();
      const result = await usageRound.collect({ userId: null, jobId: null });
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const service = (cpu.user + cpu.system) / 1e6;
      const missing = Object.keys(result.missing).length;
      console.log(
        `round ${r}: ${seconds.toFixed(2)} s, ${result.measured} measured, ${missing} with a missing measure; service CPU ${service.toFixed(2)} s, PostgreSQL CPU ${(postgresCpu() - pg0).toFixed(2)} s; load ${os.loadavg()[0]!.toFixed(2)}`,
      );
      if (seconds > worst.seconds) worst = { ...worst, seconds };
      if (service > worst.cpu) worst = { ...worst, cpu: service };
      worst.missing = Math.max(worst.missing, missing + (TENANTS - result.measured));
    }
    console.log(`${verdict(worst.seconds <= 30)}: the slowest round took ${worst.seconds.toFixed(2)} s ≤ 30 s`);
    console.log(`${verdict(worst.cpu <= 10)}: the most service CPU in a round was ${worst.cpu.toFixed(2)} s ≤ 10 s`);
    console.log(`${verdict(worst.missing === 0)}: tenants not measured whole in a round, at most ${worst.missing} = 0`);
  } finally {
    for (const name of [...tenants, template]) await dropDatabase(name).catch(() => {});
    for (const role of roles) await adminQuery(`DROP ROLE IF EXISTS "${role}"`).catch(() => {});
    await bench.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);

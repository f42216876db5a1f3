// The Odoo host of bench:backup, on this machine (a local sshd, root through sudo): the real Odoo of
// ODOO_SOURCE set up by svc (setup_odoo, prefork, a template built with `base`), or without it a
// stand-in HTTP server on the host's Odoo port and an Odoo-shaped template. Tenants are deployed from
// the template through svc's API, as a customer's are.
import { createServer, type Server } from 'node:http';
import pg from 'pg';
import type { AppContext } from '../src/context.js';
import { benchOdooSource, serverWideModulesOf } from '../test/helpers/odoo-source.js';
import { createOdooTemplate, TENANT_ROLE } from '../test/helpers/odoo-template.js';
import { databaseUrl } from '../test/helpers/pg.js';
import { TEST_USERS, type Sshd } from '../test/helpers/sshd.js';
import { type BenchApi, completedJob, registerOdooHost } from './bench-api.js';

/** What the stand-in does for a request naming a database (X-Odoo-Database), said in the bench's output. */
export const STAND_IN_QUERY = 'SELECT count(*) FROM res_partner';

/**
 * The stand-in Odoo: a request with X-Odoo-Database is answered 200 from that database (a new
 * connection, STAND_IN_QUERY), 500 when the database does not answer; any other request 200.
 */
export async function startOdooStandIn(port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const db = req.headers['x-odoo-database'];
    if (typeof db !== 'string') {
      res.end('ok');
      return;
    }
    const client = new pg.Client({ connectionString: databaseUrl(db), connectionTimeoutMillis: 10_000 });
    client
      .connect()
      .then(() => client.query<{ n: string }>(STAND_IN_QUERY.replace('count(*)', 'count(*)::text AS n')))
      .then(
        (r) => res.end(`partners: ${r.rows[0]?.n}`),
        (err: Error) => {
          res.statusCode = 500;
          res.end(err.message);
        },
      )
      .finally(() => client.end().catch(() => {}));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

export interface BenchHost {
  rootId: number;
  templateId: number;
  /** A subscription deployed from the template on the host: its id and database name. */
  deploy(name: string): Promise<{ id: number; database: string }>;
  /** Stops the host's Odoo (real Odoo only). */
  stop(): Promise<void>;
}

/**
 * The host and its template. `odooSource`: ODOO_SOURCE (a tarball) for the real Odoo on `port`
 * with `workers`; undefined for the stand-in (the service's ODOO_HTTP_PORT must be `port`).
 */
export async function prepareHost(
  ctx: AppContext,
  api: BenchApi,
  sshd: Sshd,
  o: { odooSource: string | undefined; port: number; workers: number },
): Promise<BenchHost> {
  const templateDb = `${ctx.config.QUEUE_PREFIX}_tpl`;
  let rootId: number;
  let templateId: number;
  let stop = async () => {};
  if (o.odooSource) {
    const src = benchOdooSource('bench:backup', o.odooSource);
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
      name: `${src.series}.0-bench-backup`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: src.packages,
      server_wide_modules: serverWideModulesOf(src.series),
    });
    stop = async () => {
      const job = await api<{ job_id: string }>('POST', `/root-servers/${root.id}/actions/stop_odoo`).catch(() => null);
      if (job) await completedJob(api, job.job_id).catch(() => {});
    };
    const setup = await api<{ job_id: string }>('POST', `/root-servers/${root.id}/actions/setup_odoo`, {
      odoo_version_id: version.id,
      postgresql_server_id: pgServer.id,
      http_port: o.port,
      workers: o.workers,
      max_cron_threads: 0,
    });
    await completedJob(api, setup.job_id);
    const template = await api('POST', '/database-templates', {
      name: 'bench backup',
      postgresql_server_id: pgServer.id,
      template_db_name: templateDb,
      root_server_id: root.id,
    });
    templateId = template.id;
    const build = await api<{ job_id: string }>('POST', `/database-templates/${template.id}/actions/build`, { modules: ['base'] });
    await completedJob(api, build.job_id);
  } else {
    await createOdooTemplate(templateDb);
    const { root, template } = await registerOdooHost(api, sshd, templateDb);
    rootId = root.id;
    templateId = template.id;
    // The host's own role, as setup_odoo records it: tenants then get roles of their own (as in test/backup-server).
    await ctx.db.rootServer.update({ where: { id: root.id }, data: { odoo_db_user: TENANT_ROLE } });
  }
  const partner = await api('POST', '/partners', { name: 'Bench backup', email: `bench-backup-${Date.now()}@example.com` });
  return {
    rootId,
    templateId,
    stop,
    async deploy(name) {
      const database = `${ctx.config.QUEUE_PREFIX}_${name}`;
      const sub = await api('POST', '/subscriptions', {
        name,
        partner_id: partner.id,
        database_template_id: templateId,
        database_name: database,
      });
      await api('POST', `/subscriptions/${sub.id}/actions/confirm`);
      await completedJob(api, (await api<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/deploy`)).job_id);
      return { id: sub.id, database };
    },
  };
}

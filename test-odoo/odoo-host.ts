// The suite's one step for "an Odoo host with a version and a built template": the version of a
// source (its packages and server-wide modules by series), a host svc sets up with it on the file's
// own port, and a template built there by the host's Odoo. Files call it in `beforeAll`, or take its
// parts where a test needs something in between (a repository on the addons path before the build).
import { beforeAll, expect } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import type { OdooSource } from '../test/helpers/odoo-source.js';
import { packagesOf, serverWideModulesOf, type OdooFixture } from './odoo-fixture.js';

/** A source of ODOO_SOURCE with the port its file gives Odoo. */
export type PortedSource = OdooSource & { port: number };

type Job = Awaited<ReturnType<OdooFixture['runJob']>>;

/** The version of `src`, named `<series>-<name>`. */
export function newOdooVersion(f: OdooFixture, src: OdooSource, name: string) {
  return f.newVersion({
    name: `${src.name}-${name}`,
    source_url: `file://${src.file}`,
    source_sha256: src.sha256,
    os_packages: packagesOf(src.series),
    server_wide_modules: serverWideModulesOf(src.series),
  });
}

/** setup_odoo on `host`, which must complete. */
export async function setupOdoo(f: OdooFixture, host: number, body: Record<string, unknown>): Promise<Job> {
  const job = await f.runJob(host, 'setup_odoo', body);
  expect(job.state, JSON.stringify(job)).toBe('completed');
  return job;
}

/** A template record on `host` (not built): `db` its database's name. */
export async function newTemplate(f: OdooFixture, host: number, name: string, db: string): Promise<number> {
  const res = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/database-templates',
    payload: { name, postgresql_server_id: f.pgServerId, template_db_name: db, root_server_id: host },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}

/** The template's build, which must complete; without `modules` its packages' modules. */
export async function buildTemplate(f: OdooFixture, templateId: number, modules?: string[]): Promise<Job> {
  const job = await f.runJob(templateId, 'build', modules ? { modules } : undefined, 'database-templates');
  expect(job.state, JSON.stringify(job)).toBe('completed');
  return job;
}

export interface OdooHostOptions {
  /** Names the version (`18.0-<name>`: letters, digits, dots and dashes) and the template; `prefix` starts the template database's name. */
  name: string;
  prefix: string;
  /** What setup_odoo is asked besides the version, the PostgreSQL server and the port (default: no workers, no cron). */
  setup?: Record<string, unknown>;
  /** The template's build (default: base); false: no template. */
  modules?: string[] | false;
}

export interface OdooHost {
  versionId: number;
  host: number;
  /** setup_odoo's payload, for a later setup_odoo of the same host. */
  setupBody: Record<string, unknown>;
  setup: Job;
  templateId: number;
  templateDb: string;
  built: Job;
}

/** The host set up with `src`'s version on `src.port`, and its template built. */
export async function odooHost(f: OdooFixture, src: PortedSource, opts: OdooHostOptions): Promise<OdooHost> {
  const made = {} as OdooHost;
  made.versionId = (await newOdooVersion(f, src, opts.name)).id;
  made.host = await f.newHost();
  made.setupBody = {
    odoo_version_id: made.versionId,
    postgresql_server_id: f.pgServerId,
    http_port: src.port,
    workers: 0,
    max_cron_threads: 0,
    ...opts.setup,
  };
  made.setup = await setupOdoo(f, made.host, made.setupBody);
  if (opts.modules === false) return made;
  made.templateDb = `${opts.prefix}_tpl${src.series}_${Date.now().toString(36)}`;
  made.templateId = await newTemplate(f, made.host, `Odoo ${src.name} ${opts.name}`, made.templateDb);
  made.built = await buildTemplate(f, made.templateId, opts.modules ?? ['base']);
  return made;
}

/** `odooHost` in the enclosing suite's `beforeAll`: the object is filled before its tests run. */
export function useOdooHost(f: OdooFixture, src: PortedSource, opts: OdooHostOptions): OdooHost {
  const made = {} as OdooHost;
  beforeAll(async () => {
    Object.assign(made, await odooHost(f, src, opts));
  }, 20 * 60_000);
  return made;
}

export interface Deployed {
  id: number;
  email: string;
  job: Awaited<ReturnType<typeof waitForJob>>;
}

/**
 * A subscription of a new partner on `templateId`, confirmed and deployed (a trial unless said):
 * the deploy job as it ended, for the test to judge.
 */
export async function deploySubscription(
  f: OdooFixture,
  opts: { templateId: number; database: string; email: string; name?: string; trial?: boolean },
): Promise<Deployed> {
  const partner = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/partners',
    payload: { name: 'Jane', email: opts.email },
  });
  const created = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/subscriptions',
    payload: {
      name: opts.name ?? 'Trial',
      partner_id: partner.json().id,
      database_template_id: opts.templateId,
      database_name: opts.database,
      is_trial: opts.trial ?? true,
      trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as number;
  const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
  expect((await act('confirm')).statusCode).toBe(200);
  const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
  return { id, email: opts.email, job };
}

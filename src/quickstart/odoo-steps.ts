// Odoo on the machine, through the API: the version, setup_odoo, setup_proxy, a template built by
// that Odoo (so owned by the host's ordinary role, never postgres), and a trial package with a
// standby pool. Each record is found by its name and put right where it differs.
import { DEFAULT_OS_PACKAGES } from '../odoo/index.js';
import type { ApiSession } from './api-session.js';
import type { QuickstartOptions } from './quickstart-options.js';
import { QuickstartError } from './quickstart-errors.js';

type Row = Record<string, unknown> & { id: number };
type Print = (line: string) => void;

export const TRIAL_URL_STRING = 'odoo';
const STANDBY_POOL_SIZE = 1;
const TEMPLATE_MODULES = ['base'];
/** How long quickstart waits for the first standby (the pool job runs every minute). */
const STANDBY_WAIT_MS = 4 * 60_000;

/** What a series needs (19.0: without decorator and typing-extensions, with magic; /jsonrpc from `rpc`). */
export function versionBody(o: QuickstartOptions) {
  const packages: string[] =
    o.series < 19
      ? [...DEFAULT_OS_PACKAGES]
      : [...DEFAULT_OS_PACKAGES.filter((p) => p !== 'python3-decorator' && p !== 'python3-typing-extensions'), 'python3-magic'];
  return {
    name: `${o.series}.0`,
    source_url: o.source.kind === 'url' ? o.source.url : `file://${o.source.path}`,
    source_sha256: o.sha256,
    os_packages: packages,
    server_wide_modules: o.series >= 19 ? ['base', 'rpc', 'web'] : ['base', 'web'],
  };
}

/** The Odoo version named after the series; its source put right when another was recorded. Answers whether it changed. */
export async function convergeVersion(api: ApiSession, o: QuickstartOptions, print: Print): Promise<{ version: Row; changed: boolean }> {
  const body = versionBody(o);
  const list = await api.call<{ items: Row[] }>('GET', `/api/v1/odoo-versions?name=${encodeURIComponent(body.name)}&limit=10`);
  const found = list.items.find((v) => v.name === body.name);
  if (!found) {
    const version = await api.call<Row>('POST', '/api/v1/odoo-versions', body);
    print(`Odoo version ${version.id} (${body.name}): created from ${body.source_url}`);
    return { version, changed: true };
  }
  if (found.source_url === body.source_url && found.source_sha256 === body.source_sha256) {
    print(`Odoo version ${found.id} (${body.name}): already there`);
    return { version: found, changed: false };
  }
  const version = await api.call<Row>('PATCH', `/api/v1/odoo-versions/${found.id}`, {
    source_url: body.source_url,
    source_sha256: body.source_sha256,
  });
  print(`Odoo version ${found.id} (${body.name}): source put right (${body.source_url})`);
  return { version, changed: true };
}

/** setup_odoo, unless the host already runs this version, healthy, on this PostgreSQL server. */
export async function convergeOdoo(
  api: ApiSession,
  host: Row,
  version: { version: Row; changed: boolean },
  pgServer: Row,
  print: Print,
): Promise<Row> {
  const same = host.odoo_version_id === version.version.id && host.odoo_postgresql_server_id === pgServer.id && !version.changed;
  if (same && host.odoo_state === 'running') {
    const status = await api.call<Row>('POST', `/api/v1/root-servers/${host.id}/actions/odoo_status`);
    if (status.healthy === true && status.routing_loaded !== false) {
      print(`Odoo on root server ${host.id}: already running ${status.version} on port ${status.http_port}, healthy`);
      return host;
    }
    print(`Odoo on root server ${host.id}: not healthy (${status.health}), set up again`);
  }
  const job = await api.runJob(
    `/api/v1/root-servers/${host.id}/actions/setup_odoo`,
    { odoo_version_id: version.version.id, postgresql_server_id: pgServer.id },
    `setup_odoo on root server ${host.id}`,
  );
  const result = job.result as Record<string, unknown>;
  print(`Odoo on root server ${host.id}: ${result.odoo_state} ${result.version} on port ${result.http_port}`);
  return api.call<Row>('GET', `/api/v1/root-servers/${host.id}`);
}

/** setup_proxy: Caddy in front of the tenants' addresses (idempotent: the same files are only reloaded). */
export async function convergeProxy(api: ApiSession, host: Row, print: Print): Promise<void> {
  const job = await api.runJob(`/api/v1/root-servers/${host.id}/actions/setup_proxy`, undefined, `setup_proxy on root server ${host.id}`);
  const result = job.result as Record<string, unknown>;
  print(`proxy on root server ${host.id}: ${result.status ?? 'done'}`);
}

/**
 * The template, built by the host's Odoo when it was never built. Its database name carries svc's
 * own database name, so two installations on one PostgreSQL server never take each other's.
 */
export async function convergeTemplate(
  api: ApiSession,
  o: QuickstartOptions,
  svcDatabase: string,
  host: Row,
  pgServer: Row,
  print: Print,
): Promise<Row> {
  const name = `Odoo ${o.series}.0`;
  const dbName = `${svcDatabase}_odoo${o.series}_template`
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .slice(0, 63);
  const list = await api.call<{ items: Row[] }>('GET', `/api/v1/database-templates?root_server_id=${host.id}&limit=100`);
  let template = list.items.find((t) => t.name === name);
  if (!template) {
    template = await api.call<Row>('POST', '/api/v1/database-templates', {
      name,
      postgresql_server_id: pgServer.id,
      template_db_name: dbName,
      root_server_id: host.id,
    });
    print(`database template ${template.id} (${name}, database ${dbName}): created`);
  } else if (template.postgresql_server_id !== pgServer.id) {
    throw new QuickstartError(
      `database template ${template.id} (${name}) is on PostgreSQL server ${template.postgresql_server_id}, not ${pgServer.id}: rename it`,
    );
  }
  if (template.template_oid == null) {
    await api.runJob(
      `/api/v1/database-templates/${template.id}/actions/build`,
      { modules: TEMPLATE_MODULES },
      `build of template ${template.id}`,
    );
    print(`database template ${template.id}: built by Odoo (${TEMPLATE_MODULES.join(', ')})`);
  }
  const check = await api.call<Row>('POST', `/api/v1/database-templates/${template.id}/actions/check`);
  print(`database template ${template.id}: checked (${check.template_db_name}, filestore ${check.filestore})`);
  return api.call<Row>('GET', `/api/v1/database-templates/${template.id}`);
}

/** The trial package deploying each verified trial from the template at once, with a standby pool. */
export async function convergeTrialPackage(api: ApiSession, o: QuickstartOptions, template: Row, print: Print): Promise<Row> {
  const want = { auto_run_subscription: true, database_template_id: template.id, active: true, standby_pool_size: STANDBY_POOL_SIZE };
  const list = await api.call<{ items: Row[] }>('GET', `/api/v1/trial-packages?url_string=${TRIAL_URL_STRING}&limit=10`);
  const found = list.items.find((p) => p.url_string === TRIAL_URL_STRING);
  if (!found) {
    const created = await api.call<Row>('POST', '/api/v1/trial-packages', {
      name: `Odoo ${o.series}.0`,
      url_string: TRIAL_URL_STRING,
      ...want,
    });
    print(`trial package ${created.id} (/saas/trial/${TRIAL_URL_STRING}): created, standby pool of ${STANDBY_POOL_SIZE}`);
    return created;
  }
  const wrong = Object.entries(want).filter(([k, v]) => (k === 'standby_pool_size' ? Number(found[k]) < Number(v) : found[k] !== v));
  if (wrong.length === 0) {
    print(`trial package ${found.id} (/saas/trial/${TRIAL_URL_STRING}): already there`);
    return found;
  }
  const fixed = await api.call<Row>('PATCH', `/api/v1/trial-packages/${found.id}`, Object.fromEntries(wrong));
  print(`trial package ${found.id}: put right (${wrong.map(([k]) => k).join(', ')})`);
  return fixed;
}

/** Waits (bounded) for a ready standby of the package, so the first visitor's Odoo is ready at once. */
export async function awaitStandby(api: ApiSession, pkg: Row, print: Print): Promise<boolean> {
  const until = Date.now() + STANDBY_WAIT_MS;
  for (;;) {
    const list = await api.call<{ items: Row[] }>('GET', `/api/v1/standby-databases?trial_package_id=${pkg.id}&limit=50`);
    if (list.items.some((s) => s.state === 'ready')) {
      print(`standby pool of trial package ${pkg.id}: ready`);
      return true;
    }
    if (Date.now() > until) {
      print(`standby pool of trial package ${pkg.id}: not ready yet (svc's workers fill it once it runs: npm start)`);
      return false;
    }
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

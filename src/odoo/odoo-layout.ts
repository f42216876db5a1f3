// Where an Odoo service lives on its host, under ODOO_BASE_PATH. One host may run several Odoo
// services (one per version, say), each its own port: the port names the service and its files.
//   <base>/versions/<name>/            a version's source tree (root's; Odoo only reads it)
//   <base>/config/odoo-<port>.conf     its configuration (root:odoo 0640: it holds the database password)
//   <base>/config/odoo-<port>.run      the supervisor script where systemd does not run
//   <base>/config/tenant-roles/<db>    each customer database's own role and password (root:odoo 0640)
//   <base>/run/odoo-<port>/            the supervisor's pid and `enabled` flag
//   <base>/logs/odoo-<port>.log        Odoo's output
//   <base>/data                        data_dir, shared: filestore/<database> is where svc copies filestores
//   <base>/svc-addons/                 svc's own addons (the repository's odoo-addons/), root's, on addons_path
// Every name here is made from validated values only (a base path of the config's pattern, a port,
// a version name of odooVersion's pattern).

export interface OdooLayout {
  base: string;
  /** The port Odoo listens on (127.0.0.1), which names the service. */
  port: number;
  /** systemd unit name / the supervisor's name. */
  service: string;
  config: string;
  /** Shared by the host's services: customer databases' credentials, one file each. */
  tenantRoles: string;
  runScript: string;
  runDir: string;
  log: string;
  dataDir: string;
  unit: string;
  versionsDir: string;
  /** svc's own addons, shared by the host's services. */
  svcAddons: string;
  sourceOf(version: string): string;
}

export function odooLayout(base: string, port: number): OdooLayout {
  const service = `odoo-${port}`;
  return {
    base,
    port,
    service,
    config: `${base}/config/${service}.conf`,
    tenantRoles: `${base}/config/tenant-roles`,
    runScript: `${base}/config/${service}.run`,
    runDir: `${base}/run/${service}`,
    log: `${base}/logs/${service}.log`,
    dataDir: `${base}/data`,
    unit: `/etc/systemd/system/${service}.service`,
    versionsDir: `${base}/versions`,
    svcAddons: `${base}/svc-addons`,
    sourceOf: (version) => `${base}/versions/${version}`,
  };
}

// Odoo's gevent (longpolling) port: the rule lives with the Caddy sites that proxy /websocket to it.
export { geventPortOf } from '../servers/index.js';

/** The interpreter that sees the Debian python3-* packages (another python3 may come first on PATH): the hosts' one. */
export { HOST_PYTHON as PYTHON } from '../core/host-program.js';

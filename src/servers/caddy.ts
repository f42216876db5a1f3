// Caddy on a root server (the Odoo host of customer domains): where its configuration lives, the
// main Caddyfile setup_proxy writes, and the program that checks and loads it (host/caddy.sh).
// Customer domains are one site file each under CADDY_SITES_DIR (src/domains/caddy-sites.ts); the
// main file imports them. Only values checked by the service (config, validated host names) reach it.
import { hostProgram, shCommand } from '../core/host-program.js';
import { shellQuote } from '../core/ssh.js';

export const CADDYFILE = '/etc/caddy/Caddyfile';
export const CADDY_SITES_DIR = '/etc/caddy/svc.d';
/** The PEM root of a private ACME server (ACME_CA_ROOT_PEM, copied from the service's machine). */
export const CADDY_ACME_ROOT = '/etc/caddy/svc-acme-ca-root.pem';
/** Caddy's log (JSON lines): certificate outcomes are read from it. */
export const CADDY_LOG = '/var/log/caddy/svc.log';
/**
 * Caddy's admin API: a Unix socket in a directory only Caddy's user and root enter (0700), never a
 * TCP port (on 127.0.0.1:2019, Caddy's default, anything on the host could load a configuration or
 * stop Caddy: a tenant's webhook sent by Odoo, for one). Caddy makes the socket; a stale one after
 * a crash is replaced at its next start.
 */
export const CADDY_ADMIN_DIR = '/var/lib/caddy/svc-admin';
export const CADDY_ADMIN_SOCKET = `${CADDY_ADMIN_DIR}/admin.sock`;
/** The first line of the main Caddyfile, which tells it from one the operator wrote. */
const WRITTEN_BY = '# Written by svc (setup_proxy)';

/** Odoo's own gevent (longpolling) port in prefork mode: 3 above its HTTP port, as 8069 and 8072. */
export const geventPortOf = (httpPort: number) => httpPort + 3;

/**
 * The spellings of the tenant header a client could send besides the one the site sets: Caddy
 * passes a header whose name holds `_`, and a WSGI server may read `X_Odoo_Database` as
 * HTTP_X_ODOO_DATABASE (svc's addon also drops such headers before Odoo reads them).
 */
export const TENANT_HEADER_SPELLINGS = ['X_Odoo_Database', 'X-Odoo_Database', 'X_Odoo-Database'] as const;
/**
 * Removed too: the host's secret, which only svc's own calls on the host carry (svc_instance then
 * serves them templates and standbys): a client's, were it ever known, never reaches Odoo.
 */
export const HOST_SECRET_HEADER = 'X-Svc-Host-Secret';

/** Caddy's program on the host (install, enable, the site files, the reload), with svc's paths. */
const CADDY_PROGRAM = hostProgram(new URL('./host/caddy.sh', import.meta.url));

/** The command running one action of host/caddy.sh (its header says which), the paths above first. */
export function caddyCommand(action: string, ...args: readonly (string | number)[]): string {
  return shCommand(CADDY_PROGRAM, 'svc-caddy', CADDYFILE, CADDY_SITES_DIR, CADDY_LOG, CADDY_ADMIN_DIR, action, ...args);
}

interface MainCaddyfileOptions {
  acmeCaUrl: string;
  acmeEmail?: string;
  /** Whether CADDY_ACME_ROOT is written (a private ACME server). */
  acmeRoot: boolean;
  /** The tenants' own addresses (tenant-sites.ts), '' for none. */
  tenantSites?: string;
  /** svc's answer to "may Caddy obtain a certificate for this name?" (on-demand TLS), when a tenant site uses it. */
  onDemandAsk?: string;
}

/** The main Caddyfile: the ACME account, the log the service reads, the customer sites and the tenants' own addresses. */
export function mainCaddyfile(o: MainCaddyfileOptions): string {
  const global = [
    `\tadmin unix/${CADDY_ADMIN_SOCKET}`,
    o.acmeEmail ? `\temail ${o.acmeEmail}` : null,
    `\tacme_ca ${o.acmeCaUrl}`,
    o.acmeRoot ? `\tacme_ca_root ${CADDY_ACME_ROOT}` : null,
    ...(o.onDemandAsk ? ['\ton_demand_tls {', `\t\task ${o.onDemandAsk}`, '\t}'] : []),
    '\tlog {',
    `\t\toutput file ${CADDY_LOG}`,
    '\t\tformat json',
    '\t}',
  ].filter((line) => line !== null);
  return [
    `${WRITTEN_BY}: customer domains are the site files in ${CADDY_SITES_DIR}, written by the service.`,
    '{',
    ...global,
    '}',
    '',
    `import ${CADDY_SITES_DIR}/*.caddy`,
    '',
    ...(o.tenantSites ? [o.tenantSites] : []),
  ].join('\n');
}

const NEW_CADDYFILE = `${CADDYFILE}.svc-new`;

/** Installs Caddy from the OS packages when missing; makes the directories and the log Caddy's user writes. */
export const INSTALL_CADDY = caddyCommand('install');

/** Writes stdin to `path` (0644: Caddy's user reads it). */
export const writeFileFromStdin = (path: string) => `umask 022; cat > ${shellQuote(path)}`;
export const WRITE_NEW_CADDYFILE = writeFileFromStdin(NEW_CADDYFILE);

/**
 * Checks the new main Caddyfile, puts it in place (the operator's own first kept as
 * Caddyfile.before-svc: one whose first line is not WRITTEN_BY's), then reloads Caddy, or enables
 * and starts it.
 */
export const ENABLE_CADDYFILE = caddyCommand('enable', WRITTEN_BY);

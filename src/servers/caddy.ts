// Caddy on a root server (the Odoo host of customer domains): where its configuration lives, the
// main Caddyfile setup_proxy writes, and the commands that check and load it. Customer domains are
// one site file each under CADDY_SITES_DIR (src/domains/caddy-sites.ts); the main file imports
// them. POSIX sh; only values checked by the service (config, validated host names) appear here.
import { shellQuote } from '../core/ssh.js';

export const CADDYFILE = '/etc/caddy/Caddyfile';
export const CADDY_SITES_DIR = '/etc/caddy/svc.d';
/** The PEM root of a private ACME server (ACME_CA_ROOT_PEM, copied from the service's machine). */
export const CADDY_ACME_ROOT = '/etc/caddy/svc-acme-ca-root.pem';
/** Caddy's log (JSON lines): certificate outcomes are read from it. */
export const CADDY_LOG = '/var/log/caddy/svc.log';
/** Changes of the configuration take this lock one at a time (flock), whoever makes them. */
const CADDY_LOCK = `${CADDY_SITES_DIR}/.lock`;
/**
 * Caddy's admin API: a Unix socket in a directory only Caddy's user and root enter (0700), never a
 * TCP port (on 127.0.0.1:2019, Caddy's default, anything on the host could load a configuration or
 * stop Caddy: a tenant's webhook sent by Odoo, for one). Caddy makes the socket; a stale one after
 * a crash is replaced at its next start.
 */
export const CADDY_ADMIN_DIR = '/var/lib/caddy/svc-admin';
export const CADDY_ADMIN_SOCKET = `${CADDY_ADMIN_DIR}/admin.sock`;
/** Caddy's default admin address: where a Caddy set up before the socket still listens until it is reloaded. */
const CADDY_DEFAULT_ADMIN = 'localhost:2019';
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

/** The whole configuration as Caddy would load it: exit status 0 when valid. */
export const CADDY_VALIDATE = `caddy validate --config ${CADDYFILE} --adapter caddyfile`;
/**
 * Loads the configuration into the running Caddy through its admin socket (Caddy keeps the old one
 * when this fails); where there is no socket yet (a host set up before it, until setup_proxy runs
 * again), through Caddy's default admin address, which that reload then closes.
 */
export const CADDY_RELOAD = [
  `{ if [ -S ${CADDY_ADMIN_SOCKET} ]; then caddy reload --config ${CADDYFILE} --adapter caddyfile --address unix/${CADDY_ADMIN_SOCKET};`,
  `else caddy reload --config ${CADDYFILE} --adapter caddyfile --address ${CADDY_DEFAULT_ADMIN}; fi; }`,
].join(' ');

/** Runs `body` holding the configuration lock (waits up to a minute for another change to end). */
export function underCaddyLock(body: string): string {
  return [
    `exec 9>>${CADDY_LOCK} || { echo 'Cannot open ${CADDY_LOCK}: run setup_proxy on the root server first' >&2; exit 1; }`,
    `flock -w 60 9 || { echo 'Another change of the Caddy configuration held the lock for a minute' >&2; exit 1; }`,
    body,
  ].join('\n');
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
export const INSTALL_CADDY = [
  'set -e',
  'if ! command -v caddy >/dev/null 2>&1; then',
  '  if command -v apt-get >/dev/null 2>&1; then',
  '    export DEBIAN_FRONTEND=noninteractive',
  '    apt-get install -y -qq caddy || { apt-get update -qq && apt-get install -y -qq caddy; }',
  '  elif command -v dnf >/dev/null 2>&1; then dnf install -y caddy',
  "  else echo 'Caddy is not installed, and there is neither apt-get nor dnf to install it' >&2; exit 1; fi",
  'fi',
  `mkdir -p ${CADDY_SITES_DIR} /var/log/caddy ${CADDY_ADMIN_DIR}`,
  `touch ${CADDY_LOG}`,
  // The admin socket's directory: Caddy's user makes the socket there, nobody else but root enters.
  `chmod 700 ${CADDY_ADMIN_DIR}`,
  // The packaged service runs as the caddy user: it must write its log and make its socket.
  `if id caddy >/dev/null 2>&1; then chown caddy:caddy /var/log/caddy ${CADDY_LOG} ${CADDY_ADMIN_DIR}; fi`,
  'caddy version',
].join('\n');

/** Writes stdin to `path` (0644: Caddy's user reads it). */
export const writeFileFromStdin = (path: string) => `umask 022; cat > ${shellQuote(path)}`;
export const WRITE_NEW_CADDYFILE = writeFileFromStdin(NEW_CADDYFILE);

/** systemd runs here (and not only its tools). */
const USE_SYSTEMD = '[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1';

/**
 * Checks the new main Caddyfile, puts it in place (the operator's own first kept as
 * Caddyfile.before-svc), then reloads Caddy, or enables and starts it: systemd's unit where systemd
 * runs, else `caddy start` in a session of its own (it outlives this SSH session), without the
 * lock's descriptor (a Caddy holding it would keep every later change waiting).
 */
export const ENABLE_CADDYFILE = underCaddyLock(
  [
    `if ! out=$(caddy validate --config ${NEW_CADDYFILE} --adapter caddyfile 2>&1); then`,
    `  rm -f ${NEW_CADDYFILE}; printf '%s\\n' "$out" | tail -n 5 >&2; exit 1`,
    'fi',
    `if [ -f ${CADDYFILE} ] && [ ! -f ${CADDYFILE}.before-svc ] && ! head -n 1 ${CADDYFILE} | grep -qF ${shellQuote(WRITTEN_BY)}; then`,
    `  cp -p ${CADDYFILE} ${CADDYFILE}.before-svc`,
    'fi',
    `mv -f ${NEW_CADDYFILE} ${CADDYFILE}`,
    `if ${USE_SYSTEMD}; then`,
    '  systemctl enable caddy >/dev/null 2>&1 || true',
    // Reloaded by svc's own command: the running Caddy may still listen on the default admin address.
    `  if systemctl is-active --quiet caddy; then out=$(${CADDY_RELOAD} 2>&1) || { printf '%s\\n' "$out" | tail -n 5 >&2; exit 1; }`,
    '  else systemctl start caddy || exit 1; fi',
    "  echo 'caddy running (systemd)'",
    `elif out=$(${CADDY_RELOAD} 2>&1); then echo 'caddy reloaded'`,
    `elif setsid caddy start --config ${CADDYFILE} --adapter caddyfile >>/var/log/caddy/svc-start.log 2>&1 </dev/null 9>&-; then echo 'caddy started'`,
    `else printf '%s\\n' "$out" | tail -n 5 >&2; tail -n 5 /var/log/caddy/svc-start.log >&2; exit 1; fi`,
  ].join('\n'),
);

// The tenants' own addresses on an Odoo host: the Caddy site of SUBSCRIPTION_URL's host pattern
// (and STAGING_URL's), which setup_proxy writes into the main Caddyfile. The database is the part of
// the host name the pattern marks with {database_name}, matched by a regular expression on the Host
// header and sent to Odoo as X-Odoo-Database, as a customer domain's site names its tenant (svc's
// addon then serves that tenant only: docs/odoo-hosts.md); any other name is answered 404. The web
// client's /websocket goes to Odoo's evented port, falling back to its HTTP port (Odoo without
// workers). An https:// pattern is served with Caddy's on-demand TLS: Caddy asks svc
// (TLS_ASK_PATH) before it obtains a certificate for a name (or, with TENANT_TLS_DNS, with one
// wildcard certificate through a DNS provider); an http:// one as plain HTTP (`*.localhost`, which
// browsers resolve to the machine itself).
import type { Config } from '../core/config.js';
import { UserError } from '../core/errors.js';
import { geventPortOf, HOST_SECRET_HEADER, TENANT_HEADER_SPELLINGS } from './caddy.js';

/** svc's on-demand TLS question, under BASE_URL: `GET <path>?domain=<name>`, 200 = yes. */
export const TLS_ASK_PATH = '/svc/tls/ask';
/** What a subscription's (and a staging copy's) database name is made of. */
export const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** Stands for {database_name} while the URL is parsed: letters and '-' survive as a host name. */
const MARK = 'svc-database-name-mark';

export type TenantKind = 'subscription' | 'staging';

export interface HostPattern {
  kind: TenantKind;
  variable: 'SUBSCRIPTION_URL' | 'STAGING_URL';
  /** The host name is `${before}<database>${after}`. */
  before: string;
  after: string;
  https: boolean;
  /** The port Caddy listens on for it (the URL's, else 80 or 443). */
  port: number;
  /** Whether the URL names its port (the site's address then does too). */
  explicitPort: boolean;
  /** Caddy's site address: the pattern's host with the database's label as `*`. */
  siteHost: string;
}

/** The host pattern of an address template; null when {database_name} is not in its host (nothing to serve by name). */
export function hostPatternOf(variable: HostPattern['variable'], template: string): HostPattern | null {
  const url = new URL(template.replaceAll('{database_name}', MARK));
  const host = url.hostname;
  const at = host.indexOf(MARK);
  if (at === -1 || host.indexOf(MARK, at + 1) !== -1) return null;
  const before = host.slice(0, at);
  const after = host.slice(at + MARK.length);
  if (!/^[a-z0-9.-]*$/.test(before + after)) return null;
  const labels = host.split('.');
  const siteHost = labels.map((label) => (label.includes(MARK) ? '*' : label)).join('.');
  const https = url.protocol === 'https:';
  return {
    kind: variable === 'SUBSCRIPTION_URL' ? 'subscription' : 'staging',
    variable,
    before,
    after,
    https,
    port: url.port ? Number(url.port) : https ? 443 : 80,
    explicitPort: url.port !== '',
    siteHost,
  };
}

/** The patterns of the service's configuration (STAGING_URL's left out when it is SUBSCRIPTION_URL's). */
export function tenantHostPatterns(config: Pick<Config, 'SUBSCRIPTION_URL' | 'STAGING_URL'>): HostPattern[] {
  const subscription = hostPatternOf('SUBSCRIPTION_URL', config.SUBSCRIPTION_URL);
  const staging = hostPatternOf('STAGING_URL', config.STAGING_URL);
  const same = subscription && staging && subscription.before === staging.before && subscription.after === staging.after;
  return [subscription, same ? null : staging].filter((p): p is HostPattern => p !== null);
}

/** The databases a host name stands for (one per pattern it fits), e.g. `acme_7` for acme_7.localhost. */
export function tenantsOfHostname(patterns: readonly HostPattern[], hostname: string): { kind: TenantKind; database: string }[] {
  const found: { kind: TenantKind; database: string }[] = [];
  for (const p of patterns) {
    if (hostname.length <= p.before.length + p.after.length || !hostname.startsWith(p.before) || !hostname.endsWith(p.after)) continue;
    const database = hostname.slice(p.before.length, hostname.length - p.after.length);
    if (DATABASE_NAME.test(database)) found.push({ kind: p.kind, database });
  }
  return found;
}

/** A part of the pattern (letters, digits, '.' and '-' only) as a regular expression. */
const escapeRe = (s: string) => s.replaceAll('.', '\\.');

/** The address svc answers Caddy's on-demand question at, checked to be safe in a Caddyfile. */
export function tlsAskUrl(config: Pick<Config, 'BASE_URL'>): string {
  const url = new URL(`${config.BASE_URL}${TLS_ASK_PATH}`).href;
  if (!/^https?:\/\/[A-Za-z0-9:/._~%@+-]+$/.test(url)) throw new UserError(`BASE_URL gives an address Caddy cannot be told to ask: ${url}`);
  return url;
}

const DROP = [...TENANT_HEADER_SPELLINGS, HOST_SECRET_HEADER].map((name) => `\t\t\theader_up -${name}`);

function proxyTo(odooPort: number, matcher: string): string[] {
  const name = `{re.${matcher}.1}`;
  return [
    `\t\treverse_proxy /websocket 127.0.0.1:${geventPortOf(odooPort)} 127.0.0.1:${odooPort} {`,
    '\t\t\tlb_policy first',
    '\t\t\tlb_try_duration 2s',
    '\t\t\tfail_duration 30s',
    ...DROP,
    `\t\t\theader_up X-Odoo-Database ${name}`,
    '\t\t}',
    `\t\treverse_proxy 127.0.0.1:${odooPort} {`,
    ...DROP,
    `\t\t\theader_up X-Odoo-Database ${name}`,
    '\t\t}',
  ];
}

/**
 * The site blocks for the patterns (one block per Caddy address: two patterns may share one), or ''
 * when there is none. Refuses a pattern whose port is Odoo's own on this host (Caddy could not
 * listen there), before anything is changed.
 */
export function tenantSitesConfig(patterns: readonly HostPattern[], odooPort: number, where: string, tlsDns?: string): string {
  const odooPorts = [odooPort, geventPortOf(odooPort)];
  const blocks = new Map<string, HostPattern[]>();
  for (const p of patterns) {
    if (odooPorts.includes(p.port)) {
      throw new UserError(
        `${p.variable}'s port ${p.port} is one Odoo listens on on ${where} (${odooPorts.join(' and ')}): Caddy cannot serve the tenants' addresses there. ` +
          `Leave the port out of ${p.variable} (e.g. http://{database_name}.localhost, Caddy on port 80) or run setup_odoo with another http_port; nothing was changed`,
      );
    }
    const address = `${p.https ? 'https' : 'http'}://${p.siteHost}${p.explicitPort ? `:${p.port}` : ''}`;
    blocks.set(address, [...(blocks.get(address) ?? []), p]);
  }
  const out: string[] = [];
  for (const [address, list] of blocks) {
    out.push(`# The tenants' own addresses (${list.map((p) => p.variable).join(', ')}): written by svc`, `${address} {`);
    if (list.some((p) => p.https)) out.push('\ttls {', tlsDns ? `\t\tdns ${tlsDns}` : '\t\ton_demand', '\t}');
    for (const p of list) {
      const matcher = p.kind;
      out.push(
        `\t@${matcher} header_regexp ${matcher} Host ^${escapeRe(p.before)}([a-z_][a-z0-9_]*)${escapeRe(p.after)}(?::[0-9]+)?$`,
        `\thandle @${matcher} {`,
        ...proxyTo(odooPort, matcher),
        '\t}',
      );
    }
    out.push('\thandle {', '\t\trespond "No instance at this address" 404', '\t}', '}', '');
  }
  return out.join('\n');
}

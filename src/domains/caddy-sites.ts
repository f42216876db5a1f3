// A customer domain on the Odoo host: one Caddy site file, /etc/caddy/svc.d/<database>--<hostname>.caddy,
// proxying to Odoo on 127.0.0.1:<its port> with the header X-Odoo-Database naming the tenant's
// database, replacing whatever the client sent (svc's addon, loaded server-wide by setup_odoo, then
// serves that database only: docs/odoo-hosts.md). Each change takes the
// host's configuration lock, is checked with `caddy validate` and loaded with `caddy reload`; when
// either fails the file is put back as it was, so the configuration Caddy runs is the previous one.
// Only checked values (host name, database name, port) reach a file name, command or the config.
import { UserError } from '../core/errors.js';
import {
  CADDY_LOG,
  CADDY_SITES_DIR,
  caddyCommand,
  HOST_SECRET_HEADER,
  type RemoteSession,
  TENANT_HEADER_SPELLINGS,
} from '../servers/index.js';
import { geventPortOf } from '../odoo/index.js';
import { HOSTNAME } from './hostname.js';

/** What a subscription's database name is made of (the subscriptions' own rule). */
const DATABASE = /^[a-z_][a-z0-9_]{0,62}$/;
const SITE_FILE = /^\/etc\/caddy\/svc\.d\/[a-z_][a-z0-9_]{0,62}--[a-z0-9.-]{1,253}\.caddy$/;
const CHANGE_TIMEOUT_MS = 2 * 60_000;

export interface Site {
  hostname: string;
  database: string;
  odooPort: number;
}

function checked(site: Site): Site {
  if (!HOSTNAME.test(site.hostname)) throw new UserError(`"${site.hostname}" is not a checked host name`);
  if (!DATABASE.test(site.database)) throw new UserError(`"${site.database}" is not a database name a site file can carry`);
  if (!Number.isInteger(site.odooPort) || site.odooPort < 1 || site.odooPort > 65532) throw new UserError(`${site.odooPort} is not a port`);
  return site;
}

export function siteFileOf(site: Site): string {
  const { database, hostname } = checked(site);
  return `${CADDY_SITES_DIR}/${database}--${hostname}.caddy`;
}

const DROP_SPELLINGS = [...TENANT_HEADER_SPELLINGS, HOST_SECRET_HEADER].map((name) => `\t\theader_up -${name}`);

/**
 * The file's contents: a site served over HTTPS (Caddy obtains its certificate) in front of Odoo.
 * The web client's /websocket goes to Odoo's evented port where Odoo runs workers (there the HTTP
 * workers refuse it); Odoo without workers serves it on its HTTP port and has no evented port,
 * so a refused connection there falls back to the HTTP port (and the evented one rests 30 s).
 */
export function siteConfig(site: Site): string {
  const { hostname, database, odooPort } = checked(site);
  return [
    `# ${database}: written by svc`,
    `${hostname} {`,
    `\treverse_proxy /websocket 127.0.0.1:${geventPortOf(odooPort)} 127.0.0.1:${odooPort} {`,
    '\t\tlb_policy first',
    '\t\tlb_try_duration 2s',
    '\t\tfail_duration 30s',
    ...DROP_SPELLINGS,
    `\t\theader_up X-Odoo-Database ${database}`,
    '\t}',
    `\treverse_proxy 127.0.0.1:${odooPort} {`,
    ...DROP_SPELLINGS,
    `\t\theader_up X-Odoo-Database ${database}`,
    '\t}',
    '}',
    '',
  ].join('\n');
}

/** A stored site file name, checked again before it reaches a command. */
function checkedFile(file: string): string {
  if (!SITE_FILE.test(file)) throw new UserError(`"${file}" is not a site file the service writes`);
  return file;
}

type Issuance = { outcome: 'obtained' } | { outcome: 'refused'; error: string } | { outcome: 'timeout' };

/** The Caddy configuration of one host, changed a site at a time. */
export function caddySites(session: RemoteSession) {
  return {
    /** Writes and loads the site; `logOffset` is where Caddy's log stood before. */
    async write(site: Site): Promise<{ file: string; logOffset: number }> {
      const file = siteFileOf(site);
      const content = siteConfig(site);
      const res = await session.check(caddyCommand('write-site', file), `Loading the site of ${site.hostname} failed`, {
        stdin: content,
        timeoutMs: CHANGE_TIMEOUT_MS,
        label: `write ${file}, caddy validate, caddy reload <<EOF\n${content}EOF`,
      });
      const offset = /^log-offset (\d+)$/m.exec(res.stdout);
      return { file, logOffset: offset ? Number(offset[1]) : 0 };
    },

    /** Removes the site and loads the configuration without it (a file already gone is fine). */
    async remove(file: string): Promise<void> {
      await session.check(caddyCommand('remove-site', checkedFile(file)), `Removing the site file ${file} failed`, {
        timeoutMs: CHANGE_TIMEOUT_MS,
        label: `remove ${file}, caddy validate, caddy reload`,
      });
    },

    /** How Caddy's attempt to obtain the certificate ended, as its log tells. */
    async waitForIssuance(hostname: string, logOffset: number, seconds: number): Promise<Issuance> {
      if (!HOSTNAME.test(hostname)) throw new UserError(`"${hostname}" is not a checked host name`);
      const offset = Math.max(0, Math.floor(logOffset));
      const res = await session.check(
        caddyCommand('wait-issuance', hostname, offset, Math.floor(seconds)),
        `Reading Caddy's log for the certificate of ${hostname} failed`,
        {
          timeoutMs: (seconds + 30) * 1000,
          label: `wait up to ${seconds} s for Caddy to obtain the certificate of ${hostname} (${CADDY_LOG})`,
        },
      );
      const line = res.stdout.trim();
      if (line === 'timeout' || line === '') return { outcome: 'timeout' };
      let entry: { msg?: string; error?: string };
      try {
        entry = JSON.parse(line);
      } catch {
        return { outcome: 'refused', error: session.mask(line).slice(0, 1500) };
      }
      if (entry.msg === 'certificate obtained successfully') return { outcome: 'obtained' };
      return { outcome: 'refused', error: session.mask(String(entry.error ?? entry.msg)).slice(0, 1500) };
    },
  };
}

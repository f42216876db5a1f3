// A customer domain on the Odoo host: one Caddy site file, /etc/caddy/svc.d/<database>--<hostname>.caddy,
// proxying to Odoo on 127.0.0.1:<its port> with the header X-Odoo-Database naming the tenant's
// database, replacing whatever the client sent (svc's addon, loaded server-wide by setup_odoo, then
// serves that database only: docs/odoo-hosts.md). Each change takes the
// host's configuration lock, is checked with `caddy validate` and loaded with `caddy reload`; when
// either fails the file is put back as it was, so the configuration Caddy runs is the previous one.
// Only checked values (host name, database name, port) reach a file name, command or the config.
import { UserError } from '../core/errors.js';
import { shellQuote } from '../core/ssh.js';
import {
  CADDY_LOG,
  CADDY_RELOAD,
  CADDY_SITES_DIR,
  CADDY_VALIDATE,
  underCaddyLock,
  formatResult,
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

/** validate and reload, or put the file back (`$f.old` when there was one, else none) and fail. */
const LOAD_OR_RESTORE = [
  'restore() { if [ -f "$f.old" ]; then mv -f "$f.old" "$f"; else rm -f "$f"; fi; }',
  `if ! out=$(${CADDY_VALIDATE} 2>&1); then restore; printf 'caddy validate failed: %s\\n' "$(printf '%s\\n' "$out" | tail -n 2)" >&2; exit 3; fi`,
  `if ! out=$(${CADDY_RELOAD} 2>&1); then restore; printf 'caddy reload failed: %s\\n' "$(printf '%s\\n' "$out" | tail -n 2)" >&2; exit 4; fi`,
  'rm -f "$f.old"',
];

/** Writes the site file from stdin; prints the log's size before any reload ("log-offset N"), then "changed" or "unchanged". */
function writeSiteScript(file: string): string {
  return underCaddyLock(
    [
      `f=${shellQuote(checkedFile(file))}`,
      'umask 022; cat > "$f.new"',
      `echo "log-offset $(wc -c < ${CADDY_LOG} 2>/dev/null || echo 0)"`,
      // The same contents: nothing to load (and no reload that would disturb the others).
      'if [ -f "$f" ] && cmp -s "$f.new" "$f"; then rm -f "$f.new"; echo unchanged; exit 0; fi',
      'rm -f "$f.old"; if [ -f "$f" ]; then cp -p "$f" "$f.old"; fi',
      'mv -f "$f.new" "$f"',
      ...LOAD_OR_RESTORE,
      'echo changed',
    ].join('\n'),
  );
}

function removeSiteScript(file: string): string {
  return underCaddyLock(
    [
      `f=${shellQuote(checkedFile(file))}`,
      'if [ ! -f "$f" ]; then echo absent; exit 0; fi',
      'rm -f "$f.old"; mv -f "$f" "$f.old"',
      // When validate or reload fails, restore() puts the site back: the file stays what Caddy runs.
      ...LOAD_OR_RESTORE,
      'echo removed',
    ].join('\n'),
  );
}

/**
 * Waits (up to `seconds`) for Caddy's log, from `offset` on, to say how obtaining the certificate of
 * `hostname` ended; prints that log line, or "timeout". Another site's reload cancels the attempts
 * under way, and the new configuration starts them again: a cancelled attempt is no answer.
 */
function waitForIssuanceScript(hostname: string, offset: number, seconds: number): string {
  if (!HOSTNAME.test(hostname)) throw new UserError(`"${hostname}" is not a checked host name`);
  return [
    `log=${CADDY_LOG}; off=${Math.max(0, Math.floor(offset))}; end=$(( $(date +%s) + ${Math.floor(seconds)} ))`,
    'while :; do',
    '  size=$(wc -c < "$log" 2>/dev/null || echo 0); if [ "$size" -lt "$off" ]; then off=0; fi',
    // An attempt cut short by a reload ("context canceled") is no answer: the new configuration tries again.
    `  line=$(tail -c +$((off + 1)) "$log" 2>/dev/null | grep -F ${shellQuote(`"identifier":"${hostname}"`)} | grep -E '"msg":"(certificate obtained successfully|could not get certificate from issuer)"' | grep -vF 'context canceled' | head -n 1)`,
    '  if [ -n "$line" ]; then printf \'%s\\n\' "$line"; exit 0; fi',
    '  if [ "$(date +%s)" -ge "$end" ]; then echo timeout; exit 0; fi',
    '  sleep 0.5',
    'done',
  ].join('\n');
}

type Issuance = { outcome: 'obtained' } | { outcome: 'refused'; error: string } | { outcome: 'timeout' };

/** The stderr of a failed change, for the domain's last_error. */
function reason(session: RemoteSession, res: Parameters<typeof formatResult>[0]): string {
  const text = res.stderr.trim() || formatResult(res);
  return session.mask(text).slice(-1500);
}

/** The Caddy configuration of one host, changed a site at a time. */
export function caddySites(session: RemoteSession) {
  return {
    /** Writes and loads the site; `logOffset` is where Caddy's log stood before. */
    async write(site: Site): Promise<{ file: string; logOffset: number }> {
      const file = siteFileOf(site);
      const content = siteConfig(site);
      const res = await session.run(writeSiteScript(file), {
        stdin: content,
        timeoutMs: CHANGE_TIMEOUT_MS,
        label: `write ${file}, caddy validate, caddy reload <<EOF\n${content}EOF`,
      });
      if (res.exitCode !== 0) throw new UserError(reason(session, res));
      const offset = /^log-offset (\d+)$/m.exec(res.stdout);
      return { file, logOffset: offset ? Number(offset[1]) : 0 };
    },

    /** Removes the site and loads the configuration without it (a file already gone is fine). */
    async remove(file: string): Promise<void> {
      const res = await session.run(removeSiteScript(file), {
        timeoutMs: CHANGE_TIMEOUT_MS,
        label: `remove ${checkedFile(file)}, caddy validate, caddy reload`,
      });
      if (res.exitCode !== 0) throw new UserError(reason(session, res));
    },

    /** How Caddy's attempt to obtain the certificate ended, as its log tells. */
    async waitForIssuance(hostname: string, logOffset: number, seconds: number): Promise<Issuance> {
      const res = await session.run(waitForIssuanceScript(hostname, logOffset, seconds), {
        timeoutMs: (seconds + 30) * 1000,
        label: `wait up to ${seconds} s for Caddy to obtain the certificate of ${hostname} (${CADDY_LOG})`,
      });
      if (res.exitCode !== 0) throw new UserError(reason(session, res));
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

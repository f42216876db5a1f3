// quickstart's command line, checked before anything runs.
import { execFileSync, type ExecFileSyncOptionsWithStringEncoding } from 'node:child_process';
import path from 'node:path';
import { QuickstartError } from './quickstart-errors.js';

export interface QuickstartOptions {
  source: { kind: 'file'; path: string } | { kind: 'url'; url: string };
  sha256: string;
  /** The tenants' domain: their addresses are <database>.<domain>. */
  domain: string | null;
  trust: boolean;
  /** authorizedKeys null: the login user's own ~/.ssh/authorized_keys (resolveAuthorizedKeys). */
  ssh: { host: string; port: number; user: string; authorizedKeys: string | null };
  /** The administrator quickstart acts as. */
  adminEmail: string;
  /** The operator whose token it prints. */
  operatorEmail: string;
  /** Odoo's series (18 for 18.0), from the source. */
  series: number;
}

export interface RawQuickstartOptions {
  'odoo-source'?: string;
  sha256?: string;
  domain?: string;
  'trust-this-machine'?: boolean;
  'ssh-host'?: string;
  'ssh-port'?: string;
  'ssh-user'?: string;
  'authorized-keys'?: string;
  email?: string;
}

/** The series in odoo/release.py of a local tarball; for a URL, the "18.0" in its name. */
function seriesOf(source: QuickstartOptions['source']): number | null {
  if (source.kind === 'url') return Number(/(?:^|[^0-9])(\d{2})\.0(?:[^0-9]|$)/.exec(source.url)?.[1]) || null;
  try {
    const quiet: ExecFileSyncOptionsWithStringEncoding = { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] };
    const listing = execFileSync('tar', ['-tzf', source.path], { ...quiet, maxBuffer: 256 * 1024 * 1024 });
    const release = listing.split('\n').find((e) => /^(\.\/)?([^/]+\/)?odoo\/release\.py$/.test(e));
    if (!release) return null;
    const text = execFileSync('tar', ['-xzOf', source.path, release], quiet);
    return Number(/version_info\s*=\s*\(\s*(?:'saas~)?(\d+)/.exec(text)?.[1]) || null;
  } catch {
    return null; // not a tarball (or not there): the prerequisites say so
  }
}

export function quickstartOptions(raw: RawQuickstartOptions): QuickstartOptions {
  const given = raw['odoo-source'];
  if (!given) throw new QuickstartError('quickstart needs --odoo-source <tarball path or https URL> and --sha256 <hex>');
  const sha256 = (raw.sha256 ?? '').toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new QuickstartError('--sha256 must be the 64 hex digits of the tarball (sha256sum <file>)');
  if (/^[a-z]+:\/\//i.test(given) && !/^https:\/\//i.test(given))
    throw new QuickstartError('--odoo-source: a file path or an https:// URL');
  const source: QuickstartOptions['source'] = /^https:\/\//i.test(given)
    ? { kind: 'url', url: given }
    : { kind: 'file', path: path.resolve(given) };
  const domain = raw.domain?.toLowerCase().replace(/\.$/, '') ?? null;
  if (domain !== null && !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$/.test(domain)) {
    throw new QuickstartError(`--domain ${raw.domain}: a domain name such as odoo.example.com`);
  }
  const port = Number(raw['ssh-port'] ?? 22);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new QuickstartError('--ssh-port: 1 to 65535');
  const user = raw['ssh-user'] ?? 'root';
  if (!/^[a-z_][a-z0-9_.-]*$/i.test(user)) throw new QuickstartError('--ssh-user: a user name');
  const series = seriesOf(source) ?? 18;
  return {
    source,
    sha256,
    domain,
    trust: raw['trust-this-machine'] === true,
    ssh: {
      host: raw['ssh-host'] ?? '127.0.0.1',
      port,
      user,
      authorizedKeys: raw['authorized-keys'] ? path.resolve(raw['authorized-keys']) : null,
    },
    adminEmail: raw.email ?? `admin@${domain ?? 'example.com'}`,
    operatorEmail: `operator@${domain ?? 'example.com'}`,
    series,
  };
}

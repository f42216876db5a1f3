// Domain lookups through the DNS Resolver setting: `cloudflare` and `google` query
// their public name servers directly (DNS_CLOUDFLARE_SERVERS / DNS_GOOGLE_SERVERS, 1.1.1.1 and
// 8.8.8.8 by default), `local` asks the system resolver (getaddrinfo: /etc/hosts, then the
// machine's name servers). Each lookup has the outbound timeout and an api_call action-log row.
// DNS answers are bounded by nature (one UDP datagram per query).
import { promises as dns } from 'node:dns';
import { domainToASCII } from 'node:url';
import type { AppContext } from '../context.js';
import { UserError, ValidationError } from '../core/errors.js';
import { OutboundError } from '../core/outbound-error.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { writeActionLog } from '../core/action-log.js';
import { withTimeout } from '../core/timeout.js';
import type { DnsResolver } from '../generated/prisma/enums.js';

export interface DomainLookupResult {
  domain: string;
  resolver: DnsResolver;
  /** The name servers asked, or ["system"] for the local resolver. */
  servers: string[];
  /** IPv4 then IPv6 addresses. */
  addresses: string[];
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** The domain in ASCII (IDN converted), or a ValidationError. */
function normalizeDomain(input: string): string {
  const ascii = domainToASCII(input.trim().replace(/\.$/, '')).toLowerCase();
  if (!ascii || ascii.length > 253 || !ascii.split('.').every((l) => LABEL.test(l))) {
    throw new ValidationError(`"${input}" is not a domain name`, [{ field: 'domain', message: 'not a domain name' }]);
  }
  return ascii;
}

/** A lookup past its time: the error the resolver's own timeout gives, after `cancel` (its queries). */
function timedOut(cancel: () => void = () => {}): () => Error {
  return () => {
    cancel();
    return Object.assign(new Error('timeout'), { code: 'ETIMEOUT' });
  };
}

/** NODATA is an answer (no records of that type), not a failure. */
async function records(query: Promise<string[]>): Promise<string[]> {
  try {
    return await query;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENODATA') return [];
    throw err;
  }
}

export function createDomainLookup(ctx: Pick<AppContext, 'db' | 'config'>) {
  const { db, config } = ctx;
  const timeoutMs = config.OUTBOUND_TIMEOUT_MS;

  async function query(domain: string, resolver: DnsResolver, servers: string[]): Promise<string[]> {
    if (resolver === 'local') {
      const found = await withTimeout(dns.lookup(domain, { all: true }), timeoutMs, timedOut());
      return [...found.filter((a) => a.family === 4), ...found.filter((a) => a.family === 6)].map((a) => a.address);
    }
    const r = new dns.Resolver({ timeout: timeoutMs, tries: 1 });
    r.setServers(servers);
    const [v4, v6] = await withTimeout(
      Promise.all([records(r.resolve4(domain)), records(r.resolve6(domain))]),
      timeoutMs,
      timedOut(() => r.cancel()),
    );
    return [...v4, ...v6];
  }

  function failure(err: unknown, what: string): UserError {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code === 'ENOTFOUND') return new UserError(`${what}: the domain does not exist (NXDOMAIN)`);
    if (code === 'ETIMEOUT' || code === 'ECANCELLED') return new OutboundError('timeout', `${what}: no answer within ${timeoutMs} ms`);
    if (code === 'ECONNREFUSED') return new OutboundError('refused', `${what}: connection refused`);
    return new OutboundError('network', `${what}: ${code || (err as Error).message}`);
  }

  return {
    /** Looks the domain up with the resolver the settings name; `target` is the record it is for (default: the settings). */
    async lookup(input: string, target: Partial<OutboundTarget> = {}): Promise<DomainLookupResult> {
      const domain = normalizeDomain(input);
      const { dns_resolver: resolver } = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
      const servers =
        resolver === 'cloudflare' ? config.DNS_CLOUDFLARE_SERVERS : resolver === 'google' ? config.DNS_GOOGLE_SERVERS : ['system'];
      const what = `DNS lookup of ${domain} via ${resolver} (${servers.join(', ')})`;
      const log = {
        model_name: target.model_name ?? 'svc.settings',
        rec_id: target.rec_id ?? 1,
        user_id: target.user_id ?? null,
        job_id: target.job_id ?? null,
        action_type: 'api_call' as const,
        input_text: what,
      };
      let addresses: string[];
      try {
        addresses = await query(domain, resolver, servers);
      } catch (err) {
        const error = failure(err, what);
        await writeActionLog(db, { ...log, status: 'failure', output_text: error.message });
        throw error;
      }
      await writeActionLog(db, { ...log, output_text: addresses.join('\n') || '(no addresses)' });
      return { domain, resolver, servers, addresses };
    },
  };
}

// Making a customer domain live, keeping it, and taking it away.
//
// verify: the host name must resolve (the DNS Resolver setting) to the Odoo host's address only;
// until it does the domain stays pending_dns with the lookup's answer, and nothing changes on the
// host. Then the site file is written, validated and loaded (caddy-sites.ts), and the certificate
// Caddy obtains is read back over TLS with the host name as SNI: active. A configuration Caddy
// refuses, or an ACME server that refuses the certificate, leaves the previous configuration live
// (the file is taken out again): failed, with the reason.
//
// remove: the site file is taken out (validate, reload), the row deleted, and the tenant's
// web.base.url put back when it was this domain's.
import type { AppContext } from '../context.js';
import { postMessage, postMessageOnce, trackChanges } from '../core/chatter.js';
import { UserError } from '../core/errors.js';
import { sleep } from '../core/sleep.js';
import type { Domain, Prisma, RootServer, Subscription } from '../generated/prisma/client.js';
import { openRemoteSession, requireConfirmed } from '../servers/index.js';
import { createDomainLookup } from '../settings/index.js';
import { caddySites, type Site as DomainSite, siteFileOf } from './caddy-sites.js';
import { readCertificate, type ServedCertificate } from './certificate.js';
import { createExpiryNotice } from './certificate-expiry.js';
import { domainModel } from './domain-models.js';
import { dnsTargetOf, hostAddresses, odooHostOf } from './odoo-host.js';
import { applyBaseUrl, type DomainActor } from './tenant-base-url.js';

/** How long Caddy's first attempt to obtain a certificate is waited for. */
const ISSUANCE_WAIT_S = 90;
/** After "obtained", how long Caddy is given to serve the certificate. */
const SERVE_WAIT_MS = 10_000;

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues' | 'log'>;
export type DomainWithSub = Domain & { subscription: Subscription };

/**
 * Whom the work is done for; in a job, also the job's deadline (job-deadline.ts): once it is
 * aborted the work writes nothing more about the domain and its SSH session is closed.
 */
export interface DomainRun extends DomainActor {
  signal?: AbortSignal;
}

/** Closes the session when the run's deadline passes. */
function closeOnAbort(session: { close(): void }, run: DomainRun) {
  run.signal?.addEventListener('abort', () => session.close(), { once: true });
}

type VerifyResult =
  | { state: 'active'; hostname: string; certificate_not_after: string; certificate_issuer: string }
  /** DNS not (yet) right: pending_dns, or active still serving. */
  | { state: 'pending_dns' | 'active'; hostname: string; dns_error: string }
  | { skipped: string };

/** A subscription whose domains must go: cancelled, or its database dropped. */
export const hasEnded = (sub: Pick<Subscription, 'state' | 'database_dropped_at'>) =>
  sub.state === 'cancelled' || sub.database_dropped_at !== null;

/** Why an ended subscription's domains go, as their removal says. */
export const endedWhy = (sub: Pick<Subscription, 'id' | 'state' | 'database_dropped_at'>) =>
  `subscription ${sub.id} is ${sub.database_dropped_at ? 'dropped' : sub.state}`;

type CaddySites = ReturnType<typeof caddySites>;
type SiteWritten = Awaited<ReturnType<CaddySites['write']>>;

const onDomain = (id: number) => ({ model_name: 'svc.domain' as const, rec_id: id });
const onSubscription = (id: number) => ({ model_name: 'svc.subscription' as const, rec_id: id });

export function createDomainVerification(ctx: Ctx) {
  const { db, config } = ctx;
  const lookup = createDomainLookup(ctx);
  const noticeExpiry = createExpiryNotice(ctx);
  const timeoutMs = config.OUTBOUND_TIMEOUT_MS;

  /** Changes the domain with its tracked fields in the chatter; null when it was removed meanwhile. */
  async function setFields(id: number, data: Prisma.DomainUpdateInput, actor: DomainRun): Promise<Domain | null> {
    actor.signal?.throwIfAborted();
    return db.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT 1 FROM domains WHERE id = ${id} FOR UPDATE`;
      const before = await tx.domain.findUnique({ where: { id } });
      if (!before) return null;
      const after = await tx.domain.update({ where: { id }, data });
      await trackChanges(tx, onDomain(id), domainModel.tracked, before, after, actor.author);
      return after;
    });
  }

  async function failed(domain: Domain, reason: string, actor: DomainRun): Promise<never> {
    await setFields(domain.id, { state: 'failed', last_error: reason }, actor);
    await postMessage(db, {
      ...onDomain(domain.id),
      body: `Verification of ${domain.hostname} failed: ${reason}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
      author: actor.author,
    });
    throw new UserError(reason);
  }

  /** The certificate served, looked for a while when Caddy said it has it (it may take a moment to be in use). */
  async function servedSoon(address: string, hostname: string, wait: boolean) {
    const deadline = Date.now() + (wait ? SERVE_WAIT_MS : 0);
    for (;;) {
      const cert = await readCertificate(address, hostname, timeoutMs);
      if (!('error' in cert) || Date.now() > deadline) return cert;
      await sleep(250);
    }
  }

  /** The tenant's web.base.url after a change of its domains; a failure is told, not thrown. */
  async function baseUrlAfterChange(subscriptionId: number, actor: DomainRun, domainId?: number) {
    try {
      await applyBaseUrl(ctx, subscriptionId, actor);
    } catch (err) {
      const body = (err as Error).message;
      if (domainId) await db.domain.updateMany({ where: { id: domainId }, data: { last_error: body } });
      await postMessageOnce(db, { ...onSubscription(subscriptionId), body, message_type: 'notification', subtype_xmlid: 'mail.mt_alert' });
    }
  }

  async function activate(domain: Domain, cert: ServedCertificate, dnsTarget: string, actor: DomainRun): Promise<VerifyResult> {
    const now = new Date();
    const after = await setFields(
      domain.id,
      {
        state: 'active',
        verified_at: now,
        certificate_not_after: cert.not_after,
        certificate_issuer: cert.issuer,
        dns_target: dnsTarget,
        last_error: null,
      },
      actor,
    );
    if (!after) return { skipped: 'the domain was removed meanwhile' };
    if (domain.state !== 'active') {
      await postMessage(db, {
        ...onDomain(domain.id),
        body: `HTTPS is live on https://${domain.hostname}: certificate by ${cert.issuer}, valid until ${cert.not_after.toISOString()}.`,
        message_type: 'notification',
        author: actor.author,
      });
    }
    await noticeExpiry(after, now);
    if (after.is_primary) await baseUrlAfterChange(after.subscription_id, actor, after.id);
    return {
      state: 'active',
      hostname: domain.hostname,
      certificate_not_after: cert.not_after.toISOString(),
      certificate_issuer: cert.issuer,
    };
  }

  /** Takes the site out of the host's configuration (a server no longer managed is left, and said so). */
  async function removeSite(domain: Domain, actor: DomainRun): Promise<string | null> {
    if (!domain.site_file || !domain.root_server_id) return null;
    const server = await db.rootServer.findUnique({ where: { id: domain.root_server_id } });
    if (server?.state !== 'confirmed') {
      return `The site file ${domain.site_file} was left on root server ${domain.root_server_id}: the server is ${server?.state ?? 'gone'}.`;
    }
    actor.signal?.throwIfAborted();
    const session = await openRemoteSession(ctx, server, { user_id: actor.userId, job_id: actor.jobId });
    closeOnAbort(session, actor);
    try {
      actor.signal?.throwIfAborted();
      await caddySites(session).remove(domain.site_file);
    } finally {
      session.close();
    }
    return null;
  }

  /** Takes the domain away: its site file, its row, and (when it was the tenant's address) web.base.url. */
  async function remove(domain: Domain | DomainWithSub, actor: DomainRun, why: string) {
    const left = await removeSite(domain, actor);
    const deleted = await db.domain.deleteMany({ where: { id: domain.id } });
    if (deleted.count === 0) return;
    await postMessage(db, {
      ...onSubscription(domain.subscription_id),
      body: `Domain ${domain.hostname} removed (${why}).${left ? ` ${left}` : ''}`,
      message_type: 'notification',
      author: actor.author,
    });
    if (domain.base_url_at) await baseUrlAfterChange(domain.subscription_id, actor);
  }

  /**
   * After the subscription moved to another Odoo host: each domain's site leaves the old host and the
   * domain waits for its DNS to point at the new one (`dnsTarget`); verification then writes its site
   * there and Caddy obtains its certificate again.
   */
  async function rehome(subscriptionId: number, dnsTarget: string, actor: DomainRun): Promise<string[]> {
    const said: string[] = [];
    for (const domain of await db.domain.findMany({ where: { subscription_id: subscriptionId } })) {
      const left = await removeSite(domain, actor).catch((err: Error) => `Its site could not be removed: ${err.message}`);
      await db.domain.update({
        where: { id: domain.id },
        data: { state: 'pending_dns', dns_target: dnsTarget, root_server_id: null, site_file: null, verified_at: null, last_error: null },
      });
      said.push(`${domain.hostname}: point its DNS at ${dnsTarget}.${left ? ` ${left}` : ''}`);
    }
    return said;
  }

  /**
   * DNS first: until the name points at the Odoo host only, nothing changes there. Answers the host
   * and the DNS target, or the verification's result when it stops here.
   */
  async function checkDns(
    domain: DomainWithSub,
    actor: DomainRun,
  ): Promise<{ server: RootServer; dnsTarget: string } | { result: VerifyResult }> {
    const target = { ...onDomain(domain.id), user_id: actor.userId, job_id: actor.jobId };
    let server: RootServer;
    let addresses: string[];
    try {
      server = await odooHostOf(db, domain.subscription);
      addresses = await hostAddresses(lookup, server, target);
    } catch (err) {
      return failed(domain, (err as Error).message, actor);
    }
    if (addresses.length === 0) return failed(domain, `The Odoo host ${server.ip} has no address`, actor);
    const dnsTarget = dnsTargetOf(addresses);

    let found: string[] | null = null;
    let dnsError: string | null = null;
    try {
      found = (await lookup.lookup(domain.hostname, target)).addresses;
    } catch (err) {
      dnsError = (err as Error).message;
    }
    const elsewhere = found?.filter((a) => !addresses.includes(a)) ?? [];
    if (found?.length === 0) dnsError = `${domain.hostname} has no A or AAAA record; set ${dnsTarget}`;
    else if (elsewhere.length > 0) {
      dnsError = `${domain.hostname} resolves to ${found!.join(', ')}, not only to the Odoo host's ${addresses.join(', ')}; set ${dnsTarget}`;
    }
    if (!dnsError) return { server, dnsTarget };
    // An active domain keeps serving (a lookup can fail for a moment); the error is shown.
    const state = domain.state === 'active' ? 'active' : 'pending_dns';
    await setFields(domain.id, { state, last_error: dnsError, dns_target: dnsTarget }, actor);
    return { result: { state, hostname: domain.hostname, dns_error: dnsError } };
  }

  /** A site written elsewhere before (another database name, another host) goes first, or Caddy would find the name twice. */
  async function replaceStaleSite(domain: Domain, file: string, server: RootServer, actor: DomainRun) {
    if (!domain.site_file || (domain.site_file === file && domain.root_server_id === server.id)) return;
    try {
      const left = await removeSite(domain, actor);
      if (left) await postMessage(db, { ...onDomain(domain.id), body: left, message_type: 'notification' });
    } catch (err) {
      await failed(domain, `The earlier site ${domain.site_file} could not be removed: ${(err as Error).message}`, actor);
    }
    await db.domain.updateMany({ where: { id: domain.id }, data: { root_server_id: null, site_file: null } });
  }

  /** Writes the site and records it at once (removing the domain then finds the file); null when the domain was removed meanwhile. */
  async function writeSite(domain: Domain, sites: CaddySites, site: DomainSite, server: RootServer, actor: DomainRun) {
    let written: SiteWritten;
    try {
      written = await sites.write(site);
    } catch (err) {
      return failed(domain, (err as Error).message, actor);
    }
    const recorded = await db.domain.updateMany({ where: { id: domain.id }, data: { root_server_id: server.id, site_file: written.file } });
    if (recorded.count > 0) return written;
    await sites.remove(written.file);
    return null;
  }

  /** The certificate Caddy serves for the name, waiting for its issuance; when none comes, the site goes and the domain fails. */
  async function obtainCertificate(domain: Domain, sites: CaddySites, written: SiteWritten, server: RootServer, actor: DomainRun) {
    let cert = await readCertificate(server.ip, domain.hostname, timeoutMs);
    if (!('error' in cert)) return cert;
    const issuance = await sites.waitForIssuance(domain.hostname, written.logOffset, ISSUANCE_WAIT_S);
    // After "obtained" it may take Caddy a moment to serve it; after the wait, a last look.
    if (issuance.outcome !== 'refused') cert = await servedSoon(server.ip, domain.hostname, issuance.outcome === 'obtained');
    if (!('error' in cert)) return cert;
    const reason =
      issuance.outcome === 'refused'
        ? `The ACME server refused the certificate of ${domain.hostname}: ${issuance.error}`
        : issuance.outcome === 'timeout'
          ? `Caddy obtained no certificate for ${domain.hostname} within ${ISSUANCE_WAIT_S} s (see ${server.ip}:/var/log/caddy/svc.log)`
          : `Caddy obtained the certificate of ${domain.hostname}, but ${cert.error}`;
    // The configuration goes back to what it was without this site.
    await sites.remove(written.file);
    await db.domain.updateMany({ where: { id: domain.id }, data: { root_server_id: null, site_file: null } });
    return failed(domain, reason, actor);
  }

  return {
    noticeExpiry,
    baseUrlAfterChange,
    remove,
    rehome,

    /** Checks DNS, writes the site on the Odoo host, obtains the certificate, activates: each a step below. */
    async verify(domainId: number, actor: DomainRun): Promise<VerifyResult> {
      const domain = await db.domain.findUnique({ where: { id: domainId }, include: { subscription: true } });
      if (!domain) return { skipped: 'the domain was removed' };
      const sub = domain.subscription;
      if (hasEnded(sub)) {
        await remove(domain, actor, endedWhy(sub));
        return { skipped: `removed: subscription ${sub.id} has ended` };
      }
      await db.domain.update({ where: { id: domain.id }, data: { checked_at: new Date() } });

      const dns = await checkDns(domain, actor);
      if ('result' in dns) return dns.result;
      const { server, dnsTarget } = dns;
      if (!sub.database_name) return failed(domain, `Subscription ${sub.id} has no database name yet`, actor);
      try {
        requireConfirmed(server);
      } catch (err) {
        return failed(domain, `Root server ${server.id}: ${(err as Error).message}`, actor);
      }
      // The port of the Odoo svc set up on the host (setup_odoo), else the one the configuration names.
      const site = { hostname: domain.hostname, database: sub.database_name, odooPort: server.odoo_http_port ?? config.ODOO_HTTP_PORT };
      await replaceStaleSite(domain, siteFileOf(site), server, actor);

      const session = await openRemoteSession(ctx, server, { user_id: actor.userId, job_id: actor.jobId }).catch((err: Error) =>
        failed(domain, `SSH to root server ${server.id}: ${err.message}`, actor),
      );
      closeOnAbort(session, actor);
      try {
        actor.signal?.throwIfAborted();
        const sites = caddySites(session);
        const written = await writeSite(domain, sites, site, server, actor);
        if (!written) return { skipped: 'the domain was removed meanwhile' };
        const cert = await obtainCertificate(domain, sites, written, server, actor);
        return await activate(domain, cert, dnsTarget, actor);
      } finally {
        session.close();
      }
    },

    /** Reads the served certificate of an active domain again: expiry and issuer follow renewals. */
    async refreshCertificate(domain: Domain, actor: DomainRun): Promise<{ not_after: string; issuer: string } | { error: string }> {
      const server = domain.root_server_id
        ? await db.rootServer.findUnique({ where: { id: domain.root_server_id }, select: { ip: true } })
        : null;
      if (!server) return { error: 'the domain has no root server on record' };
      const cert = await readCertificate(server.ip, domain.hostname, timeoutMs);
      actor.signal?.throwIfAborted();
      if ('error' in cert) {
        const error = `The served certificate could not be read: ${cert.error}`;
        await db.domain.updateMany({ where: { id: domain.id }, data: { last_error: error } });
        return { error };
      }
      // The same certificate as last time (most runs): nothing to write.
      const unchanged =
        domain.certificate_not_after?.getTime() === cert.not_after.getTime() &&
        domain.certificate_issuer === cert.issuer &&
        domain.last_error === null;
      const after = unchanged
        ? domain
        : await setFields(domain.id, { certificate_not_after: cert.not_after, certificate_issuer: cert.issuer, last_error: null }, actor);
      if (after) await noticeExpiry(after);
      return { not_after: cert.not_after.toISOString(), issuer: cert.issuer };
    },
  };
}

export type DomainVerification = ReturnType<typeof createDomainVerification>;

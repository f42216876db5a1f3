// Customer domains (svc.domain): the REST resource and its rules. A host name belongs to one
// subscription (409), whose template must name an Odoo host (409 otherwise); one domain per
// subscription is its primary (setting another moves it). Verification runs as a job.
import type { AppContext } from '../context.js';
import { trackChanges, type Author } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, ValidationError } from '../core/errors.js';
import { createRecordService, uniqueConflict } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { Domain } from '../generated/prisma/client.js';
import { createDomainLookup } from '../settings/index.js';
import { lockSubscription } from '../subscriptions/index.js';
import { domainJobs } from './domain-job-specs.js';
import { domainModel } from './domain-models.js';
import { createDomainVerification, hasEnded } from './domain-verification.js';
import { normalizeHostname } from './hostname.js';
import { dnsTargetOf, hostAddresses, odooHostOf } from './odoo-host.js';

type Data = Record<string, unknown>;
type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues' | 'log'>;

const onDomain = (id: number) => ({ model_name: 'svc.domain' as const, rec_id: id });

/** The subscription's primary domain other than `keepId` gives its place up (tracked in its chatter). */
async function clearOtherPrimary(tx: DbTx, subscriptionId: number, keepId: number, author: Author | null) {
  const others = await tx.domain.findMany({ where: { subscription_id: subscriptionId, is_primary: true, NOT: { id: keepId } } });
  for (const before of others) {
    const after = await tx.domain.update({ where: { id: before.id }, data: { is_primary: false } });
    await trackChanges(tx, onDomain(before.id), domainModel.tracked, before, after, author);
  }
  return others;
}

/**
 * Which other subscription has this host name as its own address (SUBSCRIPTION_URL), if any. The
 * address's host is a pattern around {database_name}, so the name a host stands for is
 * read back from it; a host without {database_name} is every subscription's.
 */
function addressOwners(db: Ctx['db'], config: Ctx['config']) {
  return async function otherOwner(hostname: string, subscriptionId: number): Promise<number | null> {
    const pattern = new URL(config.SUBSCRIPTION_URL.replaceAll('{database_name}', 'svc-database-name')).hostname;
    const [before = '', after] = pattern.split('svc-database-name');
    let databaseName: string | undefined;
    if (after === undefined) {
      if (hostname !== pattern) return null;
    } else {
      if (!hostname.startsWith(before) || !hostname.endsWith(after) || hostname.length <= before.length + after.length) return null;
      databaseName = hostname.slice(before.length, hostname.length - after.length);
    }
    const owner = await db.subscription.findFirst({
      where: { id: { not: subscriptionId }, database_dropped_at: null, database_name: databaseName ?? { not: null } },
      select: { id: true },
    });
    return owner?.id ?? null;
  };
}

export function createDomainService(ctx: Ctx) {
  const { db, config } = ctx;
  const records = createRecordService(ctx, domainModel);
  const lookup = createDomainLookup(ctx);
  const verification = createDomainVerification(ctx);
  const serviceHost = new URL(config.BASE_URL).hostname;
  const otherOwner = addressOwners(db, config);
  const whoOf = (author: Author | null) => ({ userId: author?.id ?? null, jobId: null, author });

  /** What the customer must set, known when the domain is made (verification keeps it current). */
  async function dnsTarget(server: Awaited<ReturnType<typeof odooHostOf>>, userId: number | null) {
    try {
      return dnsTargetOf(await hostAddresses(lookup, server, { model_name: 'svc.root.server', rec_id: server.id, user_id: userId }));
    } catch {
      return `A/AAAA: the addresses of ${server.ip}`;
    }
  }

  return {
    ...records,

    async create(data: Data, author: Author | null) {
      const hostname = normalizeHostname(String(data.hostname), serviceHost);
      const subscriptionId = data.subscription_id as number;
      const sub = await db.subscription.findUnique({ where: { id: subscriptionId } });
      if (!sub) throw new ValidationError(`Subscription ${subscriptionId} does not exist`, 'subscription_id');
      if (hasEnded(sub)) {
        throw new ConflictError(
          `Subscription ${sub.id} has ended (${sub.database_dropped_at ? 'database dropped' : sub.state}): it takes no domain`,
          {
            fields: [{ field: 'subscription_id', message: 'the subscription has ended' }],
          },
        );
      }
      const owner = await otherOwner(hostname, sub.id);
      if (owner !== null) {
        throw new ConflictError(`${hostname} is the address of subscription ${owner}: it cannot be another subscription's domain`, {
          fields: [{ field: 'hostname', message: "another subscription's own address" }],
        });
      }
      const server = await odooHostOf(db, sub);
      const values = {
        subscription_id: sub.id,
        hostname,
        is_primary: data.is_primary === true,
        dns_target: await dnsTarget(server, author?.id ?? null),
      };
      try {
        const row = await db.$transaction(async (tx) => {
          await lockSubscription(tx, sub.id);
          if (values.is_primary) await clearOtherPrimary(tx, sub.id, 0, author);
          const created = await tx.domain.create({ data: values });
          await trackChanges(tx, onDomain(created.id), domainModel.tracked, null, created, author);
          return created;
        });
        return records.toOutput(row);
      } catch (err) {
        throw (await uniqueConflict(db, domainModel, err, values)) ?? err;
      }
    },

    /** Only is_primary changes; the tenant's web.base.url follows when an active domain is concerned. */
    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      if (data.is_primary === undefined) {
        await precondition?.();
        return records.get(id);
      }
      const { row, moved } = await records.conditionally(id, precondition, (lock) =>
        db.$transaction(async (tx) => {
          const current = await tx.domain.findUnique({ where: { id } });
          if (!current) throw new NotFoundError('Domain');
          // The subscription first, then the domain: the order every write of its domains takes.
          await lockSubscription(tx, current.subscription_id);
          await lock(tx);
          const before = (await tx.domain.findUnique({ where: { id } }))!;
          const others = before.is_primary || !data.is_primary ? [] : await clearOtherPrimary(tx, before.subscription_id, id, author);
          const after = await tx.domain.update({ where: { id }, data: { is_primary: data.is_primary === true } });
          await trackChanges(tx, onDomain(id), domainModel.tracked, before, after, author);
          return { row: after, moved: [before, ...others] as Domain[] };
        }),
      );
      const concerned = moved.some((d) => d.base_url_at !== null) || (row.is_primary && row.state === 'active');
      if (moved[0]!.is_primary !== row.is_primary && concerned) {
        await verification.baseUrlAfterChange(row.subscription_id, whoOf(author), row.id);
      }
      return records.get(id);
    },

    /**
     * The site file leaves the host (validate, reload) before the row goes; 400 when the host cannot
     * be changed. `precondition` (If-Match) is checked before: the SSH work cannot wait under a row lock.
     */
    async remove(id: number, precondition?: Precondition, author: Author | null = null) {
      await precondition?.();
      const domain = await db.domain.findUnique({ where: { id } });
      if (!domain) throw new NotFoundError('Domain');
      await verification.remove(domain, whoOf(author), `deleted${author ? ` by ${author.name}` : ''}`);
    },

    /** Queues the verification job (202); answers its public id. */
    async verify(id: number, userId: number | null): Promise<string> {
      const domain = await db.domain.findUnique({ where: { id }, select: { id: true } });
      if (!domain) throw new NotFoundError('Domain');
      return ctx.queues.enqueue(domainJobs.verify_domain, { domain_id: id, user_id: userId });
    },
  };
}

// A usage round: measure every tenant, store what was measured (the subscription's `usage`, the
// day's highest values), tell the customer when the state rises, and, when the settings say so,
// suspend subscriptions over their limits for longer than the grace period — never while the
// platform itself is failing for them (an alert firing on their Odoo host, their PostgreSQL server
// not measured in this round) or being worked on (a maintenance window on their Odoo host). One
// round at a time across every worker.
import type { AppContext } from '../context.js';
import { serversInMaintenance } from '../maintenance/index.js';
import { mapLimited, withSessionLock } from '../core/session-lock.js';
import type pg from 'pg';
import type { PostgresqlServer, Prisma, Subscription } from '../generated/prisma/client.js';
import {
  postAlert,
  type Actor,
  createSuspensionService,
  judgedUsageState,
  rises,
  unjudgedMeasures,
  type Usage,
} from '../subscriptions/index.js';
import { packageParams, PLACEMENT_INCLUDE, type Placement, placementOf, type Query, TenantRefusal } from '../instances/index.js';
import { connectPostgresqlServer } from '../postgresql/index.js';
import { databaseSizes, filestoreSizes, instanceCounts, type Sizes } from './usage-measure.js';
import { createUsageNotices } from './usage-notices.js';

const ROUND_LOCK = 'svc.usage_round';
/** Running databases measured at once (each one connection). */
const INSTANCE_CONCURRENCY = 8;
const HISTORY_DAYS = 400;
const DAY_MS = 86_400_000;

/** Database and filestore as the storage limit judges them (usage.ts); null when not both measured. */
const storageUsed = (u: Usage) => (u.db_size_bytes !== null && !u.missing.filestore ? u.db_size_bytes + (u.filestore_bytes ?? 0) : null);

type Tenant = Prisma.SubscriptionGetPayload<{ include: typeof PLACEMENT_INCLUDE & { partner: true } }> & { place: Placement };

export interface RoundResult {
  skipped?: string;
  measured: number;
  /** subscription id → measure → why it is missing */
  missing: Record<number, Record<string, string>>;
  notified: { subscription_id: number; state: string }[];
  suspended: number[];
  held_back: { subscription_id: number; why: string }[];
  /** subscription id → schemas found in its database besides Odoo's (public) and PostgreSQL's own */
  other_schemas: Record<number, string[]>;
}

/** The usage stored on a subscription: the measures, and the schemas besides Odoo's found with them. */
type StoredUsage = Usage & { other_schemas?: string[] };

/** Groups by a key, keeping order. */
function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = out.get(k);
    if (group) group.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/**
 * One maintenance connection per PostgreSQL server, opened when first needed and kept for the round
 * (undefined when it cannot be opened: each tenant's session then opens its own and says why).
 */
function maintenanceConnections(ctx: Pick<AppContext, 'secretBox'>) {
  const open = new Map<number, Promise<Query | undefined>>();
  const clients: pg.Client[] = [];
  const ignore = () => {};
  /** One statement at a time on the connection: the round's sessions take turns. */
  const queryOf = (client: pg.Client): Query => {
    let tail: Promise<unknown> = Promise.resolve();
    return (sql, params) => {
      const run = tail.then(() => client.query(sql, params));
      tail = run.then(ignore, ignore);
      return run;
    };
  };
  return {
    of(server: PostgresqlServer): Promise<Query | undefined> {
      let query = open.get(server.id);
      if (!query) {
        query = connectPostgresqlServer(ctx.secretBox, server).then(
          ({ client }) => {
            clients.push(client);
            return queryOf(client);
          },
          () => undefined,
        );
        open.set(server.id, query);
      }
      return query;
    },
    async close() {
      await Promise.all(clients.map((c) => c.end().catch(ignore)));
    },
  };
}

export function createUsageRound(ctx: AppContext) {
  const { db } = ctx;
  const notices = createUsageNotices(ctx);
  const suspension = createSuspensionService(ctx);

  /** What this round measured of one tenant; a suspended one keeps its last users and records. */
  async function measureAll(tenants: Tenant[], result: RoundResult) {
    const now = new Date();
    const usage = new Map<number, StoredUsage>();
    for (const t of tenants) {
      const last = t.usage as StoredUsage | null;
      usage.set(t.id, {
        db_size_bytes: null,
        filestore_bytes: null,
        active_users: t.state === 'suspended' ? (last?.active_users ?? null) : null,
        record_counts: t.state === 'suspended' ? (last?.record_counts ?? {}) : {},
        measured_at: now.toISOString(),
        missing: {},
        // Kept until a round looks again (a suspended or unreachable database is not looked into).
        ...(last?.other_schemas ? { other_schemas: last.other_schemas } : {}),
      });
    }
    const miss = (id: number, measure: string, why: string) => {
      usage.get(id)!.missing[measure] = why;
    };

    // Database sizes: one query per PostgreSQL server.
    const unmeasured = new Set<number>();
    await Promise.all(
      [...groupBy(tenants, (t) => t.place.pg.id).values()].map(async (group) => {
        const server = group[0]!.place.pg;
        let sizes: Sizes;
        try {
          sizes = await databaseSizes(ctx, server, group);
          await db.postgresqlServer.update({ where: { id: server.id }, data: { usage_measured_at: now, usage_error: null } });
        } catch (err) {
          const why = (err as Error).message;
          await db.postgresqlServer.update({ where: { id: server.id }, data: { usage_error: why } });
          unmeasured.add(server.id);
          for (const t of group) miss(t.id, 'db_size', why);
          return;
        }
        for (const t of group) {
          const size = sizes.get(t.id)!;
          if (typeof size === 'number') usage.get(t.id)!.db_size_bytes = size;
          else miss(t.id, 'db_size', size.missing);
        }
      }),
    );

    // Filestores: one command per Odoo host; before the users and records, whose session writes the
    // storage the instance has used into it (svc.storage_used_bytes, for svc's addon).
    const hosted = tenants.filter((t) => t.place.host);
    await Promise.all(
      [...groupBy(hosted, (t) => t.place.host!.id).values()].map(async (group) => {
        const host = group[0]!.place.host!;
        try {
          const sizes = await filestoreSizes(
            ctx,
            host,
            group.map((t) => t.database_name!),
          );
          for (const t of group) {
            const size = sizes.get(t.database_name!);
            if (size === undefined) miss(t.id, 'filestore', `no filestore directory for ${t.database_name} on root server ${host.id}`);
            else usage.get(t.id)!.filestore_bytes = size;
          }
        } catch (err) {
          for (const t of group) miss(t.id, 'filestore', (err as Error).message);
        }
      }),
    );

    // Users and records: one connection per running database, a few at a time; the checks before
    // each (its identity, its role) on one maintenance connection per server for the whole round.
    const refusedByTenant = new Set<number>();
    const maintenance = maintenanceConnections(ctx);
    try {
      await mapLimited(
        tenants.filter((t) => t.state === 'running'),
        INSTANCE_CONCURRENCY,
        async (t) => {
          try {
            // The package as svc wrote it (svc.contact aside: a new setting reaches instances with their next sync).
            const expected = t.instance_sync_pending_at ? null : packageParams(t);
            const counts = await instanceCounts(
              ctx,
              t,
              Object.keys((t.model_limits ?? {}) as object),
              storageUsed(usage.get(t.id)!),
              expected,
              { placement: t.place, maintenance: await maintenance.of(t.place.pg) },
            );
            Object.assign(usage.get(t.id)!, { active_users: counts.active_users, record_counts: counts.record_counts });
            await reportRestored(t, counts.restored);
            await reportOtherSchemas(t, usage.get(t.id)!, counts.other_schemas, result);
            for (const [measure, why] of Object.entries(counts.missing)) miss(t.id, measure, why);
          } catch (err) {
            if (err instanceof TenantRefusal) refusedByTenant.add(t.id);
            miss(t.id, 'active_users', (err as Error).message);
            for (const model of Object.keys((t.model_limits ?? {}) as object)) miss(t.id, `model:${model}`, (err as Error).message);
          }
        },
      );
    } finally {
      await maintenance.close();
    }

    for (const [id, u] of usage) if (Object.keys(u.missing).length > 0) result.missing[id] = u.missing;
    return { usage, unmeasured, withheld: withheldCounts(tenants, usage, unmeasured, refusedByTenant) };
  }

  /** A chatter alert naming the package parameters a change inside the instance altered (put back). */
  async function reportRestored(t: Tenant, restored: Record<string, string | null>) {
    const keys = Object.keys(restored);
    if (keys.length === 0) return;
    const found = keys.map((k) => `${k} (found ${restored[k] === null ? 'missing' : JSON.stringify(restored[k])})`).join(', ');
    await postAlert(
      db,
      t.id,
      `The package parameters ${found} were changed inside database ${t.database_name}, not by svc: put back.`,
      null,
    );
  }

  /**
   * Schemas besides Odoo's in a tenant's database (Odoo makes none: the tenant's SQL did), kept with
   * the usage and in the round's result; a chatter alert when a round finds one the last did not.
   * svc and its addon read Odoo's tables in public by name, so such a schema hides nothing from
   * them, but Odoo's own queries follow the search_path: the operator should look.
   */
  async function reportOtherSchemas(t: Tenant, u: StoredUsage, schemas: string[], result: RoundResult) {
    u.other_schemas = schemas;
    if (schemas.length === 0) return;
    result.other_schemas[t.id] = schemas;
    const before = new Set((t.usage as StoredUsage | null)?.other_schemas ?? []);
    const added = schemas.filter((s) => !before.has(s));
    if (added.length === 0) return;
    await postAlert(
      db,
      t.id,
      `Database ${t.database_name} has schema(s) ${added.map((s) => JSON.stringify(s)).join(', ')} besides Odoo's own (public): Odoo makes none, so the tenant's SQL did. They can shadow Odoo's tables for queries that do not name public; svc and its addon are not misled, but look at them.`,
      null,
    );
  }

  /**
   * The limited counts each tenant alone withheld in this round: its own database refused them
   * (TenantRefusal: a table not as Odoo makes it, a lock held past the deadline) while its
   * PostgreSQL server was measured and another running tenant there was counted (or it is the only
   * one there). A refused role or an unreachable server is the operator's to mend, not the tenant's.
   */
  function withheldCounts(tenants: Tenant[], usage: Map<number, Usage>, unmeasured: Set<number>, refusedByTenant: Set<number>) {
    const withheld = new Map<number, string[]>();
    const running = tenants.filter((t) => t.state === 'running');
    for (const [server, group] of groupBy(running, (t) => t.place.pg.id)) {
      const serverFine = !unmeasured.has(server) && (group.length === 1 || group.some((t) => usage.get(t.id)!.active_users !== null));
      if (!serverFine) continue;
      for (const t of group.filter((g) => refusedByTenant.has(g.id))) {
        const counts = unjudgedMeasures(t, usage.get(t.id)!).filter((m) => m !== 'storage');
        if (counts.length > 0) withheld.set(t.id, counts);
      }
    }
    return withheld;
  }

  /**
   * The day's highest values (one point per subscription per day), for every tenant of the round in
   * one statement: a missing value keeps the day's (GREATEST ignores nulls), and each model's count
   * is the highest of the day.
   */
  async function recordDays(days: { id: number; u: Usage }[]) {
    if (days.length === 0) return;
    const text = (n: number | null) => (n === null ? null : String(n));
    await db.$executeRaw`
      INSERT INTO subscription_usage_days AS d (subscription_id, date, db_size_bytes, filestore_bytes, active_users, record_counts)
      SELECT * FROM unnest(${days.map((d) => d.id)}::int[], ${days.map((d) => d.u.measured_at.slice(0, 10))}::date[],
                           ${days.map((d) => text(d.u.db_size_bytes))}::bigint[], ${days.map((d) => text(d.u.filestore_bytes))}::bigint[],
                           ${days.map((d) => d.u.active_users)}::int[], ${days.map((d) => JSON.stringify(d.u.record_counts))}::jsonb[])
      ON CONFLICT (subscription_id, date) DO UPDATE SET
        db_size_bytes = GREATEST(d.db_size_bytes, EXCLUDED.db_size_bytes),
        filestore_bytes = GREATEST(d.filestore_bytes, EXCLUDED.filestore_bytes),
        active_users = GREATEST(d.active_users, EXCLUDED.active_users),
        record_counts = d.record_counts || (
          SELECT COALESCE(jsonb_object_agg(e.key, GREATEST(COALESCE((d.record_counts ->> e.key)::bigint, 0), e.value::bigint)), '{}'::jsonb)
            FROM jsonb_each_text(EXCLUDED.record_counts) e)`;
  }

  /** Whether the platform is failing this tenant (or is being worked on): then its limits are not enforced. */
  async function holdBack(t: Tenant, unmeasured: Set<number>, inMaintenance: Set<number>): Promise<string | null> {
    const pgId = t.place.pg.id;
    const hostId = t.place.host?.id ?? null;
    if (unmeasured.has(pgId)) return `its PostgreSQL server ${pgId} could not be measured in this round`;
    if (hostId === null) return null;
    if (inMaintenance.has(hostId)) return `its Odoo host (root server ${hostId}) is in a maintenance window`;
    const firing = await db.alert.count({ where: { root_server_id: hostId, state: 'firing' } });
    if (firing > 0) return `an alert fires on its Odoo host (root server ${hostId})`;
    return null;
  }

  async function round(actor: Actor, result: RoundResult) {
    const loaded = await db.subscription.findMany({
      where: {
        state: { in: ['running', 'suspended'] },
        database_created_at: { not: null },
        database_oid: { not: null },
        database_template_id: { not: null },
      },
      include: { ...PLACEMENT_INCLUDE, partner: true },
      orderBy: { id: 'asc' },
    });
    const tenants = loaded.map((t) => ({ ...t, place: placementOf(t) }));
    const { usage, unmeasured, withheld } = await measureAll(tenants, result);
    await recordDays(tenants.map((t) => ({ id: t.id, u: usage.get(t.id)! })));
    const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
    const now = Date.now();
    let inMaintenance: Set<number> | undefined;

    for (const t of tenants) {
      const u = usage.get(t.id)!;
      const withheldNow = withheld.get(t.id) ?? [];
      // A suspended tenant is not counted (its database is closed): its streak stands still.
      const withheldRounds = t.state !== 'running' ? t.usage_withheld_rounds : withheldNow.length > 0 ? t.usage_withheld_rounds + 1 : 0;
      const measured = judgedUsageState(t, u, { measures: withheldNow, rounds: withheldRounds });
      const { worst } = measured;
      // A round that missed a limited measure cannot lower the state (nor restart the grace period).
      const held = unjudgedMeasures(t, u).length > 0 && rises(measured.state, t.usage_state);
      const state = held ? t.usage_state : measured.state;
      const exceededSince = state === 'exceeded' ? (t.usage_exceeded_since ?? new Date(now)) : null;
      const after = await db.subscription.update({
        where: { id: t.id },
        data: {
          usage: u as unknown as Prisma.InputJsonValue,
          usage_state: state,
          usage_exceeded_since: exceededSince,
          usage_withheld_rounds: withheldRounds,
        },
      });
      result.measured++;
      if (await notices.afterRound(after, worst, { partner: t.partner, settings })) result.notified.push({ subscription_id: t.id, state });

      if (!settings.enforce_limits || measured.state !== 'exceeded' || t.state !== 'running') continue;
      if (now - exceededSince!.getTime() < settings.limit_grace_days * DAY_MS) continue;
      inMaintenance ??= await serversInMaintenance(db, new Date());
      const why = await holdBack(t, unmeasured, inMaintenance);
      if (why) {
        result.held_back.push({ subscription_id: t.id, why });
        continue;
      }
      try {
        const suspended = await suspension.suspendOverLimit(t.id, actor);
        if (suspended) {
          result.suspended.push(t.id);
          await notices.suspended(suspended as Subscription, worst);
        }
      } catch (err) {
        await postAlert(
          db,
          t.id,
          `Over its limits past the grace period, but it could not be suspended: ${(err as Error).message}. The next round tries again.`,
          null,
        );
      }
    }
    await db.subscriptionUsageDay.deleteMany({ where: { date: { lt: new Date(now - HISTORY_DAYS * DAY_MS) } } });
  }

  return {
    /** One round now; another worker's round in progress makes this one a no-op. */
    async collect(actor: Actor): Promise<RoundResult> {
      const result: RoundResult = { measured: 0, missing: {}, notified: [], suspended: [], held_back: [], other_schemas: {} };
      const ran = await withSessionLock(ctx.config.DATABASE_URL, ROUND_LOCK, () => round(actor, result));
      return ran === null ? { ...result, skipped: 'another worker is running a usage round' } : result;
    },
  };
}

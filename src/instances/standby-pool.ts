// The standby pool (as Frappe Press keeps standby sites): per trial package, standby_pool_size
// databases already copied from its template, with an identity of their own and their filestore,
// so that a trial is ready without waiting for a copy. One run at a time maintains the pool (a
// PostgreSQL advisory lock, held by a connection of its own, so a dead worker's lock goes with
// it); copies are made one at a time per PostgreSQL server. A deployment takes a ready standby
// with one conditional update, so no standby is ever handed out twice.
import type { AppContext } from '../context.js';
import { runLoggedStep } from '../core/action-log.js';
import { withSessionLock } from '../core/session-lock.js';
import type { Db } from '../core/db.js';
import type { DatabaseTemplate, PostgresqlServer, RootServer, StandbyDatabase, TrialPackage } from '../generated/prisma/client.js';
import { createHash } from 'node:crypto';
import { findDatabase, ownDatabase, quoteIdent } from '../postgresql/index.js';
import { createFilestores } from './filestore.js';
import { copyTemplate, dropMadeDatabase, LONG_STATEMENT_TIMEOUT, onServer, serverWhere, type MadeDatabase } from './instance-database.js';
import { assertOdooDatabase, setIdentity, type Query } from './odoo-database.js';
import { handOverToTenantRole, hasTenantRoles, tenantRoleName } from './tenant-role.js';
import { insideTenant, tenantRoleOf } from './tenant-session.js';
import { placeStandby } from './standby-placement.js';

/** Databases under this prefix are the pool's: no subscription or template may use it. */
export const STANDBY_PREFIX = 'svc_standby_';
export const MAX_STANDBY_POOL_SIZE = 50;
/** A failed standby is shown this long before it is removed and made again. */
export const STANDBY_RETRY_MS = 5 * 60_000;
/** A standby taken and neither renamed nor given back in this time was left by a dead deployment. */
const TAKEN_TIMEOUT_MS = 30 * 60_000;
/** Held by the worker maintaining the pool (one at a time across workers). */
export const STANDBY_POOL_LOCK = 'svc.standby_pool';

type Deps = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Template = DatabaseTemplate & { postgresql_server: PostgresqlServer; root_server: RootServer | null };
type Package = TrialPackage & { database_template: Template | null };
export type Standby = StandbyDatabase & { postgresql_server: PostgresqlServer; root_server: RootServer | null };

/**
 * svc_standby_<installation>_<package>_<n>. The installation part (from the identity of the
 * service's own database) keeps two installations that share a PostgreSQL cluster apart.
 */
export async function standbyName(db: Db, packageId: number, n: number) {
  return `${await installationPrefix(db)}${packageId}_${n}`;
}

/** This installation's part of the reserved namespace: svc_standby_<8 hex>_. */
export async function installationPrefix(db: Db) {
  const own = await ownDatabase(db);
  return installationPrefixOf(own.systemIdentifier, own.oid);
}

/** The prefix of the installation whose database is `oid` in the cluster `systemIdentifier`. */
export function installationPrefixOf(systemIdentifier: string, oid: bigint | string) {
  const tag = createHash('sha256').update(`${systemIdentifier}/${oid}`).digest('hex').slice(0, 8);
  return `${STANDBY_PREFIX}${tag}_`;
}
const madeOf = (s: StandbyDatabase): MadeDatabase | null =>
  s.system_identifier && s.oid !== null ? { name: s.database_name, systemIdentifier: s.system_identifier, oid: s.oid } : null;

/**
 * Hands one ready standby of the package, made from the template as it is now (its record and its
 * contents' version), to one caller (state taken); null when there is none. Concurrent callers get
 * different ones (SKIP LOCKED).
 * `onHosts`: only standbys on these Odoo hosts, in this order (placement's healthy hosts, least
 * filled first); undefined: anywhere.
 */
export async function takeStandby(db: Db, packageId: number, templateId: number, onHosts?: readonly number[]): Promise<Standby | null> {
  const hosts = onHosts ? [...onHosts] : null;
  const [row] = await db.$queryRaw<{ id: number }[]>`
    UPDATE standby_databases SET state = 'taken', updated_at = now()
     WHERE id = (SELECT s.id FROM standby_databases s
                   JOIN database_templates t ON t.id = s.database_template_id AND t.updated_at = s.template_version
                    AND t.content_version = s.template_content_version
                  WHERE s.trial_package_id = ${packageId} AND s.database_template_id = ${templateId} AND s.state = 'ready'
                    AND (${hosts}::int[] IS NULL OR s.root_server_id = ANY(${hosts}::int[]))
                  ORDER BY array_position(${hosts}::int[], s.root_server_id), s.id LIMIT 1 FOR UPDATE OF s SKIP LOCKED)
    RETURNING id`;
  if (!row) return null;
  return db.standbyDatabase.findUnique({ where: { id: row.id }, include: { postgresql_server: true, root_server: true } });
}

/**
 * After a take, the pool is refilled this much later, not at once: a burst of signups is served
 * first (copies compete with its deployments for the same CPU and disk), then the pool refills.
 */
export const STANDBY_REFILL_DELAY_MS = 15_000;

/** A taken standby whose database (and filestore) now belong to a subscription. */
export const standbyHandedOver = (db: Db, id: number) => db.standbyDatabase.deleteMany({ where: { id } });

/** A taken standby that could not be handed over: shown failed, removed and made again later. */
export const standbyLost = (db: Db, id: number, error: string) =>
  db.standbyDatabase.updateMany({ where: { id }, data: { state: 'failed', error } });

/** Why a standby must go, or null while it is wanted. */
function staleReason(s: StandbyDatabase, pkg: Package | undefined, now: number): string | null {
  const age = now - s.updated_at.getTime();
  if (s.state === 'creating') return 'left half-made by a run that ended';
  if (s.state === 'taken') return age > TAKEN_TIMEOUT_MS ? 'taken by a deployment that never finished' : null;
  if (s.state === 'failed' && age > STANDBY_RETRY_MS) return 'failed: made again';
  // Only active packages that keep standbys and have a template are wanted.
  if (!pkg) return 'its trial package no longer keeps standbys';
  const template = pkg.database_template;
  if (!template || template.id !== s.database_template_id || template.updated_at.getTime() !== s.template_version.getTime()) {
    return 'its template changed';
  }
  // An update advances the contents' version without touching the record.
  if (template.content_version !== s.template_content_version) return "its template's contents changed";
  return null;
}

export interface PoolRunResult {
  skipped?: string;
  created: string[];
  failed: { database_name: string; error: string }[];
  removed: { database_name: string; reason: string }[];
}

export function createStandbyPool(ctx: Deps) {
  const { db } = ctx;
  const filestores = createFilestores(ctx);
  const audit = { user_id: null };

  /** One step of a standby in the action log (model svc.standby.database): `make standby` or `remove standby`. */
  const logged = <T>(s: StandbyDatabase, operation: string, input: string, work: () => Promise<T>, output?: (r: T) => string) =>
    runLoggedStep(
      db,
      { model_name: 'svc.standby.database', rec_id: s.id, action_type: 'deployment', operation, input_text: input },
      work,
      output,
    );

  /**
   * Drops the standby's database by its recorded identity, never by name alone, and its filestore.
   * A run that died between CREATE DATABASE and recording the identity left none: the database under
   * the standby's name is adopted only when it is this installation's and no subscription or other
   * standby is recorded as it (no template carries the prefix). A database under the name that is
   * somebody else's keeps its filestore too: that directory is its own.
   */
  async function removeStandby(s: Standby, reason: string) {
    await logged(
      s,
      'remove standby',
      `${s.database_name} (${reason})`,
      async () => {
        const ours = await onServer(
          ctx.secretBox,
          s.postgresql_server,
          async (query) => {
            const made = madeOf(s) ?? (await unrecordedCopy(query, s));
            if (made === 'another') return false;
            if (made) await dropMadeDatabase(query, made);
            return true;
          },
          { timeout: LONG_STATEMENT_TIMEOUT },
        );
        if (!ours) return `left: database ${s.database_name} is not the pool's`;
        if (s.root_server) await filestores.remove(s.root_server, s.database_name, { ...audit, operation: 'remove standby' });
        return 'removed';
      },
      (out) => out,
    );
    await db.standbyDatabase.delete({ where: { id: s.id } });
  }

  /**
   * The database a run left under the standby's name before recording it; null when there is none,
   * 'another' when it is not this installation's or somebody is recorded as it.
   */
  async function unrecordedCopy(query: Query, s: Standby): Promise<MadeDatabase | 'another' | null> {
    const found = await findDatabase(query, s.database_name);
    if (!found) return null;
    if (!s.database_name.startsWith(await installationPrefix(db))) return 'another';
    const identity = { database_system_identifier: found.systemIdentifier, database_oid: found.oid };
    const [subscription, standby] = await Promise.all([
      db.subscription.count({ where: identity }),
      db.standbyDatabase.count({ where: { system_identifier: found.systemIdentifier, oid: found.oid } }),
    ]);
    if (subscription > 0 || standby > 0) return 'another';
    return { name: s.database_name, systemIdentifier: found.systemIdentifier, oid: found.oid };
  }

  /** Copies the template into a new standby: database, identity, filestore; failed (and cleaned) on any error. */
  async function makeStandby(pkg: Package, own: Template): Promise<{ name: string; error?: string }> {
    // Placed like the trials that will take it (standby-placement.ts): no host fits, no standby.
    const spot = await placeStandby(db, pkg.id, own, `${STANDBY_PREFIX}new_${Date.now()}_${Math.random().toString(36).slice(2)}`).catch(
      (err: Error) => err,
    );
    if (spot instanceof Error) return { name: `(a standby of package ${pkg.id})`, error: spot.message };
    const { server, row: placeholder } = spot;
    const host = spot.root;
    // The template as seen on that host (its copy there: template-hosts.ts).
    const template = spot.templateHost.template;
    const s = await db.standbyDatabase.update({
      where: { id: placeholder.id },
      data: { database_name: await standbyName(db, pkg.id, placeholder.id) },
    });
    const name = s.database_name;
    let made: MadeDatabase | null = null;
    let filestore = false;
    try {
      made = await logged(
        s,
        'make standby',
        `CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template.template_db_name)} -- on ${serverWhere(server)}`,
        () =>
          onServer(ctx.secretBox, server, (query) => copyTemplate(db, query, template, name, serverWhere(server)), {
            timeout: LONG_STATEMENT_TIMEOUT,
          }),
        () => 'Database created',
      );
      await db.standbyDatabase.update({ where: { id: s.id }, data: { system_identifier: made.systemIdentifier, oid: made.oid } });
      await logged(
        s,
        'make standby',
        `new identity of ${name} (database.secret, database.uuid, database.create_date; enterprise code removed)`,
        () =>
          insideTenant(
            ctx.secretBox,
            server,
            name,
            async (query) => {
              await assertOdooDatabase(query, `Database ${name} (a copy of ${template.template_db_name})`);
              await setIdentity(query, { url: null });
            },
            {
              role: tenantRoleOf(template),
              deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
              what: `Standby ${name}`,
              identity: made!,
            },
          ),
        () => 'Identity set',
      );
      if (hasTenantRoles(template)) {
        // A role of its own that cannot log in: the standby carries no usable credential until a trial takes it.
        const from = template.owner_role ?? template.root_server!.odoo_db_user!;
        await logged(
          s,
          'make standby',
          `${name} and everything in it owned by its own role ${tenantRoleName(made)} (NOLOGIN, from ${from})`,
          () => handOverToTenantRole(ctx.secretBox, server, made!, from, null),
          (role) => `Owned by ${role}`,
        );
      }
      if (host) {
        const root = host;
        await logged(
          s,
          'make standby',
          `filestore of ${name} on root server ${root.id}`,
          () => filestores.copy(root, template.template_db_name, name, { ...audit, operation: 'make standby' }),
          (out) => out,
        );
        filestore = true;
      }
      await db.standbyDatabase.update({ where: { id: s.id }, data: { state: 'ready', error: null } });
      return { name };
    } catch (err) {
      // Nothing half-made stays: what this attempt made goes, the row shows why (and what could not go).
      const left: string[] = [];
      await onServer(ctx.secretBox, server, (query) => (made ? dropMadeDatabase(query, made) : Promise.resolve(false)), {
        timeout: LONG_STATEMENT_TIMEOUT,
      }).catch((e: Error) => left.push(`Dropping ${name} failed: ${e.message}`));
      if (filestore && host) {
        await filestores
          .remove(host, name, { ...audit, operation: 'make standby (failed: remove)' })
          .catch((e: Error) => left.push(`Removing its filestore on root server ${host.id} failed: ${e.message}`));
      }
      const error = [(err as Error).message, ...left].join(' ');
      await db.standbyDatabase.update({ where: { id: s.id }, data: { state: 'failed', error } });
      return { name, error };
    }
  }

  async function packages(): Promise<Package[]> {
    return db.trialPackage.findMany({
      where: { active: true, standby_pool_size: { gt: 0 }, database_template_id: { not: null } },
      include: { database_template: { include: { postgresql_server: true, root_server: true } } },
      orderBy: { id: 'asc' },
    });
  }

  /** Removes what must go, then makes the missing standbys (one at a time per PostgreSQL server). */
  async function run(result: PoolRunResult) {
    const now = Date.now();
    const wanted = new Map((await packages()).map((p) => [p.id, p]));
    const rows = await db.standbyDatabase.findMany({ include: { postgresql_server: true, root_server: true }, orderBy: { id: 'asc' } });
    const kept = new Map<number, number>();
    for (const s of rows) {
      const pkg = s.trial_package_id === null ? undefined : wanted.get(s.trial_package_id);
      let reason = staleReason(s, pkg, now);
      const count = kept.get(s.trial_package_id ?? 0) ?? 0;
      if (!reason && s.state !== 'taken' && pkg && count >= pkg.standby_pool_size) reason = 'more than the pool size';
      if (!reason) {
        if (s.state !== 'taken') kept.set(s.trial_package_id ?? 0, count + 1);
        continue;
      }
      // Claimed first: a deployment may take a ready standby at any moment, and then it is not ours to remove.
      const claimed = await db.standbyDatabase.updateMany({
        where: { id: s.id, state: s.state, updated_at: s.updated_at },
        data: { state: 'failed', error: `being removed: ${reason}` },
      });
      if (claimed.count === 0) continue;
      try {
        await removeStandby(s, reason);
        result.removed.push({ database_name: s.database_name, reason });
      } catch (err) {
        const error = `could not be removed (${reason}): ${(err as Error).message}`;
        await db.standbyDatabase.updateMany({ where: { id: s.id }, data: { error } });
        result.failed.push({ database_name: s.database_name, error });
      }
    }

    // Missing standbys, queued per PostgreSQL server.
    const perServer = new Map<number, Package[]>();
    for (const pkg of wanted.values()) {
      const missing = pkg.standby_pool_size - (kept.get(pkg.id) ?? 0);
      const serverId = pkg.database_template!.postgresql_server_id;
      for (let i = 0; i < missing; i++) perServer.set(serverId, [...(perServer.get(serverId) ?? []), pkg]);
    }
    await Promise.all(
      [...perServer.values()].map(async (queue) => {
        for (const pkg of queue) {
          const { name, error } = await makeStandby(pkg, pkg.database_template!);
          if (error) result.failed.push({ database_name: name, error });
          else result.created.push(name);
        }
      }),
    );
  }

  return {
    /** One maintenance run; another worker's run in progress makes this one a no-op. */
    async maintain(): Promise<PoolRunResult> {
      const result: PoolRunResult = { created: [], failed: [], removed: [] };
      const ran = await withSessionLock(ctx.config.DATABASE_URL, STANDBY_POOL_LOCK, () => run(result));
      return ran === null ? { ...result, skipped: 'another worker is maintaining the pool' } : result;
    },
  };
}

// A template's copies on the other Odoo hosts of its pool (DESIGN §22; which copies count:
// instances' template-hosts.ts). A copy is made from the template's own database and filestore:
// - the database: an empty one on the host's PostgreSQL server owned by that host's role (never a
//   tenant's, never a superuser), filled by pg_dump of the template | pg_restore as that role, so
//   every object in it is the host's role's, as in a template that host built (its deployments hand
//   it over to each tenant's own role); no one else may connect to it (CONNECT revoked from PUBLIC);
// - its name svc_standby_<installation>_t<template>_h<host>_v<version>: in the namespace no tenant
//   or template may take, and a new one per version;
// - the template's identity is checked before it is read (template-identity.ts), the copy's own
//   recorded once made: every use checks the database under its name is still it;
// - the filestore streamed from the template's host (moves' sendFilestore).
// A copy out of step (or failed) is dropped and made again; one that half-exists after a crash is
// dropped first. A host that left the pool (another version, no Odoo) loses its copy.
import type { AppContext } from '../context.js';
import { runLoggedStep } from '../core/action-log.js';
import { UserError } from '../core/errors.js';
import type { DatabaseTemplate, DatabaseTemplateCopy, PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import {
  assertTemplateDatabase,
  assertTemplateIdentity,
  assertTenantRole,
  copyInStep,
  createEmptyDatabase,
  createFilestores,
  databaseLocale,
  dropDatabaseAndItsRole,
  dropMadeDatabase,
  dumpAndRestore,
  installationPrefix,
  LONG_STATEMENT_TIMEOUT,
  onServer,
  serverWhere,
} from '../instances/index.js';
import { sendFilestore } from '../moves/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';

const COPY_TIMEOUT_MS = 2 * 60 * 60_000;

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Audit = { user_id: number | null; job_id: string };
type Template = DatabaseTemplate & { postgresql_server: PostgresqlServer; root_server: RootServer | null };
type Copy = DatabaseTemplateCopy & { root_server: RootServer };
type PoolHost = RootServer & { odoo_postgresql_server: PostgresqlServer | null };

export interface SyncResult {
  skipped?: string;
  in_step: number[];
  made: { root_server_id: number; database_name: string; seconds: number }[];
  failed: { root_server_id: number; error: string }[];
  removed: { root_server_id: number; database_name: string; reason: string }[];
}

/** The Odoo hosts of the template's pool other than its own: same Odoo version, running, with a role on a PostgreSQL server. */
export async function poolHostsOf(ctx: Ctx, template: Template): Promise<PoolHost[]> {
  const own = template.root_server;
  if (!own?.odoo_version_id) return [];
  return ctx.db.rootServer.findMany({
    where: {
      id: { not: own.id },
      odoo_version_id: own.odoo_version_id,
      odoo_state: 'running',
      odoo_postgresql_server_id: { not: null },
      odoo_db_user: { not: null },
    },
    include: { odoo_postgresql_server: true },
    orderBy: { id: 'asc' },
  });
}

/** A copy's database name: in this installation's reserved namespace, one per template, host and version. */
export async function copyName(ctx: Ctx, templateId: number, hostId: number, version: number) {
  return `${await installationPrefix(ctx.db)}t${templateId}_h${hostId}_v${version}`;
}

export function createTemplateCopies(ctx: Ctx) {
  const { db } = ctx;
  const filestores = createFilestores(ctx);

  const logged = <T>(templateId: number, audit: Audit, input: string, work: () => Promise<T>, output?: (r: T) => string) =>
    runLoggedStep(
      db,
      {
        model_name: 'svc.database.template',
        rec_id: templateId,
        action_type: 'database',
        operation: 'template copy',
        input_text: input,
        user_id: audit.user_id,
        job_id: audit.job_id,
      },
      work,
      output,
    );

  /**
   * What a copy row names on its host: its database (by the identity recorded, else by its name when
   * no identity was recorded yet: a run that died between CREATE and the record) and its filestore.
   */
  async function removeCopy(template: Template, copy: Copy, audit: Audit, reason: string) {
    const pg = await db.postgresqlServer.findUniqueOrThrow({ where: { id: copy.postgresql_server_id } });
    await logged(template.id, audit, `DROP DATABASE ${quoteIdent(copy.database_name)} -- on ${serverWhere(pg)} (${reason})`, () =>
      onServer(
        ctx.secretBox,
        pg,
        async (q) => {
          if (copy.oid !== null && copy.system_identifier !== null) {
            await dropMadeDatabase(q, { name: copy.database_name, oid: copy.oid, systemIdentifier: copy.system_identifier });
          } else if (copy.database_name.startsWith(await installationPrefix(db))) {
            await dropDatabaseAndItsRole(q, copy.database_name, copy.owner_role);
          }
        },
        { timeout: LONG_STATEMENT_TIMEOUT },
      ),
    );
    await filestores.remove(copy.root_server, copy.database_name, { ...audit, operation: 'template copy (remove)' });
  }

  /** Makes the template's copy on `host` (replacing `old`, dropped first): database, identity, filestore. */
  async function makeCopy(template: Template, host: PoolHost, old: Copy | null, audit: Audit) {
    const origin = template.root_server!;
    const to = host.odoo_postgresql_server!;
    const role = host.odoo_db_user!;
    if (old) await removeCopy(template, old, audit, copyInStep(old, template.content_version) ? 'moved' : 'out of step');
    const version = template.content_version;
    const name = await copyName(ctx, template.id, host.id, version);
    const started = Date.now();
    const row = await db.databaseTemplateCopy.upsert({
      where: { database_template_id_root_server_id: { database_template_id: template.id, root_server_id: host.id } },
      create: {
        database_template_id: template.id,
        root_server_id: host.id,
        postgresql_server_id: to.id,
        database_name: name,
        content_version: version,
        owner_role: role,
      },
      update: {
        postgresql_server_id: to.id,
        database_name: name,
        content_version: version,
        owner_role: role,
        state: 'copying',
        oid: null,
        system_identifier: null,
        error: null,
        seconds: null,
      },
      include: { root_server: true },
    });
    const from = template.postgresql_server;
    const fromWhere = serverWhere(from);
    try {
      const locale = await onServer(ctx.secretBox, from, async (q) => {
        await assertTemplateIdentity(db, template, await assertTemplateDatabase(db, q, template.template_db_name, fromWhere), fromWhere);
        return databaseLocale(q, template.template_db_name);
      });
      if (!locale) throw new UserError(`Template database ${template.template_db_name} does not exist on ${fromWhere}`);
      await logged(
        template.id,
        audit,
        `CREATE DATABASE ${quoteIdent(name)} OWNER ${quoteIdent(role)} TEMPLATE template0 -- on ${serverWhere(to)}`,
        () =>
          onServer(ctx.secretBox, to, async (q) => {
            // A copy of this name left by a run that died before recording it: it is ours (the namespace), dropped.
            await dropDatabaseAndItsRole(q, name, role);
            await assertTenantRole(q, role, `Copies of template ${template.template_db_name} on ${serverWhere(to)}`);
            await createEmptyDatabase(q, name, role, locale);
            await q(`REVOKE ALL ON DATABASE ${quoteIdent(name)} FROM PUBLIC`);
          }),
      );
      await logged(
        template.id,
        audit,
        `pg_dump -Fc ${template.template_db_name} (on ${fromWhere}) | pg_restore --no-owner -d ${name} (as ${role} on ${serverWhere(to)})`,
        async () =>
          dumpAndRestore(
            { host: from.ip, port: from.port, user: from.username ?? 'postgres', password: await ctx.secretBox.reveal(from.password) },
            { host: to.ip, port: to.port, user: role, password: await ctx.secretBox.reveal(host.odoo_db_password) },
            template.template_db_name,
            name,
            COPY_TIMEOUT_MS,
            ctx.config.PATH,
          ),
        (said) => said || 'restored',
      );
      const found = await onServer(ctx.secretBox, to, (q) => findDatabase(q, name));
      if (!found) throw new UserError(`The copy ${name} is not on ${serverWhere(to)} after its restore`);
      await db.databaseTemplateCopy.update({ where: { id: row.id }, data: { system_identifier: found.systemIdentifier, oid: found.oid } });
      await logged(
        template.id,
        audit,
        `filestore of ${template.template_db_name} (root server ${origin.id}) to ${name} (root server ${host.id})`,
        () => sendFilestore(ctx, origin, host, template.template_db_name, audit, { toName: name, operation: 'template copy' }),
        (said) => said,
      );
      const seconds = (Date.now() - started) / 1000;
      await db.databaseTemplateCopy.update({ where: { id: row.id }, data: { state: 'ready', seconds } });
      return { root_server_id: host.id, database_name: name, seconds };
    } catch (err) {
      const error = (err as Error).message.slice(-4000);
      const now = await db.databaseTemplateCopy.findUniqueOrThrow({ where: { id: row.id }, include: { root_server: true } });
      const left = await removeCopy(template, now, audit, 'failed').then(
        () => '',
        (e: Error) => ` What was made of it could not be removed: ${e.message}`,
      );
      await db.databaseTemplateCopy.update({ where: { id: row.id }, data: { state: 'failed', error: `${error}${left}` } });
      throw err;
    }
  }

  return {
    /**
     * Brings every host of the template's pool to a ready, in-step copy: the missing and out-of-step
     * ones made (one host at a time), those of hosts that left the pool removed. A failure on one host
     * is recorded on its copy and the others go on.
     */
    async sync(templateId: number, audit: Audit): Promise<SyncResult> {
      const result: SyncResult = { in_step: [], made: [], failed: [], removed: [] };
      const template = await db.databaseTemplate.findUnique({
        where: { id: templateId },
        include: { postgresql_server: true, root_server: true, copies: { include: { root_server: true } } },
      });
      if (!template) return { ...result, skipped: 'no such template' };
      if (!template.root_server?.odoo_version_id) return { ...result, skipped: 'the template has no Odoo host' };
      if (template.template_oid === null) return { ...result, skipped: 'the template database was never built or checked' };
      // Its update runs (or was cut short): the contents are about to change; the update queues a sync when it ends.
      if (template.update_safety_copy) return { ...result, skipped: 'an update of the template is under way' };
      const hosts = await poolHostsOf(ctx, template);
      const inPool = new Set(hosts.map((h) => h.id));
      for (const copy of template.copies) {
        if (inPool.has(copy.root_server_id)) continue;
        const reason = copy.root_server_id === template.root_server_id ? "the template's own host" : 'the host left the pool';
        await removeCopy(template, copy, audit, reason);
        await db.databaseTemplateCopy.delete({ where: { id: copy.id } });
        result.removed.push({ root_server_id: copy.root_server_id, database_name: copy.database_name, reason });
      }
      for (const host of hosts) {
        const copy = template.copies.find((c) => c.root_server_id === host.id) ?? null;
        const same = copy && copy.postgresql_server_id === host.odoo_postgresql_server_id;
        if (copy && same && copyInStep(copy, template.content_version)) {
          result.in_step.push(host.id);
          continue;
        }
        try {
          result.made.push(await makeCopy(template, host, copy, audit));
        } catch (err) {
          result.failed.push({ root_server_id: host.id, error: (err as Error).message.slice(-1000) });
        }
      }
      if (result.failed.length > 0 && result.made.length === 0 && result.in_step.length === 0 && hosts.length > 0) {
        throw new UserError(
          `No copy of template ${template.id} could be made: ${result.failed.map((f) => `root server ${f.root_server_id}: ${f.error}`).join('; ')}`,
        );
      }
      return result;
    },

    /** The templates whose pool has a host without a ready, in-step copy (a failed copy: tried again after `retryMs`). */
    async needingSync(retryMs: number): Promise<number[]> {
      const templates = await db.databaseTemplate.findMany({
        where: { root_server_id: { not: null }, template_oid: { not: null }, update_safety_copy: null },
        include: { postgresql_server: true, root_server: true, copies: true },
      });
      const due: number[] = [];
      for (const t of templates) {
        const hosts = await poolHostsOf(ctx, t);
        const inPool = new Set(hosts.map((h) => h.id));
        const stale = t.copies.some((c) => !inPool.has(c.root_server_id));
        const missing = hosts.some((h) => {
          const c = t.copies.find((x) => x.root_server_id === h.id);
          if (!c) return true;
          if (c.state === 'failed') return Date.now() - c.updated_at.getTime() >= retryMs;
          // A copy still `copying` long after any copy would have ended was left by a run Redis lost.
          if (c.state === 'copying') return Date.now() - c.updated_at.getTime() >= COPY_TIMEOUT_MS;
          return !copyInStep(c, t.content_version);
        });
        if (stale || missing) due.push(t.id);
      }
      return due;
    },
  };
}

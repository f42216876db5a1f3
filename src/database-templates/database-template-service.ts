// Database templates: the rules of their records. Customer databases are found on their template's
// server and their files on its Odoo host, so neither can change under them; a template never names
// PostgreSQL's own databases, the service's own or the standby pool's (the deployment checks the
// database itself again before copying it).
import type { AppContext } from '../context.js';
import { runLoggedStep } from '../core/action-log.js';
import type { DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import {
  assertOdooDatabase,
  assertTemplateDatabase,
  assertTemplateIdentity,
  recordTemplateIdentity,
  filestorePath,
  insideTenant,
  onServer,
  serverWhere,
  STANDBY_PREFIX,
  tenantRoleOf,
} from '../instances/index.js';
import { ownDatabase, SYSTEM_DATABASES } from '../postgresql/index.js';
import { shellQuote } from '../core/ssh.js';
import { basePathOf, openRemoteSession, requireConfirmed } from '../servers/index.js';
import type { RootServer } from '../generated/prisma/client.js';
import { databaseTemplateModel } from './database-template-models.js';

type Data = Record<string, unknown>;

const invalid = (field: string, message: string, why: string) => new ValidationError(`${field}: ${why}`, [{ field, message }]);

/** The template's database name as it will be (the update's or the record's), with the root server it will have. */
async function assertTemplateName(own: Promise<{ name: string }>, next: Data) {
  const name = String(next.template_db_name);
  if (SYSTEM_DATABASES.includes(name) || name === (await own).name) {
    throw invalid('template_db_name', "PostgreSQL's own or the service's own database", `${name} is never a template`);
  }
  if (name.startsWith(STANDBY_PREFIX))
    throw invalid('template_db_name', 'a standby database', `${STANDBY_PREFIX}… names are the standby pool's`);
  if (next.root_server_id !== null && next.root_server_id !== undefined) {
    try {
      filestorePath('', name);
    } catch {
      throw invalid('template_db_name', 'not a directory name', `${name} cannot name a filestore directory (letters, digits, _ . - only)`);
    }
  }
}

/** Subscription databases (and standbys) made from the template: where they are may not change under them. */
async function boundDatabases(tx: Pick<DbTx, 'subscription' | 'standbyDatabase'>, templateId: number) {
  const [subscriptions, standbys] = await Promise.all([
    tx.subscription.count({
      where: { database_template_id: templateId, OR: [{ database_created_at: { not: null } }, { state: 'deploying' }] },
    }),
    tx.standbyDatabase.count({ where: { database_template_id: templateId } }),
  ]);
  return { subscriptions, standbys };
}

export function createDatabaseTemplateService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>) {
  /** Whether the template's filestore directory exists on its Odoo host. */
  async function filestoreOf(host: RootServer, database: string, userId: number | null): Promise<'present' | 'absent'> {
    requireConfirmed(host);
    const session = await openRemoteSession(ctx, host, { user_id: userId });
    try {
      const dir = shellQuote(filestorePath(basePathOf(ctx.config, host), database));
      const res = await session.run(`if [ -d ${dir} ]; then echo present; else echo absent; fi`);
      return res.stdout.trim() === 'present' ? 'present' : 'absent';
    } finally {
      session.close();
    }
  }

  const own = () => ownDatabase(ctx.db);
  const records = createRecordService(ctx, databaseTemplateModel, {
    async prepareUpdate(tx, before, data) {
      await assertTemplateName(own(), { ...before, ...data });
      // Another database (by name or server) is another template: its identity is recorded anew at its first check or use.
      const renamed = (['postgresql_server_id', 'template_db_name'] as const).some((f) => f in data && data[f] !== before[f]);
      const next = renamed ? { ...data, template_system_identifier: null, template_oid: null } : undefined;
      const moves = (['postgresql_server_id', 'root_server_id'] as const).filter((f) => f in data && data[f] !== before[f]);
      if (moves.length === 0) return next;
      const { subscriptions } = await boundDatabases(tx, before.id);
      if (subscriptions > 0) {
        throw new ConflictError(
          `${subscriptions} subscription database(s) made from this template live on its servers: ${moves.join(' and ')} cannot change`,
          { fields: moves.map((field) => ({ field, message: 'subscription databases live on the current server' })) },
        );
      }
      return next;
    },
  });

  return {
    ...records,
    async create(data: Data, author: Parameters<typeof records.create>[1] = null) {
      await assertTemplateName(own(), data);
      return records.create(data, author);
    },
    /** The template says where its subscriptions' databases are, and auto-run packages deploy from it: it stays while any exists. */
    async remove(id: number, precondition?: Precondition) {
      const { subscriptions } = await boundDatabases(ctx.db, id);
      if (subscriptions > 0) {
        throw new ConflictError(`${subscriptions} subscription database(s) made from this template exist: drop them before deleting it`);
      }
      // Deleting it would leave an auto-run package without a template, which a package write refuses.
      const autoRun = await ctx.db.trialPackage.count({ where: { database_template_id: id, auto_run_subscription: true } });
      if (autoRun > 0) {
        throw new ConflictError(`${autoRun} auto-run trial package(s) deploy from this template: change them before deleting it`);
      }
      return records.remove(id, precondition);
    },

    /**
     * Whether the template can be deployed: its database (Odoo tables and columns), that it is the
     * database recorded as the template (recorded now when none is) and its filestore directory.
     * `accept`: the database now under the name becomes the template (a deliberate replacement).
     */
    async check(id: number, userId: number | null, accept = false) {
      const template = await ctx.db.databaseTemplate.findUnique({ where: { id }, include: { postgresql_server: true, root_server: true } });
      if (!template) throw new NotFoundError('Database template');
      const server = template.postgresql_server;
      const name = template.template_db_name;
      const where = serverWhere(server);
      const entry = { model_name: 'svc.database.template' as const, rec_id: id, action_type: 'database' as const, user_id: userId };
      return runLoggedStep(
        ctx.db,
        { ...entry, input_text: `${accept ? 'accept database of' : 'check'} template ${name} on ${where}` },
        async () => {
          const { size, found } = await onServer(ctx.secretBox, server, async (query) => {
            const found = await assertTemplateDatabase(ctx.db, query, name, where);
            if (!accept) await assertTemplateIdentity(ctx.db, template, found, where);
            const { rows } = await query('SELECT pg_database_size($1)::text AS size', [name]);
            return { size: Number(rows[0]!.size), found };
          });
          await insideTenant(ctx.secretBox, server, name, (query) => assertOdooDatabase(query, `Template ${name} on ${where}`), {
            role: tenantRoleOf(template),
            deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
            what: `Template ${name} on ${where}`,
            identity: found,
          });
          const filestore = template.root_server ? await filestoreOf(template.root_server, name, userId) : ('no_root_server' as const);
          // Only once the database passed every check: accepted as the template from now on.
          if (accept) await recordTemplateIdentity(ctx.db, id, found, 'accept_database');
          return {
            ok: true as const,
            template_db_name: name,
            size_bytes: size,
            filestore,
            system_identifier: found.systemIdentifier,
            oid: Number(found.oid),
          };
        },
        (report) => JSON.stringify(report),
      );
    },
  };
}

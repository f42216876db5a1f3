// Database templates built by the Odoo of their host: `build` makes template_db_name with
// `odoo-bin -i <modules> --stop-after-init` as the host's role and with the host's configuration,
// so the database is owned by that role (the only databases Odoo serves) and its filestore is where
// svc copies filestores from; the template then names that role as the owner of its copies. `build`
// never overwrites a database; a module that does not exist or fails to install fails the job with
// Odoo's words, and the half-built database and its filestore are removed. `update` runs `-u all`
// after a safety copy of the template (odoo-template-safety.ts): a failed update is undone.
// Every template gets svc's own addon (odoo-addons/svc_instance, on the host's addons path since
// setup_odoo): `build` installs it with the modules asked for, `update` installs it in a template
// built before it existed. So every instance copied from a template enforces its package itself.
// `build` records the template database's identity (every copy and `update` then refuses another
// database renamed into its name) and gives its administrator a random password, kept encrypted on
// the template and never shown: Odoo's own admin/admin would let anything that reaches the host's
// Odoo sign in to the template, and so into every later customer. `update` sets it again (a template
// built before gets one then).
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { JobPayload } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import {
  assertTemplateDatabase,
  assertTemplateIdentity,
  databaseOwner,
  filestorePath,
  insideTenant,
  newPassword,
  onServer,
  recordTemplateIdentity,
  setCustomerPassword,
  SVC_ADDON,
  serverWhere,
} from '../instances/index.js';
import { quoteIdent } from '../postgresql/index.js';
import { basePathOf, openRemoteSession, requireConfirmed } from '../servers/index.js';
import type { odooJobs } from './odoo-job-specs.js';
import { odooLayout } from './odoo-layout.js';
import { buildModules, listHostModules, notOnHost, packageModulesOf } from './odoo-modules.js';
import { asOdoo, odooBin } from './odoo-once.js';
import { describeSource, removeFilestore } from './odoo-scripts.js';
import { makeFirstPageAssets } from './odoo-template-assets.js';
import { createTemplateSafety, type TemplatePlace } from './odoo-template-safety.js';
import { seriesOf } from './odoo-setup-steps.js';

const BUILD_TIMEOUT_MS = 60 * 60_000;
const STEP_TIMEOUT_MS = 2 * 60_000;

type Payload = JobPayload<typeof odooJobs.odoo_build_template>;

/** The template, its PostgreSQL server and its host, which must run Odoo with its role on that server. */
async function loadBuildable(ctx: Pick<AppContext, 'db'>, id: number) {
  const template = await ctx.db.databaseTemplate.findUnique({ where: { id }, include: { postgresql_server: true, root_server: true } });
  if (!template) throw new NotFoundError('Database template');
  const host = template.root_server;
  if (!host) throw new ConflictError(`Database template ${id} names no root server: set root_server_id to a host that runs Odoo`);
  requireConfirmed(host);
  if (host.odoo_state !== 'running' || host.odoo_http_port === null || host.odoo_version_id === null || !host.odoo_db_user) {
    throw new ConflictError(`Root server ${host.id} does not run Odoo (odoo_state ${host.odoo_state}): run setup_odoo on it first`);
  }
  if (host.odoo_postgresql_server_id !== template.postgresql_server_id) {
    throw new ConflictError(
      `Root server ${host.id} runs Odoo on PostgreSQL server ${host.odoo_postgresql_server_id}, not on the template's (${template.postgresql_server_id})`,
    );
  }
  const version = await ctx.db.odooVersion.findUniqueOrThrow({ where: { id: host.odoo_version_id } });
  return { template, host: { ...host, odoo_http_port: host.odoo_http_port, odoo_db_user: host.odoo_db_user }, version };
}

export function createTemplateBuilder(ctx: AppContext) {
  const safety = createTemplateSafety(ctx);
  /** The owner of the template's database (null: there is none); `update` acts only on one a template may name. */
  async function databaseExists(template: Awaited<ReturnType<typeof loadBuildable>>['template'], kind: 'build' | 'update') {
    return onServer(ctx.secretBox, template.postgresql_server, async (query) => {
      const owner = await databaseOwner(query, template.template_db_name);
      // Never a customer's database (the host's role owns every copy on its host) nor the service's own,
      // and only the database recorded as the template (recorded now when none is).
      if (kind === 'update' && owner !== null) {
        const where = serverWhere(template.postgresql_server);
        await assertTemplateIdentity(
          ctx.db,
          template,
          await assertTemplateDatabase(ctx.db, query, template.template_db_name, where),
          where,
        );
      }
      return owner;
    });
  }

  async function run(kind: 'build' | 'update', payload: Payload & { modules?: string[] | undefined }, job: Job) {
    const loaded = await loadBuildable(ctx, payload.database_template_id);
    const { host, version } = loaded;
    const l = odooLayout(basePathOf(ctx.config, host), host.odoo_http_port);
    const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) };
    const place = { pg: loaded.template.postgresql_server, host, layout: l, audit };
    if (kind === 'update' && loaded.template.update_safety_copy) {
      // An update cut short (its worker died): the template is put back from its safety copy first.
      await safety.putBack(place, loaded.template.id);
    }
    const template = kind === 'update' ? (await loadBuildable(ctx, payload.database_template_id)).template : loaded.template;
    const db = template.template_db_name;
    const where = serverWhere(template.postgresql_server);
    const owner = await databaseExists(template, kind);
    if (kind === 'build' && owner !== null)
      throw new UserError(`Database ${db} already exists on ${where}: build never overwrites a database`);
    if (kind === 'update' && owner === null) throw new UserError(`Database ${db} does not exist on ${where}: build it first`);
    if (kind === 'update' && owner !== host.odoo_db_user) {
      throw new UserError(
        `Database ${db} is owned by ${owner}, not by the host's role ${host.odoo_db_user}: the host's Odoo cannot update it`,
      );
    }

    const source = l.sourceOf(version.name);
    const filestore = filestorePath(l.base, db);
    let copy: string | null = null;
    const session = await openRemoteSession(ctx, host, audit);
    try {
      // Packages are apps (odoo-modules.ts): a build installs what was asked, its packages' modules and
      // svc's; an update keeps what is installed and adds what was asked and its packages' modules.
      const modules =
        kind === 'build'
          ? await buildModules(ctx.db, template.id, payload.modules)
          : [...new Set([SVC_ADDON, ...(payload.modules ?? []), ...(await packageModulesOf(ctx.db, template.id))])];
      const absent = notOnHost(await listHostModules(ctx, session, host.id, l), modules);
      if (absent.length > 0) {
        throw new UserError(
          `${kind === 'build' ? 'Building' : 'Updating'} ${db} with Odoo ${version.name} refused: module ${absent.join(', ')} is not on the addons path of root server ${host.id}`,
        );
      }
      if (kind === 'update') {
        await job.updateProgress({ step: 'safety_copy', percent: 5 });
        copy = await safety.make(place, template);
      }
      await job.updateProgress({ step: kind === 'build' ? 'installing' : 'updating', percent: 10 });
      const series = seriesOf((await session.run(describeSource(source), { timeoutMs: STEP_TIMEOUT_MS })).stdout);
      const args =
        kind === 'build'
          ? ['-i', modules.join(','), series >= 19 ? '--without-demo' : '--without-demo=all']
          : // -i installs what is missing (svc's addon in a template built before it, new modules); -u all updates the rest.
            ['-i', modules.join(','), '-u', 'all'];
      const res = await session.run(asOdoo(l, { source, database: db, kind: 'build' }, odooBin(l, db, args)), {
        timeoutMs: BUILD_TIMEOUT_MS,
      });
      const said = session.mask(res.stdout.trim()).slice(-4000);

      let missing: string[] = [];
      let installedModules: string[] = [];
      let passwordFailed: string | null = null;
      /** Why the installed modules could not be read (then every module counts as missing). */
      let unread = '';
      // The administrator's password: the template's own, else a new one (a build, or a template built before).
      const adminPassword = (await ctx.secretBox.reveal(template.admin_password)) ?? newPassword();
      // Worked in as the host's role, which owns the database: the service's own role stays out of it.
      const role = { role: host.odoo_db_user, password: host.odoo_db_password };
      const tenantOpts = { role, what: `Template ${db} on ${where}`, deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000 };
      if (res.exitCode === 0) {
        missing = await insideTenant(
          ctx.secretBox,
          template.postgresql_server,
          db,
          async (query) => {
            const { rows } = await query("SELECT name FROM public.ir_module_module WHERE state = 'installed' ORDER BY name");
            installedModules = rows.map((r) => String(r.name));
            return modules.filter((m) => !installedModules.includes(m));
          },
          tenantOpts,
        ).catch((err: Error) => {
          unread = ` (the installed modules could not be read: ${err.message})`;
          return modules;
        });
      }
      if (res.exitCode === 0 && missing.length === 0) {
        await job.updateProgress({ step: 'administrator', percent: 85 });
        passwordFailed = await insideTenant(
          ctx.secretBox,
          template.postgresql_server,
          db,
          (query) => setCustomerPassword(query, adminPassword),
          tenantOpts,
        )
          .then(() => null)
          .catch((err: Error) => err.message);
      }
      // The first pages' asset bundles, so that no copy makes them again (odoo-template-assets.ts).
      let assetsFailed: string | null = null;
      if (res.exitCode === 0 && missing.length === 0 && passwordFailed === null) {
        await job.updateProgress({ step: 'assets', percent: 88 });
        assetsFailed = await makeFirstPageAssets(session, l, source, db).then(
          () => null,
          (err: Error) => err.message,
        );
      }
      if (res.exitCode !== 0 || missing.length > 0 || passwordFailed !== null || assetsFailed !== null) {
        /** What could not be removed, told with the failure (never instead of it). */
        const left: string[] = [];
        if (kind === 'build') {
          // Nothing half-built stays: the database (only the one this job made) and its files.
          await onServer(ctx.secretBox, template.postgresql_server, (query) =>
            query(`DROP DATABASE IF EXISTS ${quoteIdent(db)} WITH (FORCE)`),
          ).catch((err: Error) => left.push(`dropping ${db} failed: ${err.message}`));
          await session
            .check(removeFilestore(filestore), `removing ${filestore} failed`, { timeoutMs: STEP_TIMEOUT_MS })
            .catch((err: Error) => left.push(err.message));
        }
        const what =
          passwordFailed !== null
            ? `the administrator's password could not be set: ${passwordFailed}`
            : missing.length > 0
              ? `module(s) ${missing.join(', ')} not installed${unread}`
              : (assetsFailed ?? `odoo-bin exited with ${res.exitCode ?? res.signal}`);
        const cleanup = left.length > 0 ? `\nWhat it made could not all be removed: ${left.join('; ')}` : '';
        throw new UserError(
          `${kind === 'build' ? 'Building' : 'Updating'} ${db} with Odoo ${version.name} failed (${what}): ${said}${cleanup}`,
        );
      }

      await job.updateProgress({ step: 'owner', percent: 90 });
      const after = await onServer(ctx.secretBox, template.postgresql_server, async (query) => {
        const { rows } = await query(
          'SELECT pg_get_userbyid(datdba) AS owner, pg_database_size(datname)::text AS size FROM pg_database WHERE datname = $1',
          [db],
        );
        const found = kind === 'build' ? await assertTemplateDatabase(ctx.db, query, db, where) : null;
        return { owner: String(rows[0]?.owner), size: Number(rows[0]?.size ?? 0), found };
      });
      if (after.owner !== host.odoo_db_user)
        throw new UserError(`Database ${db} is owned by ${after.owner}, not by the host's role ${host.odoo_db_user}`);
      const sealedPassword = template.admin_password ?? (await ctx.secretBox.encrypt(adminPassword));
      if (kind === 'build') {
        // Its copies are owned by the host's role, and the service signs in to them as that role.
        await ctx.db.databaseTemplate.update({
          where: { id: template.id },
          data: {
            owner_role: host.odoo_db_user,
            owner_password: host.odoo_db_password,
            admin_password: sealedPassword,
            modules: installedModules,
          },
        });
        await recordTemplateIdentity(ctx.db, template.id, after.found!, 'build');
      } else {
        await ctx.db.databaseTemplate.update({
          where: { id: template.id },
          data: { admin_password: sealedPassword, modules: installedModules },
        });
      }
      if (copy) {
        await job.updateProgress({ step: 'safety_copy_dropped', percent: 95 });
        const left = copy;
        copy = null; // updated: nothing is put back from here on
        await safety.drop(place, template.id).catch((err: Error) => {
          throw new UserError(`${db} was updated, but its safety copy ${left} could not be removed: ${err.message}`);
        });
      }
      await job.updateProgress({ step: 'done', percent: 100 });
      return {
        template_db_name: db,
        ...(kind === 'build' ? { modules } : { updated: 'all', installed: modules }),
        installed_modules: installedModules,
        odoo_version: version.name,
        owner: after.owner,
        size_bytes: after.size,
        filestore,
      };
    } catch (err) {
      if (!copy) throw err;
      throw await putBackAfter(place, template.id, copy, err as Error);
    } finally {
      session.close();
    }
  }

  /** A failed update: the template put back from its copy; the error says so (or why it could not be). */
  async function putBackAfter(place: TemplatePlace, templateId: number, copy: string, err: Error): Promise<Error> {
    try {
      const oid = await safety.putBack(place, templateId);
      return new UserError(
        `The template was put back as it was before the update (database and filestore, from its safety copy; oid ${oid} now). ${err.message}`,
      );
    } catch (again) {
      return new UserError(
        `${err.message}\nPutting the template back from its safety copy ${copy} failed too: ${(again as Error).message}. The copy is kept: the next update puts the template back from it first.`,
      );
    }
  }

  return {
    /** The checks of the route (409/404 before a job is queued). */
    async assertBuildable(id: number, kind: 'build' | 'update') {
      const { template } = await loadBuildable(ctx, id);
      // An update cut short: its job puts the template back from the safety copy first.
      if (kind === 'update' && template.update_safety_copy) return;
      const exists = (await databaseExists(template, kind)) !== null;
      if (kind === 'build' && exists) {
        throw new ConflictError(`Database ${template.template_db_name} already exists: build never overwrites a database`);
      }
      if (kind === 'update' && !exists) throw new ConflictError(`Database ${template.template_db_name} does not exist: build it first`);
    },
    build: (payload: Payload & { modules?: string[] | undefined }, job: Job) => run('build', payload, job),
    update: (payload: Payload & { modules?: string[] | undefined }, job: Job) => run('update', payload, job),
  };
}

// A template's `update` is undone when it fails, as a tenant's in a rollout, with the same safety
// copy (instances' safety-copy.ts): the template database and its filestore copied first, the copy
// recorded on the template (an update cut short by a crash is put back by the next one); on success
// the copy is dropped, on failure the template is put back from it. The database put back is the
// copy, so the template's identity (template-identity.ts) becomes the copy's oid, recorded before the
// copy takes the template's name: the name never holds a database the template does not know. That
// is a new version of the template (updated_at): standbys copied while the update ran are made again.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { DatabaseTemplate, PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import {
  copyFilestore,
  dropSafetyCopy,
  makeSafetyCopy,
  type OdooDataDir,
  recordTemplateIdentity,
  removeFilestoreCopy,
  restoreFilestore,
  restoreSafetyCopy,
  runOnOdooHost,
  safetyCopyName,
} from '../instances/index.js';
import type { Audit } from '../servers/index.js';

const STEP_TIMEOUT_MS = 30 * 60_000;

/** Where the template lives: its PostgreSQL server, its Odoo host and that host's data directory. */
export interface TemplatePlace {
  pg: PostgresqlServer;
  host: RootServer;
  layout: OdooDataDir;
  audit: Audit;
}

export function createTemplateSafety(ctx: AppContext) {
  const db = ctx.db;
  // Not through Prisma's update: updated_at is the template's version, which standbys follow.
  const record = (id: number, copy: string | null, oid: bigint | null) =>
    db.$executeRaw`UPDATE database_templates SET update_safety_copy = ${copy}, update_safety_copy_oid = ${oid} WHERE id = ${id}`;

  const safety = {
    /** The safety copy (database, then filestore), recorded before it is made; answers its name. */
    async make(place: TemplatePlace, template: Pick<DatabaseTemplate, 'id' | 'template_db_name' | 'template_oid'>): Promise<string> {
      const copy = safetyCopyName(template.template_oid ?? `t${template.id}`);
      await record(template.id, copy, null);
      try {
        const oid = await makeSafetyCopy(ctx.secretBox, place.pg, template.template_db_name, copy);
        await record(template.id, copy, oid);
        await runOnOdooHost(ctx, place.host, place.audit, copyFilestore(place.layout, template.template_db_name, copy), STEP_TIMEOUT_MS);
        return copy;
      } catch (err) {
        // Not enough disk, say: the template is not updated, and nothing of the copy stays.
        const left = await safety.drop(place, template.id).then(
          () => '',
          (e: Error) => `; what was made of the copy could not be removed: ${e.message}`,
        );
        throw new UserError(
          `The safety copy of ${template.template_db_name} could not be made, so it was not updated: ${(err as Error).message}${left}`,
        );
      }
    },

    /** The update succeeded (or never ran): the record goes first (a crash now must not put the template back), then the copy. */
    async drop(place: TemplatePlace, templateId: number): Promise<void> {
      const t = await db.databaseTemplate.findUniqueOrThrow({ where: { id: templateId } });
      if (!t.update_safety_copy) return;
      await record(t.id, null, null);
      await dropSafetyCopy(ctx.secretBox, place.pg, t.update_safety_copy);
      await runOnOdooHost(ctx, place.host, place.audit, removeFilestoreCopy(place.layout, t.update_safety_copy), STEP_TIMEOUT_MS);
    },

    /**
     * Puts the template back from its recorded copy (database and filestore) and answers the oid it
     * is known by now; null when there was no complete copy (the update never ran). Idempotent.
     */
    async putBack(place: TemplatePlace, templateId: number): Promise<bigint | null> {
      const t = await db.databaseTemplate.findUniqueOrThrow({ where: { id: templateId } });
      const copy = t.update_safety_copy;
      const copyOid = t.update_safety_copy_oid;
      if (!copy) return null;
      if (copyOid === null) {
        await safety.drop(place, t.id);
        return null;
      }
      const follow = async () => {
        const now = await db.databaseTemplate.findUniqueOrThrow({ where: { id: t.id } });
        if (now.template_oid === copyOid || now.template_system_identifier === null) return;
        const identity = { systemIdentifier: now.template_system_identifier, oid: copyOid };
        await recordTemplateIdentity(db, t.id, identity, 'put back from its safety copy after a failed update');
      };
      await restoreSafetyCopy(ctx.secretBox, place.pg, {
        database: t.template_db_name,
        copy,
        copyOid,
        databaseOid: t.template_oid,
        whose: "the template's",
        beforeRename: follow,
      });
      await follow(); // put back already by an earlier run
      await runOnOdooHost(ctx, place.host, place.audit, restoreFilestore(place.layout, t.template_db_name, copy), STEP_TIMEOUT_MS);
      await record(t.id, null, null);
      return copyOid;
    },
  };
  return safety;
}

// A template is the database svc accepted, not whatever database has its name now. Before tenants
// had roles of their own, a tenant could copy another tenant's database, rename the template aside
// and its copy into the template's name: the next customer got the attacker's administrator. So the
// template's identity (its cluster's system identifier and its oid, which a rename keeps) is
// recorded when `build` or `check` accepts it, and every copy (deployment, standby refill) and
// `update` refuses a database under the template's name that is another one, with an alert on the
// template. A template without a recorded identity (made before this check existed) gets the
// identity of the database the first check, build, update or copy finds acceptable; `accept_database`
// records a deliberately replaced one.
import { postMessage, postMessageOnce } from '../core/chatter.js';
import type { Db } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { type DatabaseIdentity, sameDatabase } from '../postgresql/index.js';

/** What a template record says of its database. */
export interface TemplateIdentityRecord {
  id: number;
  template_db_name: string;
  template_system_identifier: string | null;
  template_oid: bigint | null;
}

/** The database under the template's name is not the template svc accepted. */
export class TemplateSwapped extends UserError {}

const onTemplate = (id: number) => ({ model_name: 'svc.database.template' as const, rec_id: id });

/** The identity recorded on the template, or null (none yet). */
export const recordedIdentity = (t: TemplateIdentityRecord): DatabaseIdentity | null =>
  t.template_system_identifier !== null && t.template_oid !== null
    ? { systemIdentifier: t.template_system_identifier, oid: t.template_oid }
    : null;

/**
 * Records `found` as the template's database (the operator accepted it: build, accept_database); a new
 * version of the template (updated_at), so standbys copied from another database are made again.
 */
export async function recordTemplateIdentity(db: Db, templateId: number, found: DatabaseIdentity, why: string): Promise<void> {
  await db.databaseTemplate.update({
    where: { id: templateId },
    // Another database: its copies on the pool's other hosts are out of step (template-hosts.ts).
    data: { template_system_identifier: found.systemIdentifier, template_oid: found.oid, content_version: { increment: 1 } },
  });
  await postMessage(db, {
    ...onTemplate(templateId),
    body: `Template database identity recorded (${why}): cluster ${found.systemIdentifier}, oid ${found.oid}`,
    message_type: 'notification',
  });
}

/**
 * Refuses `found` (the database now under the template's name) unless it is the template's
 * recorded database; records it when the template has none yet. A refusal posts an alert on the
 * template (once while it lasts) and changes nothing else.
 */
export async function assertTemplateIdentity(db: Db, template: TemplateIdentityRecord, found: DatabaseIdentity, where: string) {
  const recorded = recordedIdentity(template);
  if (recorded === null) {
    // Only while none is recorded: two first uses at once record one identity, and the other compares with it.
    // updated_at stays: it is the template's version, and the standbys made from it are not stale.
    const count = await db.$executeRaw`
      UPDATE database_templates SET template_system_identifier = ${found.systemIdentifier}, template_oid = ${found.oid}
       WHERE id = ${template.id} AND template_system_identifier IS NULL AND template_oid IS NULL`;
    if (count === 1) {
      await postMessage(db, {
        ...onTemplate(template.id),
        body: `Template database identity recorded on first use: ${template.template_db_name} on ${where} is cluster ${found.systemIdentifier}, oid ${found.oid}`,
        message_type: 'notification',
      });
      return;
    }
    const now = await db.databaseTemplate.findUniqueOrThrow({ where: { id: template.id } });
    return assertTemplateIdentity(db, now, found, where);
  }
  if (sameDatabase(recorded, found)) return;
  const message =
    `Template database ${template.template_db_name} on ${where} is not the database this template was built or checked as ` +
    `(oid ${found.oid}, cluster ${found.systemIdentifier}; recorded: oid ${recorded.oid}, cluster ${recorded.systemIdentifier}): ` +
    'it was replaced or renamed in, and nothing is copied from it. Find out who renamed it; when the replacement is deliberate, ' +
    'run accept_database on the template';
  await postMessageOnce(db, { ...onTemplate(template.id), body: message, message_type: 'notification', subtype_xmlid: 'mail.mt_alert' });
  throw new TemplateSwapped(message);
}

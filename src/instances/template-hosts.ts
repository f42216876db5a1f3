// Where a template can be deployed from: the hosts of its pool holding a ready copy of it that is in
// step with the template (issue 49, DESIGN §22). The seam between placement (src/placement, which
// picks one of these hosts) and the pools' template copies (src/pools, which make and keep them).
// A template lives where it was built (its own root server and PostgreSQL server) and in a copy on
// every other host of its pool (database_template_copies). A copy counts only while it is ready and
// in step: made from the template's current contents (content_version, which build, a successful
// update and an accepted replacement advance). A copy of an older version (an update not carried
// there yet, or that failed there) is not used until it is made again.
import type { Db, DbTx } from '../core/db.js';
import type { DatabaseTemplate, DatabaseTemplateCopy, PostgresqlServer, RootServer } from '../generated/prisma/client.js';

type TemplateRow = DatabaseTemplate & { postgresql_server: PostgresqlServer; root_server: RootServer | null };

export interface TemplateHost {
  /** The Odoo host holding the copy (its filestore); null for a template without an Odoo host. */
  root_server_id: number | null;
  /** The PostgreSQL server holding the copy's database. */
  postgresql_server_id: number;
  /** The copy's database name on that server (the template's own on the host it was built on). */
  template_db_name: string;
  /** The template copy's record, or null for the template itself. */
  copy_id: number | null;
  /**
   * The template as seen on that host: its servers, database name, identity and owner replaced by the
   * copy's, so what copies a template (copyTemplate and its identity check, the filestore copy, the
   * tenant-role hand-over, the standby pool) works on it unchanged.
   */
  template: TemplateRow;
}

/** Whether a copy may be used: ready, made from the template's current contents, its identity known. */
export const copyInStep = (
  copy: Pick<DatabaseTemplateCopy, 'state' | 'content_version' | 'oid' | 'system_identifier'>,
  contentVersion: number,
) => copy.state === 'ready' && copy.content_version === contentVersion && copy.oid !== null && copy.system_identifier !== null;

/** The template with the copy's host, server, database, identity and owner (that host's role) in place of its own. */
export function templateOn(
  template: TemplateRow,
  copy: DatabaseTemplateCopy & { root_server: RootServer; postgresql_server: PostgresqlServer },
): TemplateRow {
  return {
    ...template,
    postgresql_server_id: copy.postgresql_server_id,
    postgresql_server: copy.postgresql_server,
    root_server_id: copy.root_server_id,
    root_server: copy.root_server,
    template_db_name: copy.database_name,
    template_system_identifier: copy.system_identifier,
    template_oid: copy.oid,
    owner_role: copy.owner_role ?? copy.root_server.odoo_db_user,
    owner_password: copy.root_server.odoo_db_password,
  };
}

/**
 * What readyTemplateHosts' answer is made of, in one short string: the row version (xmin) of the
 * template, its servers, each copy and each copy's servers. Any write to any of those rows (Prisma's
 * or raw SQL, a copy made, failed or removed, a host's credentials or a server changed) gives
 * another stamp; reading it is one round trip, where reading the rows is several and 200 objects.
 */
async function stampOf(db: Db | DbTx, templateId: number): Promise<string | null> {
  const [row] = await db.$queryRaw<{ stamp: string }[]>`
    SELECT concat_ws('/', t.xmin, p.xmin, r.xmin,
             (SELECT string_agg(concat_ws(':', c.id, c.xmin, cr.xmin, cp.xmin), ',' ORDER BY c.id)
                FROM database_template_copies c
                JOIN root_servers cr ON cr.id = c.root_server_id
                JOIN postgresql_servers cp ON cp.id = c.postgresql_server_id
               WHERE c.database_template_id = t.id)) AS stamp
      FROM database_templates t
      JOIN postgresql_servers p ON p.id = t.postgresql_server_id
      LEFT JOIN root_servers r ON r.id = t.root_server_id
     WHERE t.id = ${templateId}`;
  return row?.stamp ?? null;
}

/** Each template's answer with the stamp it was read under, per process (a placement asks for it every time). */
const known = new Map<number, { stamp: string; hosts: readonly TemplateHost[] }>();
const KNOWN_MAX = 500;

/**
 * The hosts with a ready, in-step copy of the template, the template's own first; [] for an
 * unknown template. Nothing here looks at the hosts' health or room: placement does. Kept per
 * template and used again while its stamp (stampOf) is unchanged; the objects are frozen, as they
 * are shared between callers.
 */
export async function readyTemplateHosts(db: Db | DbTx, templateId: number): Promise<TemplateHost[]> {
  const stamp = await stampOf(db, templateId);
  if (stamp === null) return [];
  const kept = known.get(templateId);
  if (kept?.stamp === stamp) return [...kept.hosts];
  // Read after the stamp: a write in between gives another stamp next time, so this answer is only kept until then.
  const hosts = (await readHosts(db, templateId)).map((h) => Object.freeze({ ...h, template: Object.freeze(h.template) }));
  if (known.size >= KNOWN_MAX) known.clear();
  known.set(templateId, { stamp, hosts });
  return [...hosts];
}

async function readHosts(db: Db | DbTx, templateId: number): Promise<TemplateHost[]> {
  const found = await db.databaseTemplate.findUnique({
    where: { id: templateId },
    include: {
      postgresql_server: true,
      root_server: true,
      copies: { include: { root_server: true, postgresql_server: true }, orderBy: { root_server_id: 'asc' } },
    },
  });
  if (!found) return [];
  const { copies, ...t } = found;
  const hosts: TemplateHost[] = [
    {
      root_server_id: t.root_server_id,
      postgresql_server_id: t.postgresql_server_id,
      template_db_name: t.template_db_name,
      copy_id: null,
      template: t,
    },
  ];
  for (const copy of copies) {
    if (copy.root_server_id === t.root_server_id || !copyInStep(copy, t.content_version)) continue;
    hosts.push({
      root_server_id: copy.root_server_id,
      postgresql_server_id: copy.postgresql_server_id,
      template_db_name: copy.database_name,
      copy_id: copy.id,
      template: templateOn(t, copy),
    });
  }
  return hosts;
}

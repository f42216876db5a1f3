// Where a template can be deployed from: the hosts of its pool holding a ready copy of it that is in
// step with the template (issue 49). The seam between placement (src/placement, which picks one of
// these hosts) and the pools' template copies (which make and keep the copies). Until template
// copies exist, a template is ready only where it was built: its own Odoo host and PostgreSQL server.
import type { Db, DbTx } from '../core/db.js';

export interface TemplateHost {
  /** The Odoo host holding the copy (its filestore); null for a template without an Odoo host. */
  root_server_id: number | null;
  /** The PostgreSQL server holding the copy's database. */
  postgresql_server_id: number;
  /** The copy's database name on that server (the template's own on the host it was built on). */
  template_db_name: string;
  /** The template copy's record, or null for the template itself. */
  copy_id: number | null;
}

/** The hosts with a ready, in-step copy of the template; [] for an unknown template. */
export async function readyTemplateHosts(db: Db | DbTx, templateId: number): Promise<TemplateHost[]> {
  const t = await db.databaseTemplate.findUnique({
    where: { id: templateId },
    select: { root_server_id: true, postgresql_server_id: true, template_db_name: true },
  });
  if (!t) return [];
  return [
    { root_server_id: t.root_server_id, postgresql_server_id: t.postgresql_server_id, template_db_name: t.template_db_name, copy_id: null },
  ];
}

// Where a new standby goes (issue 49): placed like the trials that will take it (src/placement),
// on the least filled healthy host holding a ready copy of its template, so the pool is filled
// where the next trials go. Its row is written under the host's lock: its room is taken at once.
import type { Db } from '../core/db.js';
import type { DatabaseTemplate, PostgresqlServer, RootServer, StandbyDatabase } from '../generated/prisma/client.js';
import { place } from '../placement/index.js';
import { readyTemplateHosts, type TemplateHost } from './template-hosts.js';

export interface StandbySpot {
  row: StandbyDatabase;
  server: PostgresqlServer;
  root: RootServer | null;
  templateHost: TemplateHost;
  /** Why, for the standby's action log. */
  text: string;
}

/** Chooses the standby's host and writes its row (a placeholder name); a NoRoomError when no host fits. */
export async function placeStandby(db: Db, packageId: number, template: DatabaseTemplate, placeholderName: string): Promise<StandbySpot> {
  let row: StandbyDatabase | null = null;
  const decision = await place(db, {
    candidates: await readyTemplateHosts(db, template.id),
    what: `a standby of trial package ${packageId}`,
    reserve: async (tx, c) => {
      row = await tx.standbyDatabase.create({
        data: {
          trial_package_id: packageId,
          database_template_id: template.id,
          // The template as read with the copy it is made from: its record and its contents' version.
          template_version: c.template.updated_at,
          template_content_version: c.template.content_version,
          postgresql_server_id: c.postgresql_server_id,
          root_server_id: c.root_server_id,
          database_name: placeholderName,
        },
      });
    },
  });
  const c = decision.candidate;
  const [server, root] = await Promise.all([
    db.postgresqlServer.findUniqueOrThrow({ where: { id: c.postgresql_server_id } }),
    c.root_server_id === null ? null : db.rootServer.findUniqueOrThrow({ where: { id: c.root_server_id } }),
  ]);
  return { row: row!, server, root, templateHost: c, text: decision.text };
}

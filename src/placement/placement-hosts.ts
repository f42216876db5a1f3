// An operator's view of one host's placement: cordon, uncordon, and its room (capacity, fill, why
// it takes no new tenant). A cordon is told in the host's chatter and kept in the action log.
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { type Author, postMessage } from '../core/chatter.js';
import { NotFoundError } from '../core/errors.js';
import { fillOf, roomOf, unhealthy } from './placement-capacity.js';
import { loadHosts, tenantDiskEstimate } from './placement-load.js';

type Ctx = Pick<AppContext, 'db'>;

export function createPlacementHosts(ctx: Ctx) {
  const { db } = ctx;

  async function room(id: number) {
    const server = await db.rootServer.findUnique({ where: { id }, select: { id: true, odoo_postgresql_server_id: true } });
    if (!server) throw new NotFoundError(`Root server ${id} does not exist`);
    const [h] = await loadHosts(db, [{ root_server_id: id, postgresql_server_id: server.odoo_postgresql_server_id ?? 0 }], new Date());
    const tenantDisk = await tenantDiskEstimate(db, [id]);
    const f = fillOf(h!, tenantDisk);
    return {
      root_server_id: id,
      cordoned_at: h!.cordoned_at?.toISOString() ?? null,
      cordon_reason: h!.cordon_reason,
      tenants: h!.tenants,
      capacity: f.capacity,
      disk_used_bytes: f.disk_used_bytes,
      tenant_disk_bytes: tenantDisk,
      fill: f.fill,
      room: roomOf(h!, tenantDisk),
      left_out: unhealthy(h!) ?? f.full,
    };
  }

  async function setCordon(id: number, cordon: boolean, reason: string | null, author: Author | null, userId: number | null) {
    const before = await db.rootServer.findUnique({ where: { id }, select: { cordoned_at: true } });
    if (!before) throw new NotFoundError(`Root server ${id} does not exist`);
    // Cordoning a cordoned host keeps its first time (a new reason replaces the old).
    const changed = cordon !== (before.cordoned_at !== null);
    await db.$transaction(async (tx) => {
      await tx.rootServer.update({
        where: { id },
        data: cordon
          ? { cordoned_at: before.cordoned_at ?? new Date(), cordon_reason: reason }
          : { cordoned_at: null, cordon_reason: null },
      });
      const text = cordon
        ? `Cordoned: no new tenant is placed here${reason ? ` (${reason})` : ''}; its tenants stay.`
        : 'Uncordoned: new tenants may be placed here again.';
      if (changed || cordon)
        await postMessage(tx, { model_name: 'svc.root.server', rec_id: id, body: text, message_type: 'notification', author });
      await writeActionLog(tx, {
        model_name: 'svc.root.server',
        rec_id: id,
        action_type: 'server_action',
        operation: cordon ? 'cordon' : 'uncordon',
        input_text: `root server ${id}${reason ? `: ${reason}` : ''}`,
        output_text: changed ? text : `unchanged: ${text}`,
        user_id: userId,
      });
    });
    return room(id);
  }

  return {
    room,
    cordon: (id: number, reason: string | null, author: Author | null, userId: number | null) =>
      setCordon(id, true, reason, author, userId),
    uncordon: (id: number, author: Author | null, userId: number | null) => setCordon(id, false, null, author, userId),
  };
}

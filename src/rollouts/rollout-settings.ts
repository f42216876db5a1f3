// The rollout settings (one row): how many tenants of one host are updated at once (1 by default:
// an update takes CPU and locks from the host's Odoo), and their order.
import type { Db } from '../core/db.js';

export async function rolloutSettings(db: Db) {
  return db.rolloutSettings.upsert({ where: { id: 1 }, create: { id: 1 }, update: {} });
}

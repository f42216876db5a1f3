// What the monitoring and alerts tests share: the real sshd of a test file with the pool of the
// pollers its tests create, a sample's figures, monitor-log rows written directly, monitoring
// switched on without a schedule (the test drives the polls itself), and a server's notification
// messages.
import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../src/core/db.js';
import { createSshPool, type SshPool } from '../../src/core/ssh-pool.js';
import type { Metrics } from '../../src/servers/root-server-metrics.js';
import { type Sshd, startSshd } from './sshd.js';

/**
 * The file's real sshd (once started) and the pool of the pollers its tests create, both closed
 * after the file. Call before useTestApp(): the app is torn down first.
 */
export function useMonitoredSshd(): { sshd: Sshd; pool: SshPool } {
  const host = { pool: createSshPool() } as { sshd: Sshd; pool: SshPool };
  beforeAll(async () => {
    host.sshd = await startSshd();
  });
  afterAll(async () => {
    host.pool.close();
    await host.sshd?.stop();
  });
  return host;
}

/** A sample's figures: an idle server with half its RAM and disk used, `over` changed. */
export const sampleMetrics = (over: Partial<Metrics> = {}): Metrics => ({
  ...{ cpu_percent: 10, ram_used_bytes: 1024, ram_total_bytes: 2048, ram_percent: 50 },
  ...{ disk_used_bytes: 1024, disk_total_bytes: 2048, disk_percent: 50 },
  ...{ net_rx_bytes_per_s: 0, net_tx_bytes_per_s: 0, load_1: 0, load_5: 0, load_15: 0 },
  ...over,
});

/** A monitor-log row of the server at `at`, with sampleMetrics(over). */
export function insertMonitorLog(db: Db, serverId: number, at: Date, over: Partial<Metrics> = {}) {
  return db.monitorLog.create({ data: { root_server_id: serverId, created_at: at, ...sampleMetrics(over) } });
}

/** Monitoring on, without a schedule (the test drives the polls), from `online`. */
export function monitorByHand(db: Db, ids: number[]) {
  return db.rootServer.updateMany({ where: { id: { in: ids } }, data: { monitoring_enabled: true, server_state: 'online' } });
}

/** Monitoring off again, without the stop's side effects (the test drove the polls). */
export function unmonitor(db: Db, ids: number[]) {
  return db.rootServer.updateMany({ where: { id: { in: ids } }, data: { monitoring_enabled: false } });
}

/** The bodies of the server's notification messages (state changes, alerts), oldest first. */
export async function notificationsOf(db: Db, serverId: number): Promise<string[]> {
  const messages = await db.message.findMany({
    where: { model_name: 'svc.root.server', rec_id: serverId, message_type: 'notification' },
    orderBy: { id: 'asc' },
  });
  return messages.map((m) => m.body);
}

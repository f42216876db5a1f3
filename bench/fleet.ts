// A simulated fleet for the monitoring benches: n confirmed root servers, all pointing at one
// local sshd (test harness) with its key login, monitored every 5 s.
import type { AppContext } from '../src/context.js';
import { TEST_USERS, type Sshd } from '../test/helpers/sshd.js';

export async function createServers(
  ctx: AppContext,
  sshd: Sshd,
  n: number,
  extra: { server_state?: 'online'; monitor_update_interval?: string } = {},
): Promise<number[]> {
  const key = await ctx.box.encrypt(sshd.keys.ed25519Openssh);
  const rows = Array.from({ length: n }, (_, i) => ({
    name: `bench-${i}`,
    ip: sshd.host,
    port: sshd.port,
    username: TEST_USERS.key.name,
    key,
    state: 'confirmed' as const,
    host_key: sshd.hostKey,
    monitoring_enabled: true,
    monitor_update_interval: '5s',
    ...extra,
  }));
  return (await ctx.db.rootServer.createManyAndReturn({ data: rows, select: { id: true } })).map((r) => r.id);
}

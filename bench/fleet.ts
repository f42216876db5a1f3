// A simulated fleet for the monitoring benches: n confirmed root servers, all pointing at one
// local sshd (test harness) with its key login, monitored every 5 s.
import { readFileSync } from 'node:fs';
import type { AppContext } from '../src/context.js';
import { TEST_USERS, type Sshd } from '../test/helpers/sshd.js';

export async function createServers(
  ctx: AppContext,
  sshd: Sshd,
  n: number,
  extra: { server_state?: 'online'; monitor_update_interval?: string } = {},
): Promise<number[]> {
  const key = await ctx.secretBox.encrypt(sshd.keys.ed25519Openssh);
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

/** CPU seconds the whole machine was busy so far (/proc/stat): the service and the fleet together. */
export function machineCpu(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3]! + f[4]!;
  return (f.slice(0, 8).reduce((a, b) => a + b, 0) - idle) / 100;
}

// npm run bench:placement [-- --hosts 200 --tenants 20000 --trials 5000]
// Placement on a simulated fleet in svc's own database (issue 49, DESIGN §22), no Odoo and no SSH:
// one pool of 200 Odoo hosts (half 16 GB, half 24 GB of memory, so capacities of 204 and 307
// tenants at 64 MB each; a monitoring sample each), one template ready on every host (built on the
// first, a ready, in-step copy on each other: database_template_copies), and 20,000 tenants spread
// unevenly (each host filled to its share of the fleet ±25 %, sizes measured by the usage round).
// Then 5,000 trials one after the other, each placed as a deployment places it (readyTemplateHosts,
// then place() with its lock and the subscription's servers recorded). Targets: a placement
// decision p99 <= 20 ms; the fill spread after the trials (fullest host's fill / emptiest's) <= 1.2.
import { performance } from 'node:perf_hooks';
import { readyTemplateHosts } from '../src/instances/index.js';
import { fillOf, loadHosts, place, tenantDiskEstimate } from '../src/placement/index.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';

const P99_TARGET_MS = 20;
const SPREAD_TARGET = 1.2;
const GB = 1024 ** 3;
const MB = 1024 ** 2;

function parseArgs() {
  const args = process.argv.slice(2);
  const o = { hosts: 200, tenants: 20_000, trials: 5_000 };
  for (let i = 0; i < args.length; i++) {
    const key = args[i]?.replace(/^--/, '') as keyof typeof o;
    if (!(key in o)) throw new Error(`unknown argument ${args[i]}`);
    o[key] = Number(args[++i]);
  }
  return o;
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

/** A seeded generator, so two runs fill the same fleet. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

runBench(async () => {
  const o = parseArgs();
  const bench = await createBenchContext('placement');
  const { db } = bench.ctx;
  try {
    const t0 = performance.now();
    const [pgServer] = await db.$queryRaw<{ id: number }[]>`
      INSERT INTO postgresql_servers (name, ip, port, username, updated_at) VALUES ('bench', '127.0.0.1', 5432, 'postgres', now()) RETURNING id`;
    const version = await db.odooVersion.create({
      data: { name: 'bench-18.0', source_url: 'file:///none.tar.gz', source_sha256: '0'.repeat(64) },
    });
    const rnd = random(49);
    const hosts = Array.from({ length: o.hosts }, (_, i) => ({ i, memory: (i % 2 === 0 ? 16 : 24) * GB }));
    await db.rootServer.createMany({
      data: hosts.map((h) => ({
        name: `bench-${h.i}`,
        ip: `10.0.${Math.floor(h.i / 250)}.${(h.i % 250) + 1}`,
        state: 'confirmed' as const,
        odoo_state: 'running' as const,
        server_state: 'online' as const,
        odoo_version_id: version.id,
        odoo_postgresql_server_id: pgServer!.id,
        memory_bytes: BigInt(h.memory),
      })),
    });
    const rows = await db.rootServer.findMany({ select: { id: true, memory_bytes: true }, orderBy: { id: 'asc' } });
    const capacity = (m: bigint | null) => Math.floor((Number(m) * 0.8) / (64 * MB));
    const totalCapacity = rows.reduce((sum, r) => sum + capacity(r.memory_bytes), 0);

    // Tenants: each host its share of the fleet ±25 %, then trimmed or topped up to the total.
    const share = rows.map((r) => Math.max(0, Math.round(((capacity(r.memory_bytes) * o.tenants) / totalCapacity) * (0.75 + rnd() * 0.5))));
    let diff = o.tenants - share.reduce((a, b) => a + b, 0);
    for (let i = 0; diff !== 0; i = (i + 1) % share.length) {
      const step = diff > 0 ? 1 : -1;
      if (share[i]! + step >= 0) {
        share[i]! += step;
        diff -= step;
      }
    }
    const owner = await db.partner.create({ data: { name: 'Bench', email: 'bench@example.com' } });
    const template = await db.databaseTemplate.create({
      data: {
        name: 'Bench',
        postgresql_server_id: pgServer!.id,
        template_db_name: 'bench_placement_template',
        root_server_id: rows[0]!.id,
        template_system_identifier: '1',
        template_oid: 1n,
      },
    });
    await db.databaseTemplateCopy.createMany({
      data: rows.slice(1).map((r) => ({
        database_template_id: template.id,
        root_server_id: r.id,
        postgresql_server_id: pgServer!.id,
        database_name: `bench_placement_copy_${r.id}`,
        state: 'ready' as const,
        content_version: template.content_version,
        system_identifier: '1',
        oid: BigInt(r.id + 1),
      })),
    });
    const hostOf = share.flatMap((n, i) => Array<number>(n).fill(rows[i]!.id));
    for (let from = 0; from < hostOf.length; from += 5000) {
      const chunk = hostOf.slice(from, from + 5000);
      await db.subscription.createMany({
        data: chunk.map((host, k) => {
          const size = Math.round((100 + rnd() * 200) * MB);
          return {
            name: `t${from + k}`,
            partner_id: owner.id,
            state: 'running' as const,
            database_name: `bench_placement_t${from + k}`,
            database_template_id: template.id,
            root_server_id: host,
            postgresql_server_id: pgServer!.id,
            database_created_at: new Date(Date.now() - 86_400_000),
            placed_at: new Date(Date.now() - 86_400_000 - Math.floor(rnd() * 30 * 86_400_000)),
            usage: { db_size_bytes: Math.round(size * 0.6), filestore_bytes: Math.round(size * 0.4) },
          };
        }),
      });
    }
    // A sample per host: 2 TB of disk, used by its tenants (about 200 MB each) and 20 GB of system.
    await db.monitorLog.createMany({
      data: rows.map((r, i) => ({
        root_server_id: r.id,
        cpu_percent: 20,
        ram_used_bytes: BigInt(4 * GB),
        ram_total_bytes: r.memory_bytes!,
        ram_percent: 25,
        disk_used_bytes: BigInt(20 * GB + share[i]! * 200 * MB),
        disk_total_bytes: BigInt(2048 * GB),
        disk_percent: 5,
        net_rx_bytes_per_s: 0,
        net_tx_bytes_per_s: 0,
        load_1: 1,
        load_5: 1,
        load_15: 1,
        created_at: new Date(Date.now() - 60_000),
      })),
    });
    await db.$executeRawUnsafe('ANALYZE');
    console.log(
      `fleet: ${rows.length} hosts (capacity ${totalCapacity} tenants), ${o.tenants} tenants, template ready on every host; filled in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );

    const spreadNow = async () => {
      const ids = rows.map((r) => r.id);
      const figures = await loadHosts(
        db,
        ids.map((id) => ({ root_server_id: id, postgresql_server_id: pgServer!.id })),
        new Date(),
      );
      const disk = await tenantDiskEstimate(db, ids);
      const fills = figures.map((h) => fillOf(h, disk).fill);
      return { max: Math.max(...fills), min: Math.min(...fills) };
    };
    const before = await spreadNow();
    console.log(
      `before: fill ${(before.min * 100).toFixed(1)} % .. ${(before.max * 100).toFixed(1)} % (spread ${(before.max / before.min).toFixed(2)})`,
    );

    // The trials: each a subscription (made first, not timed), then the decision timed as a deployment makes it.
    const times: number[] = [];
    const readyTimes: number[] = [];
    const placeTimes: number[] = [];
    const counts = new Map<number, number>();
    for (let i = 0; i < o.trials; i++) {
      const sub = await db.subscription.create({
        data: {
          name: `trial ${i}`,
          partner_id: owner.id,
          state: 'deploying',
          is_trial: true,
          database_name: `bench_placement_trial_${i}`,
          database_template_id: template.id,
        },
      });
      const start = performance.now();
      const candidates = await readyTemplateHosts(db, template.id);
      const mid = performance.now();
      const decision = await place(db, {
        candidates,
        what: `subscription ${sub.id}`,
        exceptSubscription: sub.id,
        reserve: async (tx, c) => {
          await tx.subscription.update({
            where: { id: sub.id },
            data: { root_server_id: c.root_server_id, postgresql_server_id: c.postgresql_server_id, placed_at: new Date() },
          });
        },
      });
      const end = performance.now();
      times.push(end - start);
      readyTimes.push(mid - start);
      placeTimes.push(end - mid);
      const host = decision.candidate.root_server_id!;
      counts.set(host, (counts.get(host) ?? 0) + 1);
      if ((i + 1) % 1000 === 0) console.log(`  ${i + 1} trials placed (p99 so far ${pct(times, 99).toFixed(1)} ms, load ${loadavg()})`);
    }
    const after = await spreadNow();
    const p50 = pct(times, 50);
    const p99 = pct(times, 99);
    const spread = after.max / after.min;
    console.log(
      `placement decision (readyTemplateHosts + filter, score, lock, record): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms`,
    );
    console.log(
      `  of which readyTemplateHosts (its stamp read; the 200 copies only when it changed): p50 ${pct(readyTimes, 50).toFixed(1)} ms, p99 ${pct(readyTimes, 99).toFixed(1)} ms; place() (filter, score, lock, record): p50 ${pct(placeTimes, 50).toFixed(1)} ms, p99 ${pct(placeTimes, 99).toFixed(1)} ms`,
    );
    console.log(`trials went to ${counts.size} of ${rows.length} hosts (at most ${Math.max(...counts.values())} on one)`);
    console.log(`after ${o.trials} trials: fill ${(after.min * 100).toFixed(1)} % .. ${(after.max * 100).toFixed(1)} %`);
    console.log(`load average ${loadavg()}`);
    console.log(`p99 <= ${P99_TARGET_MS} ms: ${p99.toFixed(1)} ms — ${verdict(p99 <= P99_TARGET_MS)}`);
    console.log(`fill spread <= ${SPREAD_TARGET}: ${spread.toFixed(3)} — ${verdict(spread <= SPREAD_TARGET)}`);
  } finally {
    await bench.close();
  }
});

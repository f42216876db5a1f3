// Placement on a fleet of Odoo hosts (issue 49): capacity derived from a host's facts and its newest
// sample (an operator's figures win), the filter (cordoned, Odoo not running, offline, in a
// maintenance window, full) and the score (least filled, ties to the host that waited longest), two
// placements at once never both taking a host's last room, the pools' room alert, and cordon /
// uncordon through the API with a real deployment (its filestore on a real sshd host).
import { describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { act, get } from './helpers/lifecycle.js';
import { capacityOf, checkPoolRoom, fillOf, type HostFigures, judge, NoRoomError, place, poolRooms } from '../src/placement/index.js';
import { TENANT_MEMORY_BYTES } from '../src/placement/placement-capacity.js';
import { placeSubscription } from '../src/subscriptions/subscription-placement.js';

const f = useOdooHost({ 'ab/abcdef0123': 'logo bytes' });
const { t } = f;
const GB = 1024 ** 3;

function figures(over: Partial<HostFigures> = {}): HostFigures {
  return {
    id: 1,
    name: 'h',
    ip: '192.0.2.1',
    postgresql_server_id: 1,
    state: 'confirmed',
    odoo_state: 'running',
    server_state: 'online',
    cordoned_at: null,
    cordon_reason: null,
    capacity_tenants: null,
    capacity_memory_bytes: null,
    capacity_disk_bytes: null,
    memory_bytes: null,
    sample: null,
    tenants: 0,
    tenants_since_sample: 0,
    last_placed_at: null,
    maintenance: null,
    ...over,
  };
}

let hostSeq = 0;
/** A host row of its own (no SSH: placement never reaches it), in an Odoo version's pool. */
async function host(data: Record<string, unknown> = {}) {
  return t.ctx.db.rootServer.create({
    data: {
      name: `pool-host-${++hostSeq}`,
      ip: `192.0.2.${hostSeq}`,
      state: 'confirmed',
      odoo_state: 'running',
      server_state: 'online',
      odoo_postgresql_server_id: f.fx.serverId,
      ...data,
    },
  });
}

let subSeq = 0;
/** A subscription living on `hostId` (its database made), or only created (`placed: false`). */
async function tenant(hostId: number | null, opts: { placedAt?: Date; trial?: boolean } = {}) {
  const n = ++subSeq;
  const partner = await t.ctx.db.partner.create({ data: { name: 'P', email: `placement-${Date.now()}-${n}@example.com` } });
  return t.ctx.db.subscription.create({
    data: {
      name: `s${n}`,
      partner_id: partner.id,
      state: hostId === null ? 'draft' : 'running',
      is_trial: opts.trial ?? false,
      database_name: `${t.ctx.dbName}_pl${n}`,
      database_template_id: f.fx.templateId,
      ...(hostId === null
        ? {}
        : {
            root_server_id: hostId,
            postgresql_server_id: f.fx.serverId,
            database_created_at: new Date(),
            placed_at: opts.placedAt ?? new Date(Date.now() - 3600_000),
          }),
    },
  });
}

const candidates = (ids: number[]) => ids.map((id) => ({ root_server_id: id, postgresql_server_id: f.fx.serverId }));

/** Places subscription `subId` among `ids`, recording it as the deployment does. */
const placeSub = (subId: number, ids: number[]) =>
  place(t.ctx.db, {
    candidates: candidates(ids),
    what: `subscription ${subId}`,
    exceptSubscription: subId,
    reserve: async (tx, c) => {
      await tx.subscription.update({
        where: { id: subId },
        data: { root_server_id: c.root_server_id, postgresql_server_id: c.postgresql_server_id, placed_at: new Date(), state: 'deploying' },
      });
    },
  });

describe('capacity', () => {
  it('is derived from the memory setup_odoo read, else the newest sample; an operator’s figures win', () => {
    const sample = {
      ram_total_bytes: 8n * BigInt(GB),
      disk_total_bytes: 100n * BigInt(GB),
      disk_used_bytes: 30n * BigInt(GB),
      at: new Date(),
    };
    const facts = capacityOf(figures({ memory_bytes: 4n * BigInt(GB), sample }));
    expect(facts).toMatchObject({ memory_from: 'facts', tenants_from: 'memory', disk_from: 'sample' });
    expect(facts.memory_bytes).toBe(Math.floor(4 * GB * 0.8));
    expect(facts.tenants).toBe(Math.floor((4 * GB * 0.8) / TENANT_MEMORY_BYTES));
    expect(facts.disk_bytes).toBe(Math.floor(100 * GB * 0.9));
    expect(capacityOf(figures({ sample }))).toMatchObject({ memory_from: 'sample', memory_bytes: Math.floor(8 * GB * 0.8) });
    const set = capacityOf(figures({ memory_bytes: 4n * BigInt(GB), sample, capacity_tenants: 7, capacity_disk_bytes: 10n * BigInt(GB) }));
    expect(set).toMatchObject({ tenants: 7, tenants_from: 'operator', disk_bytes: 9 * GB, disk_from: 'operator' });
    expect(capacityOf(figures())).toMatchObject({ tenants: null, tenants_from: 'unknown', disk_bytes: null });
  });

  it('counts the disk of tenants placed after the sample, and a host whose disk is full takes none', () => {
    const sample = {
      ram_total_bytes: 64n * BigInt(GB),
      disk_total_bytes: 10n * BigInt(GB),
      disk_used_bytes: 8n * BigInt(GB),
      at: new Date(),
    };
    const h = figures({ sample, tenants: 5, tenants_since_sample: 2 });
    const fill = fillOf(h, 0.25 * GB);
    expect(fill.disk_used_bytes).toBe(8.5 * GB);
    expect(fill.full).toBeNull();
    expect(fillOf({ ...h, tenants_since_sample: 4 }, 0.25 * GB).full).toMatch(/^disk full: 9\.0 GB used of 9\.0 GB usable/);
  });
});

describe('the filter and the score', () => {
  it('leaves out each unhealthy or full host with why, and picks the least filled; ties go to the host that waited longest', () => {
    const now = Date.now();
    const hosts = [
      figures({ id: 1, capacity_tenants: 10, tenants: 5 }),
      figures({ id: 2, capacity_tenants: 10, tenants: 3, last_placed_at: new Date(now - 1000) }),
      figures({ id: 3, capacity_tenants: 10, tenants: 3, last_placed_at: new Date(now - 5000) }),
      figures({ id: 4, capacity_tenants: 10, tenants: 0, cordoned_at: new Date(now), cordon_reason: 'disk swap' }),
      figures({ id: 5, capacity_tenants: 10, tenants: 0, odoo_state: 'stopped' }),
      figures({ id: 6, capacity_tenants: 10, tenants: 0, odoo_state: 'failed' }),
      figures({ id: 7, capacity_tenants: 10, tenants: 0, server_state: 'offline' }),
      figures({ id: 8, capacity_tenants: 10, tenants: 0, maintenance: 'maintenance window 3' }),
      figures({ id: 9, capacity_tenants: 10, tenants: 10 }),
      figures({ id: 10, capacity_tenants: 10, tenants: 0, state: 'cancel' }),
      // A host where svc never set up Odoo holds filestores only: it may be used.
      figures({ id: 11, capacity_tenants: 20, tenants: 14, odoo_state: 'not_installed', server_state: 'no_monitor' }),
    ];
    const { fits, left } = judge(hosts, 256 * 1024 ** 2);
    expect(fits.map((j) => j.host.id)).toEqual([3, 2, 1, 11]);
    expect(Object.fromEntries(left.map((j) => [j.host.id, j.reason]))).toEqual({
      4: expect.stringMatching(/^cordoned since .* \(disk swap\)$/),
      5: 'Odoo is stopped',
      6: 'Odoo is failed',
      7: 'the server is offline (monitoring)',
      8: 'in maintenance window 3',
      9: expect.stringMatching(/^full: 10 tenant\(s\) of 10 \(set by an operator\)$/),
      10: 'the root server is cancelled',
    });
  });
});

describe('placement in svc’s database', () => {
  it('puts a tenant on the least filled host of its pool and counts what is placed there; no host fits: names each and why', async () => {
    const a = await host({ capacity_tenants: 4 });
    const b = await host({ capacity_tenants: 4 });
    const c = await host({ capacity_tenants: 4, odoo_state: 'stopped' });
    for (let i = 0; i < 2; i++) await tenant(a.id);
    await tenant(b.id);
    const window = await t.ctx.db.maintenanceWindow.create({
      data: { root_server_ids: [b.id], starts_at: new Date(Date.now() + 3600_000), ends_at: new Date(Date.now() + 7200_000) },
    });

    const placed: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sub = await tenant(null);
      const d = await placeSub(sub.id, [a.id, b.id, c.id]);
      placed.push(d.candidate.root_server_id);
      expect(d.text).toContain('the least filled of');
    }
    // b (1) first; then, at equal fill, the host that waited longest: a and b end with 4 each.
    expect(placed).toEqual([b.id, a.id, b.id, a.id, b.id]);

    await t.ctx.db.maintenanceWindow.update({ where: { id: window.id }, data: { starts_at: new Date(Date.now() - 60_000) } });
    const last = await tenant(null);
    const err = await placeSub(last.id, [a.id, b.id, c.id]).catch((e: Error) => e);
    expect(err).toBeInstanceOf(NoRoomError);
    const msg = (err as Error).message;
    expect(msg).toContain(`root server ${a.id} ${a.name} (${a.ip}): full: 4 tenant(s) of 4`);
    expect(msg).toContain(`root server ${b.id} ${b.name} (${b.ip}): in maintenance window ${window.id}`);
    expect(msg).toContain(`root server ${c.id} ${c.name} (${c.ip}): Odoo is stopped`);
    expect(await t.ctx.db.subscription.count({ where: { root_server_id: { in: [a.id, b.id] } } })).toBe(8);
  });

  it('two placements at once never both take a host’s last room (its lock): 12 at once for 3 places', async () => {
    const hosts = [await host({ capacity_tenants: 3 }), await host({ capacity_tenants: 3 }), await host({ capacity_tenants: 3 })];
    for (const h of hosts) for (let i = 0; i < 2; i++) await tenant(h.id);
    const subs = await Promise.all(Array.from({ length: 12 }, () => tenant(null)));
    const ids = hosts.map((h) => h.id);
    const outcomes = await Promise.allSettled(subs.map((s) => placeSub(s.id, ids)));
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    expect(won).toHaveLength(3);
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(NoRoomError);
    for (const h of hosts) {
      expect(await t.ctx.db.subscription.count({ where: { root_server_id: h.id } }), `host ${h.id}`).toBe(3);
    }
  });
});

describe('standbys', () => {
  it('a trial of a template without an Odoo host takes its ready standby (no host to filter on)', async () => {
    const bare = await t.ctx.db.databaseTemplate.create({
      data: { name: 'Bare', postgresql_server_id: f.fx.serverId, template_db_name: `${t.ctx.dbName}_bare` },
    });
    const pkg = await t.ctx.db.trialPackage.create({
      data: { name: 'Bare', url_string: `bare-${Date.now()}`, database_template_id: bare.id },
    });
    const standby = await t.ctx.db.standbyDatabase.create({
      data: {
        trial_package_id: pkg.id,
        database_template_id: bare.id,
        template_version: bare.updated_at,
        postgresql_server_id: f.fx.serverId,
        database_name: `svc_standby_bare_${Date.now()}`,
        state: 'ready',
      },
    });
    const sub = await t.ctx.db.subscription.update({
      where: { id: (await tenant(null)).id },
      data: { is_trial: true, database_template_id: bare.id },
    });
    await t.ctx.db.trialRequest.create({
      data: {
        name: 'V',
        company_name: 'C',
        email: 'v@example.com',
        mobile: '1',
        company_size: 's1_5',
        trial_package_id: pkg.id,
        subscription_id: sub.id,
      },
    });
    const placed = await placeSubscription(t.ctx, sub, bare.id);
    expect(placed.standby?.id).toBe(standby.id);
    expect(placed.root).toBeNull();
    expect(await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).toMatchObject({
      postgresql_server_id: f.fx.serverId,
      root_server_id: null,
      placed_at: expect.any(Date),
    });
  });
});

describe('the pools’ room alert', () => {
  it('fires once with the numbers when a pool’s free room falls under the threshold, and resolves when it is back', async () => {
    const version = await t.ctx.db.odooVersion.create({
      data: { name: `pool-${Date.now()}`, source_url: 'file:///none.tar.gz', source_sha256: 'a'.repeat(64) },
    });
    const a = await host({ capacity_tenants: 5, odoo_version_id: version.id });
    const b = await host({ capacity_tenants: 5, odoo_version_id: version.id, cordoned_at: new Date() });
    for (let i = 0; i < 3; i++) await tenant(a.id);
    // 14 trials placed on the pool in the last week: the default threshold is a day of them, 2.
    for (let i = 0; i < 14; i++) await tenant(b.id, { trial: true, placedAt: new Date(Date.now() - 86_400_000) });
    await t.ctx.db.rootServer.update({ where: { id: b.id }, data: { capacity_tenants: 20 } });

    let pool = (await poolRooms(t.ctx.db)).find((p) => p.odoo_version_id === version.id)!;
    expect(pool).toMatchObject({ hosts: 2, healthy: 1, room: 2, trials_last_week: 14, threshold: 2, threshold_from: 'trials', low: false });

    await tenant(a.id);
    const first = await checkPoolRoom(t.ctx);
    expect(first.fired).toContain(version.id);
    pool = first.pools.find((p) => p.odoo_version_id === version.id)!;
    expect(pool).toMatchObject({ room: 1, threshold: 2, low: true });
    expect((await checkPoolRoom(t.ctx)).fired).not.toContain(version.id);
    const alerts = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.odoo.version', rec_id: version.id },
      orderBy: { id: 'asc' },
    });
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.body).toContain(`[ALERT] Pool ${version.name}: room for 1 new tenant(s), under 2`);
    expect(alerts[0]!.body).toContain(`root server ${a.id} ${a.name} (${a.ip}): 4 tenant(s), room for 1`);
    expect(alerts[0]!.body).toMatch(new RegExp(`root server ${b.id} .*: 14 tenant\\(s\\), room for 6 — takes none: cordoned since`));

    // The setting replaces the default; uncordoning gives the room back.
    const patched = await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { pool_room_alert_tenants: 5 } });
    expect(patched.statusCode, patched.body).toBe(200);
    const un = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${b.id}/actions/uncordon` });
    expect(un.statusCode, un.body).toBe(200);
    const back = await checkPoolRoom(t.ctx);
    expect(back.resolved).toContain(version.id);
    expect(back.pools.find((p) => p.odoo_version_id === version.id)).toMatchObject({ room: 7, threshold: 5, threshold_from: 'setting' });
    expect((await t.ctx.db.odooVersion.findUniqueOrThrow({ where: { id: version.id } })).room_low_since).toBeNull();
    await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { pool_room_alert_tenants: null } });
  });
});

describe('cordon and uncordon through the API, with a real deployment', () => {
  it('a cordoned host gets no new tenant (the deployment fails naming it and why); uncordoned, it does', async () => {
    const denied = await request(t.app, t.as.user, { method: 'POST', url: `/api/v1/root-servers/${f.rootServerId}/actions/cordon` });
    expect(denied.statusCode).toBe(403);
    const cordoned = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/root-servers/${f.rootServerId}/actions/cordon`,
      payload: { reason: 'disk replacement' },
    });
    expect(cordoned.statusCode, cordoned.body).toBe(200);
    expect(cordoned.json()).toMatchObject({
      root_server_id: f.rootServerId,
      cordon_reason: 'disk replacement',
      left_out: expect.stringMatching(/^cordoned since/),
    });
    const server = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${f.rootServerId}` })).json();
    expect(server.cordoned_at).not.toBeNull();

    const partner = await f.fx.partner();
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Cordoned', partner_id: partner.id, database_template_id: f.fx.templateId, database_name: `${t.ctx.dbName}_cord` },
    });
    const id = created.json().id as number;
    expect((await act(t, id, 'confirm')).statusCode).toBe(200);
    const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`No host fits subscription ${id}`);
    expect(job.error).toMatch(new RegExp(`root server ${f.rootServerId} .*: cordoned since .* \\(disk replacement\\)`));
    expect((await get(t, id)).state).toBe('failed');
    const step = await t.ctx.db.actionLog.findFirstOrThrow({
      where: { model_name: 'svc.subscription', rec_id: id, input_text: { startsWith: 'deploy: choose the host' } },
    });
    expect(step).toMatchObject({ status: 'failure', output_text: expect.stringContaining('cordoned since') });

    const un = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${f.rootServerId}/actions/uncordon` });
    expect(un.statusCode, un.body).toBe(200);
    expect(un.json()).toMatchObject({ cordoned_at: null, left_out: null });
    const again = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
    expect(again.state, again.error).toBe('completed');
    const sub = await get(t, id);
    expect(sub).toMatchObject({ state: 'running', root_server_id: f.rootServerId, postgresql_server_id: f.fx.serverId });
    const chosen = await t.ctx.db.actionLog.findFirstOrThrow({
      where: { model_name: 'svc.subscription', rec_id: id, input_text: { startsWith: 'deploy: choose the host' }, status: 'success' },
    });
    expect(chosen.output_text).toContain(`root server ${f.rootServerId}`);
    expect(chosen.output_text).toContain('the least filled of 1 host(s) that fit');
    const audit = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.root.server', rec_id: f.rootServerId, input_text: { contains: 'cordon' } },
    });
    expect(audit.map((r) => r.input_text)).toEqual([
      `cordon: root server ${f.rootServerId}: disk replacement`,
      `uncordon: root server ${f.rootServerId}`,
    ]);
  });

  it('an operator sets a host’s capacity; room shows it and where each figure comes from', async () => {
    const h = await host({ memory_bytes: BigInt(4 * GB) });
    await t.ctx.db.monitorLog.create({
      data: {
        root_server_id: h.id,
        cpu_percent: 1,
        ram_used_bytes: BigInt(GB),
        ram_total_bytes: BigInt(4 * GB),
        ram_percent: 25,
        disk_used_bytes: BigInt(20 * GB),
        disk_total_bytes: BigInt(100 * GB),
        disk_percent: 20,
        net_rx_bytes_per_s: 0,
        net_tx_bytes_per_s: 0,
        load_1: 0,
        load_5: 0,
        load_15: 0,
      },
    });
    await tenant(h.id);
    const room = await request(t.app, t.as.user, { method: 'POST', url: `/api/v1/root-servers/${h.id}/actions/room` });
    expect(room.statusCode, room.body).toBe(200);
    const derived = Math.floor((4 * GB * 0.8) / TENANT_MEMORY_BYTES);
    expect(room.json()).toMatchObject({
      tenants: 1,
      capacity: { tenants: derived, tenants_from: 'memory', memory_from: 'facts', disk_bytes: 90 * GB, disk_from: 'sample' },
      room: derived - 1,
      left_out: null,
    });
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${h.id}`,
      payload: { capacity_tenants: 1 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().capacity_tenants).toBe(1);
    const full = (await request(t.app, t.as.user, { method: 'POST', url: `/api/v1/root-servers/${h.id}/actions/room` })).json();
    expect(full).toMatchObject({
      capacity: { tenants: 1, tenants_from: 'operator' },
      room: 0,
      left_out: expect.stringMatching(/^full: 1 tenant\(s\) of 1/),
    });
  });
});

// The template actions of a host that runs Odoo (build, update), read as an operator who names the
// database: `update` runs `odoo-bin -u all` only on a database that may be a template, never on a
// customer's, even one its host's role owns (every copy on that host is). No real Odoo here: the
// host's record says it runs one, and the refusal comes before any job.
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { useLifecycle } from './helpers/lifecycle.js';
import { adminQuery } from './helpers/pg.js';

const t = useTestApp({ workers: true });
const fx = useLifecycle(t);

/** A root server whose record says svc set up Odoo on it with `role` on the lifecycle's PostgreSQL server. */
async function odooHost(role: string) {
  const host = await t.ctx.db.rootServer.create({
    data: {
      name: 'odoo host',
      ip: '127.0.0.1',
      state: 'confirmed',
      odoo_state: 'running',
      odoo_http_port: 18999,
      odoo_version: { create: { name: `t-${Date.now()}`, source_url: 'file:///srv/odoo.tar.gz', source_sha256: 'a'.repeat(64) } },
      odoo_postgresql_server: { connect: { id: fx.serverId } },
      odoo_db_user: role,
    },
  });
  return host.id;
}

describe('update', () => {
  it("refuses a template naming a customer's database (400 naming the subscription), and queues nothing", async () => {
    const tenant = await fx.deployed();
    const [{ owner } = { owner: '' }] = await adminQuery<{ owner: string }>(
      'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
      [tenant.database_name],
    );
    const host = await odooHost(owner);
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: 'a customer', postgresql_server_id: fx.serverId, template_db_name: tenant.database_name, root_server_id: host },
    });
    expect(created.statusCode, created.body).toBe(201);
    const jobsBefore = await t.ctx.queues.queue('odoo').getJobCounts();

    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/database-templates/${created.json().id}/actions/update`,
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.message).toContain(`is the database of subscription ${tenant.id}`);
    expect(await t.ctx.queues.queue('odoo').getJobCounts()).toEqual(jobsBefore);
  });
});

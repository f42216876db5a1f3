// A crowd of trial requests processed at once, as the trials queue's workers do when twenty visitors
// enter their codes within seconds (bench:odoo's crowd): every request becomes exactly one
// subscription. Processing did everything inside one interactive transaction (about twenty
// statements: the package, the partner, the subscription and its name, each tracking message), so
// with twenty at once on one worker's event loop and its pool of ten connections the transactions
// outlived Prisma's 5 s and waited past its 2 s for a connection, and the requests failed. Real
// PostgreSQL and Redis (the deployments are queued, not run: no worker here).
import { describe, expect, it } from 'vitest';
import { ConflictError } from '../src/core/errors.js';
import { processTrialRequest } from '../src/trial/trial-processing.js';
import { useTestApp } from './helpers/app.js';
import { createTrialPackage } from './helpers/trial.js';

const t = useTestApp();
const CROWD = 20;

async function requests(n: number) {
  const pg = await t.ctx.db.postgresqlServer.create({ data: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' } });
  const template = await t.ctx.db.databaseTemplate.create({
    data: { name: 'Crowd', postgresql_server_id: pg.id, template_db_name: `${t.ctx.dbName}_crowd_tpl` },
  });
  const pkg = await createTrialPackage(t.ctx, { database_template_id: template.id, packages: [] });
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const row = await t.ctx.db.trialRequest.create({
      data: {
        name: `Visitor ${i}`,
        company_name: `Crowd Company ${i}`,
        email: `crowd-${i}@example.com`,
        mobile: '+49 170 1234567',
        company_size: 's6_10',
        trial_package_id: pkg.id,
      },
    });
    ids.push(row.id);
  }
  return ids;
}

describe('a crowd of trial requests', () => {
  it(`${CROWD} processed at once: each becomes one confirmed subscription; processed again, each is refused and nothing more is made`, async () => {
    const ids = await requests(CROWD);
    const first = await Promise.allSettled(ids.map((id) => processTrialRequest(t.ctx, id, null)));
    const failures = first.flatMap((r) =>
      r.status === 'rejected'
        ? [
            String((r.reason as Error).message)
              .split('\n')
              .at(-1),
          ]
        : [],
    );
    expect(failures).toEqual([]);

    const rows = await t.ctx.db.trialRequest.findMany({ where: { id: { in: ids } }, include: { subscription: true } });
    expect(rows.map((r) => [r.state, r.subscription?.state])).toEqual(ids.map(() => ['done', 'confirmed']));
    expect(new Set(rows.map((r) => r.subscription_id)).size).toBe(CROWD);
    // Each subscription's chatter says it was made a draft, then confirmed; each request's, new → processing → done.
    for (const r of rows) {
      const states = await t.ctx.db.trackingValue.findMany({
        where: { field: 'state', message: { model_name: 'svc.subscription', rec_id: r.subscription_id! } },
        orderBy: { message_id: 'asc' },
      });
      expect(states.map((s) => s.new_value)).toEqual(['draft', 'confirmed']);
      const requestStates = await t.ctx.db.trackingValue.findMany({
        where: { field: 'state', message: { model_name: 'svc.subscription.trial.request', rec_id: r.id } },
        orderBy: { message_id: 'asc' },
      });
      expect(requestStates.map((s) => s.new_value)).toEqual(['processing', 'done']);
    }

    // Each one twice more at once: all refused, no second subscription.
    const again = await Promise.allSettled([...ids, ...ids].map((id) => processTrialRequest(t.ctx, id, null)));
    expect(again.every((r) => r.status === 'rejected' && r.reason instanceof ConflictError)).toBe(true);
    expect(await t.ctx.db.subscription.count({ where: { partner: { email: { startsWith: 'crowd-' } } } })).toBe(CROWD);
  });
});

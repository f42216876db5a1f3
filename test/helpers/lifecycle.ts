// Fixtures for the customer lifecycle on the real PostgreSQL: a real template database with Odoo's
// tables (./odoo-template.ts), a postgresql_servers row for the local server, a database template, and subscriptions
// deployed from it by the real deployment job. Customer databases are named after the test file's
// database, so cleanup() drops exactly this file's.
import pg from 'pg';
import { afterAll, beforeAll, expect } from 'vitest';
import { postAction, request, waitForJob } from './api.js';
import { startBackupApi, type BackupApi } from './backup-api.js';
import { useBackupServer, type TestBackupServer } from './backup-server.js';
import { createOdooTemplate } from './odoo-template.js';
import type { TestApp } from './app.js';
import { adminQuery, databaseUrl, dropDatabase } from './pg.js';

export interface Subscription {
  id: number;
  state: string;
  database_name: string;
  [field: string]: unknown;
}

async function setupLifecycle(t: TestApp) {
  const { ctx, app } = t;
  const templateDb = `${ctx.dbName}_tpl`;
  await createOdooTemplate(templateDb);
  const [server] = await ctx.db.$queryRaw<{ id: number }[]>`
    INSERT INTO postgresql_servers (name, ip, port, username, password, updated_at)
    VALUES ('local', '127.0.0.1', 5432, 'postgres', NULL, now()) RETURNING id`;
  const created = await request(app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/database-templates',
    payload: { name: 'Odoo', postgresql_server_id: server!.id, template_db_name: templateDb },
  });
  expect(created.statusCode, created.body).toBe(201);
  const templateId = created.json().id as number;
  let n = 0;

  return {
    templateDb,
    templateId,
    serverId: server!.id,

    async partner(email = `customer-${++n}-${Date.now()}@example.com`) {
      const res = await request(app, t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane Customer', email } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as { id: number; email: string };
    },

    /** A subscription deployed from the template by the deployment job (running). */
    async deployed(data: Record<string, unknown> = {}): Promise<Subscription> {
      const partnerId = (data.partner_id as number | undefined) ?? (await this.partner()).id;
      const res = await request(app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: {
          name: `Sub ${++n}`,
          partner_id: partnerId,
          database_template_id: templateId,
          database_name: `${ctx.dbName}_c${n}`,
          ...data,
        },
      });
      expect(res.statusCode, res.body).toBe(201);
      const id = res.json().id as number;
      expect((await act(t, id, 'confirm')).statusCode).toBe(200);
      const deploy = await act(t, id, 'deploy');
      expect(deploy.statusCode, deploy.body).toBe(202);
      const job = await waitForJob(app, t.as.user, deploy.json().job_id);
      expect(job.state, job.error).toBe('completed');
      return get(t, id);
    },

    async cleanup() {
      const dbs = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${ctx.dbName}_%`]);
      for (const { datname } of dbs) await dropDatabase(datname);
    },
  };
}

export type Lifecycle = Awaited<ReturnType<typeof setupLifecycle>>;

export interface BackupStandIn {
  /** The stand-in (./backup-api.ts), for the answers svc's own backup server never gives on demand... */
  remote: BackupApi;
  /** ...registered as a backup server of the app. */
  id: number;
}

/**
 * The backup stand-in registered as a backup server of the app, for the tests of svc against a
 * backup server that holds a backup running, lists it late, answers without its id, refuses or fails
 * on command. A backup server that works is svc's own (`useLifecycle(t, { backups: 'real' })`).
 */
export function useBackupStandIn(t: TestApp): BackupStandIn {
  const s = {} as BackupStandIn;
  beforeAll(async () => {
    s.remote = await startBackupApi();
    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/backup-servers',
      payload: { url: s.remote.url, download_url: 'https://backups.example.com/dl', api_key: s.remote.apiKey },
    });
    expect(res.statusCode, res.body).toBe(201);
    s.id = res.json().id;
  });
  afterAll(() => s.remote?.close());
  return s;
}

export interface LifecycleWithBackups extends Lifecycle {
  /** svc's own backup server (./backup-server.ts), in the test process... */
  backups: TestBackupServer;
  /** ...and its backup_servers record. */
  backupServerId: number;
}

/**
 * The fixture of a test file (call it after useTestApp()), filled before its tests and its customer
 * databases dropped after them; with `backups: 'real'`, also svc's own backup server (a stand-in for
 * the answers it never gives on demand is useBackupStandIn's).
 */
export function useLifecycle(t: TestApp): Lifecycle;
export function useLifecycle(t: TestApp, opts: { backups: 'real' }): LifecycleWithBackups;
export function useLifecycle(t: TestApp, opts: { backups?: 'real' } = {}): Lifecycle {
  const fx = {} as LifecycleWithBackups;
  const real = opts.backups === 'real' ? useBackupServer(t) : null;
  beforeAll(async () => {
    Object.assign(fx, await setupLifecycle(t));
    if (real) Object.assign(fx, { backups: real, backupServerId: real.id });
  });
  afterAll(async () => {
    await fx.cleanup?.();
  });
  return fx;
}

/** POSTs a subscription's action, as the operator unless told. */
export function act(t: TestApp, id: number, name: string, payload?: object, caller = t.as.operator) {
  return postAction(t.app, caller, 'subscriptions', id, name, payload);
}

export async function get(t: TestApp, id: number): Promise<Subscription> {
  const res = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${id}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function messages(t: TestApp, id: number) {
  const res = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${id}/messages?limit=200` });
  expect(res.statusCode).toBe(200);
  return (
    res.json().items as {
      body: string;
      message_type: string;
      subtype_xmlid: string;
      tracking_values: { field: string; old_value: string | null; new_value: string | null }[];
    }[]
  ).reverse();
}

/** The states a subscription went through, from its chatter's tracking. */
export async function stateHistory(t: TestApp, id: number) {
  return (await messages(t, id))
    .flatMap((m) => m.tracking_values)
    .filter((v) => v.field === 'state')
    .map((v) => v.new_value);
}

/** Connects to a customer database as the superuser; rejects when PostgreSQL refuses. */
export async function connect(dbName: string) {
  const client = new pg.Client({ connectionString: databaseUrl(dbName) });
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  }
  return client;
}

export async function canConnect(dbName: string): Promise<true | string> {
  try {
    await (await connect(dbName)).end();
    return true;
  } catch (err) {
    return (err as Error).message;
  }
}

export async function databaseRow(name: string) {
  const rows = await adminQuery<{ datallowconn: boolean; datconnlimit: number }>(
    'SELECT datallowconn, datconnlimit FROM pg_database WHERE datname = $1',
    [name],
  );
  return rows[0] ?? null;
}

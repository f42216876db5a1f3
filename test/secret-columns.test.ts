// One source of truth for secret columns (src/core/models.ts `secrets`): key rotation re-encrypts
// exactly those, and the record services keep them write-only. Real PostgreSQL: every secret the
// API can store is set, then every text column of every table is searched for ciphertext
// (`v<n>:<base64>`). A column holding ciphertext that no model lists (rotation would skip it
// silently) fails, and so does a listed column the schema does not mark `// secret`.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { composeFeatures } from '../src/features.js';
import { SCHEMA_FILE } from '../src/core/migrate.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

const pairs = (columns: Record<string, readonly string[]>) =>
  Object.entries(columns)
    .flatMap(([table, cols]) => cols.map((c) => `${table}.${c}`))
    .sort();

/** `table.column` of every field schema.prisma marks `// secret`. */
function markedInSchema(): string[] {
  const out: string[] = [];
  for (const block of readFileSync(SCHEMA_FILE, 'utf8')
    .split(/^model /m)
    .slice(1)) {
    const table = /@@map\("([^"]+)"\)/.exec(block)?.[1];
    for (const m of block.matchAll(/^\s+(\w+)\s+\S+.*\/\/ secret/gm)) out.push(`${table}.${m[1]}`);
  }
  return out.sort();
}

describe('secret columns', () => {
  it('the models list exactly the columns the schema marks secret', () => {
    expect(pairs(composeFeatures(t.ctx).models.secretColumns())).toEqual(markedInSchema());
  });

  it('every column that holds ciphertext is one the models list, and each listed one was filled', async () => {
    const post = async (url: string, payload: object) => {
      const res = await request(t.app, t.as.admin, { method: 'POST', url, payload });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(201);
      return res.json();
    };
    const partner = await post('/api/v1/partners', { name: 'P', email: 'p@example.com' });
    const sshKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' });
    const root = await post('/api/v1/root-servers', { ip: '10.0.0.1', password: 'pw-1', key: sshKey, code_server_password: 'editor-pw-1' });
    // setup_odoo keeps the host role's password, Odoo's master password and the host's secret (no request writes them).
    await t.ctx.db.rootServer.update({
      where: { id: root.id },
      data: {
        odoo_db_password: await t.ctx.secretBox.encrypt('odoo-db-pw'),
        odoo_admin_passwd: await t.ctx.secretBox.encrypt('odoo-admin-pw'),
        odoo_host_secret: await t.ctx.secretBox.encrypt('odoo-host-secret'),
      },
    });
    const pg = await post('/api/v1/postgresql-servers', { ip: '10.0.0.2', password: 'pg-pw' });
    const template = await post('/api/v1/database-templates', {
      name: 'T',
      postgresql_server_id: pg.id,
      template_db_name: 'secret_columns_tpl',
      owner_role: 'tenant_owner',
      owner_password: 'owner-pw',
    });
    // build keeps the template administrator's password (no request writes it).
    await t.ctx.db.databaseTemplate.update({
      where: { id: template.id },
      data: { admin_password: await t.ctx.secretBox.encrypt('template-admin-pw') },
    });
    // A deployment on an Odoo host keeps the password of the database's own role (no request writes it).
    await post('/api/v1/subscriptions', { name: 'S', partner_id: partner.id, database_template_id: template.id });
    await t.ctx.db.subscription.updateMany({
      data: { database_role: 'svc_db_1', database_role_password: await t.ctx.secretBox.encrypt('tenant-role-pw') },
    });
    const backupServer = await post('/api/v1/backup-servers', { url: 'http://b.invalid', download_url: 'http://d.invalid', api_key: 'k' });
    // svc's own backup server keeps its repositories' restic passwords and cloud credentials (its own API writes them).
    await t.ctx.db.backupRepository.create({
      data: {
        backup_server_id: backupServer.id,
        uuid: 'u-1',
        provider: 's3',
        location: 's3:https://s3.invalid/b',
        password: await t.ctx.secretBox.encrypt('restic-pw'),
        credentials: await t.ctx.secretBox.encrypt('{"access_key_id":"a","secret_access_key":"s"}'),
      },
    });
    const ntfy = await post('/api/v1/notification-servers', {
      provider: 'selfhosted_push',
      url: 'http://n.invalid',
      username: 'a',
      password: 'p',
      auth_token: 't',
    });
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await post('/api/v1/notification-servers', {
      provider: 'cloud_push',
      fcm_server_key: 'legacy',
      fcm_service_account_json: {
        type: 'service_account',
        project_id: 'p',
        private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
        client_email: 'x@p.iam.gserviceaccount.com',
        token_uri: 'http://t.invalid/token',
      },
    });
    // Per-user tokens are made by a job talking to the push server: stored as it stores them.
    await t.ctx.db.notificationUserToken.create({
      data: {
        notification_server_id: ntfy.id,
        user_id: t.as.admin.userId,
        token: await t.ctx.secretBox.encrypt('tk'),
        expires_at: new Date(),
      },
    });
    await post('/api/v1/git-accounts', { access_token: 'ghp_x' });
    await post('/api/v1/webhooks', { model_name: 'res.partner', rec_id: partner.id, signing_secret: 's' });

    const columns = await t.ctx.db.$queryRaw<{ table_name: string; column_name: string }[]>`
      SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type IN ('text', 'character varying')`;
    const holding: string[] = [];
    for (const { table_name, column_name } of columns) {
      const [row] = await t.ctx.db.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM "${table_name}" WHERE "${column_name}" ~ '^v[0-9]+:[A-Za-z0-9+/=]{16,}$'`,
      );
      if (row!.n > 0) holding.push(`${table_name}.${column_name}`);
    }
    expect(holding.sort()).toEqual(pairs(composeFeatures(t.ctx).models.secretColumns()));
  });
});

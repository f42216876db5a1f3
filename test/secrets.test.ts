// Envelope encryption on the real PostgreSQL (raw columns read back with SQL), the master key
// file, write-only output, and key rotation through the API and the real BullMQ worker.
import { stat, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createRecordService } from '../src/core/records.js';
import { keyVersionOf } from '../src/core/crypto.js';
import { rotateEncryptionKey } from '../src/settings/key-rotation.js';
import { composeFeatures } from '../src/features.js';
import { postgresqlServerModel } from '../src/postgresql/postgresql-models.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp({ workers: true });

const secretColumns = () => composeFeatures(t.ctx).models.secretColumns();
const pgServers = () => createRecordService(t.ctx, postgresqlServerModel);

async function rawPasswords(): Promise<{ id: number; password: string | null }[]> {
  return t.ctx.db.$queryRaw`SELECT id, password FROM postgresql_servers ORDER BY id`;
}

async function createServers(n: number, tag: string) {
  const created = [];
  for (let i = 0; i < n; i++) created.push(await pgServers().create({ ip: `10.0.0.${i}`, password: `${tag}-secret-${i}` }));
  return created;
}

describe('master key', () => {
  it('is created on first start with mode 0600', async () => {
    const info = await stat(t.ctx.config.SVC_MASTER_KEY_FILE);
    expect(info.mode & 0o777).toBe(0o600);
    expect((await readFile(t.ctx.config.SVC_MASTER_KEY_FILE, 'utf8')).trim()).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('secret fields', () => {
  it('are encrypted in the database, name their key version, and are write-only in output', async () => {
    const [out] = await createServers(1, 'plain');
    expect(out).toMatchObject({ ip: '10.0.0.0', password_set: true });
    expect(out).not.toHaveProperty('password');
    const [row] = await rawPasswords();
    expect(row!.password).not.toContain('plain-secret');
    expect(row!.password).toMatch(/^v\d+:[A-Za-z0-9+/=]+$/);
    expect(await t.ctx.secretBox.decrypt(row!.password!)).toBe('plain-secret-0');
    // data keys are stored wrapped by the master key, never in the clear
    const keys = await t.ctx.db.encryptionKey.findMany();
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => /^[A-Za-z0-9+/=]+$/.test(k.wrapped_key) && k.wrapped_key.length > 60)).toBe(true);
  });

  it('the same plaintext encrypts differently each time (random IV) and tampering is detected', async () => {
    const a = await t.ctx.secretBox.encrypt('same');
    const b = await t.ctx.secretBox.encrypt('same');
    expect(a).not.toBe(b);
    const tampered = a.slice(0, -4) + (a.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    await expect(t.ctx.secretBox.decrypt(tampered)).rejects.toThrow();
  });

  it('an empty value clears the secret', async () => {
    const [out] = await createServers(1, 'clear');
    const cleared = await pgServers().update(out!.id as number, { password: '' });
    expect(cleared.password_set).toBe(false);
  });
});

describe('key rotation', () => {
  it('POST rotate_encryption_key re-encrypts every secret in a job and retires the old key', async () => {
    await createServers(3, 'rot');
    const before = await rawPasswords();
    const oldVersions = new Set(before.filter((r) => r.password).map((r) => keyVersionOf(r.password!)));

    const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/settings/actions/rotate_encryption_key' });
    expect(res.statusCode).toBe(202);
    const job = await waitForJob(t.app, t.as.admin, res.json().job_id);
    expect(job).toMatchObject({ state: 'completed', name: 'rotate_encryption_key', error: null });
    const result = job.result as { key_version: number; reencrypted: number; retired_versions: number[] };
    expect(result.reencrypted).toBe(before.filter((r) => r.password).length);
    expect(result.retired_versions.sort()).toEqual([...oldVersions].sort());

    const after = await rawPasswords();
    for (const [i, row] of after.entries()) {
      if (!row.password) continue;
      expect(keyVersionOf(row.password)).toBe(result.key_version);
      expect(await t.ctx.secretBox.decrypt(row.password)).toBe(await t.ctx.secretBox.decrypt(before[i]!.password!));
    }
    const log = await t.ctx.db.actionLog.findFirst({ where: { input_text: 'rotate_encryption_key' } });
    expect(log).toMatchObject({ action_type: 'settings', user_id: t.as.admin.userId, status: 'success' });
  });

  it('a crash halfway loses nothing, and a re-run finishes', async () => {
    await createServers(4, 'crash');
    const plaintexts = await Promise.all(
      (await rawPasswords()).map(async (r) => (r.password ? t.ctx.secretBox.decrypt(r.password) : null)),
    );

    let batches = 0;
    await expect(
      rotateEncryptionKey(t.ctx, secretColumns(), {
        batchSize: 2,
        afterBatch: () => {
          if (++batches === 1) throw new Error('simulated crash');
        },
      }),
    ).rejects.toThrow('simulated crash');

    // Halfway: rows on two key versions, every one still readable.
    const mid = await rawPasswords();
    expect(new Set(mid.filter((r) => r.password).map((r) => keyVersionOf(r.password!))).size).toBe(2);
    for (const [i, row] of mid.entries()) if (row.password) expect(await t.ctx.secretBox.decrypt(row.password)).toBe(plaintexts[i]);

    const rerun = await rotateEncryptionKey(t.ctx, secretColumns());
    const end = await rawPasswords();
    for (const [i, row] of end.entries()) {
      if (!row.password) continue;
      expect(keyVersionOf(row.password)).toBe(rerun.key_version);
      expect(await t.ctx.secretBox.decrypt(row.password)).toBe(plaintexts[i]);
    }
    const active = await t.ctx.db.encryptionKey.findMany({ where: { state: 'active' } });
    expect(active.map((k) => k.version)).toEqual([rerun.key_version]);
  });
});

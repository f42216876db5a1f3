// drop_database removes an instance's filestore only after a backup that holds it (issue 47,
// point 7), on real parts: customer databases deployed from a real template, their filestores on
// a real sshd host (the Odoo host), the backup stand-in (real pg_dump) listing its backups with or
// without "filestore": true, as a backup server speaking the backup API may.
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, afterAll, describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { withConfig } from './helpers/app.js';
import { startBackupApi, type BackupApi } from './helpers/backup-api.js';
import { act, databaseRow, get, messages } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';

const f = useOdooHost({ 'ab/abcdef0123': 'logo bytes' });
const { t } = f;
let remote: BackupApi;

beforeAll(async () => {
  remote = await startBackupApi();
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/backup-servers',
    payload: { url: remote.url, download_url: 'https://backups.example.com/dl', api_key: remote.apiKey },
  });
  expect(res.statusCode, res.body).toBe(201);
});
afterAll(() => remote?.close());

/** A cancelled subscription's drop, run to its end. */
async function drop(payload: object = {}) {
  const sub = await f.fx.deployed();
  const filestore = f.filestore(sub.database_name);
  expect(await readFile(path.join(filestore, 'ab/abcdef0123'), 'utf8')).toBe('logo bytes');
  expect((await act(t, sub.id, 'cancel')).statusCode).toBe(200);
  const res = await act(t, sub.id, 'drop_database', payload, t.as.admin);
  expect(res.statusCode, res.body).toBe(202);
  const job = await withConfig(t, { BACKUP_POLL_MS: 20 }, () => waitForJob(t.app, t.as.user, res.json().job_id, 60_000));
  expect(job.state, job.error).toBe('completed');
  expect(await databaseRow(sub.database_name)).toBeNull();
  expect(await get(t, sub.id)).toMatchObject({ state: 'cancelled', database_dropped_at: expect.any(String) });
  const bodies = (await messages(t, sub.id)).map((m) => m as { body: string; subtype_xmlid: string });
  return { sub, filestore, bodies };
}

describe('drop_database and the filestore', { timeout: 120_000 }, () => {
  it('a final backup that does not say it holds the filestore: the database goes, the filestore stays, and the chatter says why and where', async () => {
    remote.behaviour.filestoreFiles = null;
    const { sub, filestore, bodies } = await drop();
    const kept = bodies.find((m) => m.body.startsWith(`Filestore of ${sub.database_name} kept`));
    expect(kept).toMatchObject({ subtype_xmlid: 'mail.mt_alert' });
    expect(kept!.body).toContain(`on root server ${f.rootServerId} `);
    // Set aside under a name of its own, its files intact; the database's own place is free for a deployment made again.
    const where = kept!.body.match(/ at (\S+): /)![1]!;
    expect(where.startsWith(`${filestore}.dropped-`)).toBe(true);
    expect(where).toMatch(/\.dropped-\d{8}t\d{6}z$/);
    expect(await readFile(path.join(where, 'ab/abcdef0123'), 'utf8')).toBe('logo bytes');
    await expect(stat(filestore)).rejects.toThrow(/ENOENT/);
    expect(kept!.body).toMatch(/the final backup \d+ does not say it holds the filestore/);
    expect(bodies.some((m) => m.body.startsWith('Filestore removed'))).toBe(false);
  });

  it('a final backup listed with "filestore": true: the filestore is removed after it, the notice names the backup', async () => {
    remote.behaviour.filestoreFiles = 1;
    try {
      const { filestore, bodies } = await drop();
      await expect(stat(filestore)).rejects.toThrow(/ENOENT/);
      expect(bodies.map((m) => m.body)).toContainEqual(
        expect.stringMatching(
          new RegExp(`^Filestore removed on root server ${f.rootServerId} \\(the final backup \\d+ holds it \\(1 files\\)\\)`),
        ),
      );
    } finally {
      remote.behaviour.filestoreFiles = null;
    }
    // The template's filestore is untouched.
    await expect(stat(f.filestore(f.fx.templateDb))).resolves.toBeTruthy();
  });

  it('skip_backup stays the explicit exception: no backup, the filestore removed', async () => {
    const calls = remote.calls.length;
    const { filestore, bodies } = await drop({ skip_backup: true });
    expect(remote.calls.length).toBe(calls);
    await expect(stat(filestore)).rejects.toThrow(/ENOENT/);
    expect(bodies.map((m) => m.body)).toContainEqual(
      expect.stringMatching(/^Filestore removed on root server \d+ \(skip_backup: no backup holds it\)/),
    );
  });
});

// svc's own backup server in the test process: a backup_servers record made through the API (local
// repository on), the backup server of that record started on a loopback port with its BACKUP_DIR in
// a temporary folder, and the record pointed at it. Stopped and removed after the file. Its weekly
// verify is off (BACKUP_VERIFY_DAYS 0) unless `config` turns it on: a verify would otherwise start
// after a file's first backup, in the middle of its other tests.
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { startBackupServer, type BackupServer } from '../../src/backup-server/index.js';
import type { Config } from '../../src/core/config.js';
import { request } from './api.js';
import type { TestApp } from './app.js';

export interface ListedBackup {
  id: number;
  state: string;
  url: string | null;
  filestore: boolean | null;
  files: number | null;
  error: string | null;
}

export interface TestBackupServer {
  /** The backup_servers record's id. */
  id: number;
  apiKey: string;
  url: string;
  dir: string;
  server: BackupServer;
  /** GET /api/backups?db_name= of the backup server, as svc reads it. */
  backups(
    dbName: string,
  ): Promise<{ id: number; state: string; url: string | null; filestore: boolean | null; files: number | null; error: string | null }[]>;
}

export function useBackupServer(t: TestApp, record: Record<string, unknown> = {}, config: Partial<Config> = {}): TestBackupServer {
  const b = { apiKey: 'backup-server-key-0123456789' } as TestBackupServer;
  beforeAll(async () => {
    b.dir = await mkdtemp(path.join(tmpdir(), 'svc-backup-server-'));
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/backup-servers',
      payload: {
        url: 'http://127.0.0.1:1',
        download_url: 'http://127.0.0.1:1/download',
        api_key: b.apiKey,
        enable_local_backup: true,
        ...record,
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    b.id = created.json().id;
    b.server = await startBackupServer(
      { ...t.ctx, config: { ...t.ctx.config, BACKUP_DIR: b.dir, BACKUP_VERIFY_DAYS: 0, ...config } },
      b.id,
    );
    await b.server.app.listen({ port: 0, host: '127.0.0.1' });
    b.url = `http://127.0.0.1:${(b.server.app.server.address() as AddressInfo).port}`;
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/backup-servers/${b.id}`,
      payload: { url: b.url, download_url: `${b.url}/download`, api_key: b.apiKey },
    });
    expect(patched.statusCode, patched.body).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await b.server?.close();
    if (b.dir) await rm(b.dir, { recursive: true, force: true });
  });
  b.backups = async (dbName) => {
    const res = await fetch(`${b.url}/api/backups?db_name=${encodeURIComponent(dbName)}`, { headers: { 'X-API-Key': b.apiKey } });
    expect(res.status).toBe(200);
    return (await res.json()) as ListedBackup[];
  };
  return b;
}

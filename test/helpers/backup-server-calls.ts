// What the backup server's failure tests ask of it (./backup-server.ts starts it): its API called
// with the record's key, a backup requested and followed to its end, and what its repositories
// hold, read with restic directly.
import path from 'node:path';
import { expect } from 'vitest';
import { createRepositories } from '../../src/backup-server/repositories.js';
import { createRestic, type ResticRepository } from '../../src/backup-server/restic.js';
import type { TestApp } from './app.js';
import type { ListedBackup, TestBackupServer } from './backup-server.js';

export interface Answer {
  status: number;
  text: string;
  /** The JSON body (an object with an id, unless told). */
  json<T = { id: number; [field: string]: unknown }>(): T;
}

export interface BackupServerCalls {
  /** A call to the backup server's API with its key; the answer's status and text. */
  call(method: string, url: string, body?: unknown): Promise<Answer>;
  /** POST {backup_db_path}: the pending backup's id. */
  requestBackup(db: string): Promise<number>;
  /** The backup as GET /api/backups lists it once it is done or failed. */
  settled(db: string, id: number, timeoutMs?: number): Promise<ListedBackup>;
  /** Snapshots having `tag` in every repository of the backup server ("<repository uuid>:<snapshot id>"). */
  snapshotsTagged(tag: string): Promise<string[]>;
  /** The local repository, as restic opens it. */
  local(): Promise<ResticRepository>;
  restic: ReturnType<typeof createRestic>;
}

/** Call it inside a test or hook (the backup server must be started). */
export function backupServerCalls(t: TestApp, bs: TestBackupServer): BackupServerCalls {
  const restic = createRestic({ cacheDir: path.join(bs.dir, 'test-cache'), PATH: t.ctx.config.PATH });
  const repositories = createRepositories(t.ctx, restic, bs.id);

  async function call(method: string, url: string, body?: unknown): Promise<Answer> {
    const res = await fetch(`${bs.url}${url}`, {
      method,
      headers: { 'X-API-Key': bs.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: <T>() => JSON.parse(text) as T };
  }

  return {
    call,
    restic,

    async requestBackup(db) {
      const res = await call('POST', '/svc/database/backup', { db_name: db });
      expect(res.status, res.text).toBe(202);
      return res.json().id;
    },

    async settled(db, id, timeoutMs = 150_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = (await bs.backups(db)).find((b) => b.id === id);
        if (found && (found.state === 'done' || found.state === 'failed')) return found;
        if (Date.now() > deadline) throw new Error(`backup ${id} of ${db} still ${found?.state ?? 'unlisted'}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },

    async snapshotsTagged(tag) {
      const out: string[] = [];
      for (const row of await t.ctx.db.backupRepository.findMany({ where: { backup_server_id: bs.id } })) {
        for (const s of await restic.snapshots(await repositories.toRestic(row), { tags: [tag] })) out.push(`${row.uuid}:${s.id}`);
      }
      return out;
    },

    async local() {
      const row = await t.ctx.db.backupRepository.findFirstOrThrow({ where: { backup_server_id: bs.id, provider: 'local' } });
      return repositories.toRestic(row);
    },
  };
}

/** Retries `check` until it passes (or `timeoutMs` went by: then its failure). */
export async function eventually(check: () => Promise<void>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

// A local backup server implementing the backup API the service calls, on the real PostgreSQL: X-API-Key on every call,
// GET /api/ping, GET /api/cloud-accounts, POST {backup path} {db_name} (a real pg_dump in the
// background: pending → running → done, or failed when pg_dump fails, e.g. a database that refuses
// connections, or when told to fail), GET /api/backups?db_name= (latest first; done ones with
// "filestore": true and "files" when told, as svc's backup server lists them), POST {restore path} {db_name, backup_id}
// (a real pg_restore of that dump; an unknown id answers 404 with an error). Tests steer it:
// hold backups running, answer the request with or without the backup's id, refuse requests. It stands
// in only for those answers, which svc's own backup server (./backup-server.ts) never gives on demand.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { vi } from 'vitest';
import { sendJson, startRecordingServer, type RecordingServer } from './http-recorder.js';

const run = promisify(execFile);
const PG = ['-h', '127.0.0.1', '-p', '5432', '-U', 'postgres'];

export interface RemoteBackupRecord {
  id: number;
  db_name: string;
  state: 'pending' | 'running' | 'done' | 'failed';
  created_at: string;
  url: string;
  error?: string;
  file: string;
  /** Shown by GET /api/backups (a server may record a backup only once it starts). */
  listed: boolean;
  /** Listed with `"filestore": true` and this many files once done (behaviour.filestoreFiles when it was made). */
  filestoreFiles?: number;
}

export interface BackupApi extends RecordingServer {
  apiKey: string;
  backups: RemoteBackupRecord[];
  /** What the next requests meet; change freely between steps. */
  behaviour: {
    /** Backups stay `running` until release() (or forever). */
    hold: boolean;
    /** New backups are not listed, and do not run, until release(). */
    unlisted: boolean;
    /** The backup request answers {id, state} (true) or {} (false). */
    answerWithId: boolean;
    /** The backup and restore requests answer this status with {"error": ...} instead. */
    refuseWith: number | null;
    /** Backups run and end `failed` with this error (a full disk on the backup server, say). */
    failWith: string | null;
    /** Done backups are listed with `"filestore": true, "files": <this>` (as svc's backup server lists them); null: without. */
    filestoreFiles: number | null;
  };
  /** Lets held backups run. */
  release(): void;
  /** Resolves once `n` backups of `dbName` have ended (done or failed). */
  settled(dbName: string, n?: number): Promise<RemoteBackupRecord[]>;
}

export async function startBackupApi(apiKey = 'backup-api-key-0123'): Promise<BackupApi> {
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-backups-'));
  const backups: RemoteBackupRecord[] = [];
  const behaviour: BackupApi['behaviour'] = {
    hold: false,
    unlisted: false,
    answerWithId: true,
    refuseWith: null,
    failWith: null,
    filestoreFiles: null,
  };
  let releaseHeld: () => void = () => {};
  let held = new Promise<void>((resolve) => (releaseHeld = resolve));
  let seq = 100;

  async function dump(b: RemoteBackupRecord) {
    if (!b.listed) await held;
    b.listed = true;
    b.state = 'running';
    if (behaviour.hold) await held;
    try {
      if (behaviour.failWith) {
        await new Promise((r) => setTimeout(r, 10)); // after the request is answered, as a dump would fail
        throw new Error(behaviour.failWith);
      }
      await run('pg_dump', [...PG, '-Fc', '-f', b.file, b.db_name]);
      b.state = 'done';
    } catch (err) {
      b.state = 'failed';
      b.error = (err as { stderr?: string }).stderr ?? String(err);
    }
  }

  const server = await startRecordingServer(async (req, res) => {
    if (req.headers['x-api-key'] !== apiKey) return sendJson(res, 401, { error: 'invalid api key' });
    const body = req.body ? (JSON.parse(req.body) as { db_name?: string; backup_id?: number | string }) : {};
    if (req.method === 'GET' && req.path === '/api/ping') return sendJson(res, 200, { status: 'ok' });
    if (req.method === 'GET' && req.path === '/api/cloud-accounts') return sendJson(res, 200, []);
    if (req.method === 'GET' && req.path === '/api/backups') {
      const listed = backups.filter((b) => b.listed && b.db_name === req.query.get('db_name')).reverse();
      return sendJson(
        res,
        200,
        listed.map(({ id, db_name, state, created_at, url, filestoreFiles, error }) => ({
          id,
          db_name,
          state,
          created_at,
          url,
          ...(error ? { error } : {}),
          ...(state === 'done' && filestoreFiles !== undefined ? { filestore: true, files: filestoreFiles } : {}),
        })),
      );
    }
    if (req.method !== 'POST') return sendJson(res, 404, { error: 'no such route' });
    if (behaviour.refuseWith) return sendJson(res, behaviour.refuseWith, { error: 'the backup service is out of order' });
    if (!body.db_name) return sendJson(res, 400, { error: 'db_name is required' });

    if (req.path === '/svc/database/backup') {
      const id = ++seq;
      const b: RemoteBackupRecord = {
        id,
        db_name: body.db_name,
        state: 'pending',
        created_at: new Date().toISOString(),
        url: `https://backups.example.com/dl/${id}.dump`,
        file: path.join(dir, `${id}.dump`),
        listed: !behaviour.unlisted,
        ...(behaviour.filestoreFiles === null ? {} : { filestoreFiles: behaviour.filestoreFiles }),
      };
      backups.push(b);
      void dump(b);
      return sendJson(res, 200, behaviour.answerWithId ? { id, state: b.state } : {});
    }
    if (req.path === '/svc/database/restore') {
      const b = backups.find((x) => String(x.id) === String(body.backup_id) && x.db_name === body.db_name);
      if (b?.state !== 'done') return sendJson(res, 404, { error: `unknown backup ${body.backup_id} of ${body.db_name}` });
      try {
        await run('pg_restore', [...PG, '--clean', '--if-exists', '-d', body.db_name, b.file]);
      } catch (err) {
        return sendJson(res, 500, { error: (err as { stderr?: string }).stderr ?? String(err) });
      }
      return sendJson(res, 200, { state: 'done' });
    }
    return sendJson(res, 404, { error: 'no such route' });
  });

  return {
    ...server,
    apiKey,
    backups,
    behaviour,
    release() {
      releaseHeld();
      held = new Promise<void>((resolve) => (releaseHeld = resolve));
    },
    settled(dbName, n = 1) {
      return vi.waitFor(
        () => {
          const ended = backups.filter((b) => b.db_name === dbName && (b.state === 'done' || b.state === 'failed'));
          if (ended.length < n) throw new Error(`no ${n} ended backups of ${dbName}`);
          return ended;
        },
        { timeout: 20_000, interval: 20 },
      );
    },
    async close() {
      releaseHeld();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

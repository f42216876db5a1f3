// The backup server's HTTP API: the one svc calls (GET /api/ping, /api/cloud-accounts,
// /api/backups?db_name=; POST to the record's backup, restore and drop paths), with the record's API
// key in X-API-Key, plus what an operator needs around it (cloud accounts added and removed, a
// restore's progress, a verify run now) and the signed download of a backup as Odoo's own backup zip.
import { timingSafeEqual, createHash } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { NotFoundError, UnauthenticatedError, UserError, ConflictError } from '../core/errors.js';
import { registerErrorHandler } from '../core/http/error-handler.js';
import { idParams, queryId, refId } from '../core/http/schemas.js';
import type { TenantBackup } from '../generated/prisma/client.js';
import { dbTag } from './backup-runs.js';
import type { createDownloadLinks } from './download-links.js';
import { cloudAccountInput, cloudAccountOut, type Repositories } from './repositories.js';
import type { createRestic } from './restic.js';
import { stagingCopyOf } from './restore-runs.js';
import { tenantSource } from './tenant-source.js';
import type { VerifyOutcome } from './verify.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;

export interface BackupServerDeps {
  serverId: number;
  restic: ReturnType<typeof createRestic>;
  repositories: Repositories;
  links: ReturnType<typeof createDownloadLinks>;
  /** Tells the runner there is new work (it also looks on its own every few seconds). */
  kick(): void;
  /** A verify run now (verify.ts), answered when it ended. */
  verify(): Promise<VerifyOutcome>;
}

const dbName = z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$/, 'a database name (letters, digits, _ . -)');
const sha = (s: string) => createHash('sha256').update(s).digest();

export async function buildBackupServerApp(ctx: Ctx, deps: BackupServerDeps): Promise<FastifyInstance> {
  const { db } = ctx;
  const { serverId, repositories, links } = deps;
  const app = Fastify({ loggerInstance: ctx.log as FastifyBaseLogger }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandler(app);

  const record = () => db.backupServer.findUniqueOrThrow({ where: { id: serverId } });

  /** The record's API key, compared in constant time (as hashes: any length). */
  async function authenticate(req: FastifyRequest) {
    const given = req.headers['x-api-key'];
    const key = await ctx.secretBox.reveal((await record()).api_key);
    if (typeof given !== 'string' || !key || !timingSafeEqual(sha(given), sha(key)))
      throw new UnauthenticatedError('Missing or wrong X-API-Key');
  }

  async function backupOut(b: TenantBackup, downloadUrl: string) {
    return {
      id: b.id,
      db_name: b.db_name,
      state: b.state,
      created_at: b.created_at.toISOString(),
      finished_at: b.finished_at?.toISOString() ?? null,
      url: b.state === 'done' ? links.linkTo(downloadUrl, b.id) : null,
      filestore: b.state === 'done' ? b.files !== null : null,
      files: b.files,
      size_bytes: b.size_bytes === null ? null : Number(b.size_bytes),
      added_bytes: b.added_bytes === null ? null : Number(b.added_bytes),
      verified_at: b.verified_at?.toISOString() ?? null,
      error: b.error,
    };
  }

  // restore_into: this server restores a backup into a staging copy of its database (target_db_name), svc asks before it sends one.
  app.get('/api/ping', async (req) => {
    await authenticate(req);
    return { ok: true, restore_into: true };
  });

  app.get('/api/cloud-accounts', async (req) => {
    await authenticate(req);
    return (await repositories.cloudAccounts()).map(cloudAccountOut);
  });

  app.post('/api/cloud-accounts', { schema: { body: cloudAccountInput } }, async (req, reply) => {
    await authenticate(req);
    return reply.status(201).send(cloudAccountOut(await repositories.addCloudAccount(req.body)));
  });

  app.delete('/api/cloud-accounts/:id', { schema: { params: idParams } }, async (req, reply) => {
    await authenticate(req);
    await repositories.removeCloudAccount(req.params.id);
    return reply.status(204).send();
  });

  app.get('/api/backups', { schema: { querystring: z.object({ db_name: dbName }).strict() } }, async (req) => {
    await authenticate(req);
    const { download_url } = await record();
    const rows = await db.tenantBackup.findMany({
      where: { backup_server_id: serverId, db_name: req.query.db_name },
      orderBy: { id: 'desc' },
      take: 500,
    });
    return Promise.all(rows.map((b) => backupOut(b, download_url)));
  });

  app.get('/api/restores/:id', { schema: { params: idParams } }, async (req) => {
    await authenticate(req);
    const r = await db.backupRestore.findFirst({ where: { id: req.params.id, backup_server_id: serverId } });
    if (!r) throw new NotFoundError('Restore');
    return {
      id: r.id,
      db_name: r.db_name,
      backup_id: r.backup_id,
      state: r.state,
      error: r.error,
      finished_at: r.finished_at?.toISOString() ?? null,
    };
  });

  // A verify now, whatever the schedule: answered with its outcome once it ended (409 while one runs).
  app.post('/api/verify', async (req) => {
    await authenticate(req);
    return deps.verify();
  });

  // backup_id as svc sends it (the listed id: a number) or written out (a string of digits), a record id either way.
  const operationBody = z
    .object({
      db_name: dbName,
      backup_id: z.union([refId, queryId]).optional(),
      target_db_name: dbName.optional(),
    })
    .strict();

  /** POST {backup_db_path}: a pending backup, taken by the runner. */
  async function requestBackup(name: string) {
    const src = await tenantSource(ctx, name);
    await repositories.targets(); // nowhere to store: said now, not as a failed backup later
    const row = await db.tenantBackup.create({ data: { backup_server_id: serverId, db_name: name, subscription_id: src.subscriptionId } });
    deps.kick();
    return { id: row.id, state: row.state };
  }

  /** POST {restore_db_path}: that backup (the latest done one unless named), checked to be this database's and done. */
  async function requestRestore(name: string, backupId: number | undefined, into: string | undefined) {
    const src = await tenantSource(ctx, name);
    if (into !== undefined && into !== name) await stagingCopyOf(db, src, into);
    const backup = backupId
      ? await db.tenantBackup.findFirst({ where: { id: backupId, backup_server_id: serverId } })
      : await db.tenantBackup.findFirst({ where: { backup_server_id: serverId, db_name: name, state: 'done' }, orderBy: { id: 'desc' } });
    if (!backup) throw new NotFoundError(backupId ? `Backup ${backupId}` : `A completed backup of ${name}`);
    if (backup.db_name !== name) throw new UserError(`Backup ${backup.id} is not a backup of ${name}`);
    if (backup.state !== 'done') throw new UserError(`Backup ${backup.id} is ${backup.state}: only a completed backup can be restored`);
    const busy = await db.backupRestore.findFirst({
      where: { backup_server_id: serverId, db_name: name, state: { in: ['pending', 'running'] } },
    });
    if (busy) throw new ConflictError(`Restore ${busy.id} of ${name} is ${busy.state}`);
    const row = await db.backupRestore.create({
      data: { backup_server_id: serverId, backup_id: backup.id, db_name: name, target_db_name: into ?? name },
    });
    deps.kick();
    return { id: row.id, state: row.state, backup_id: backup.id };
  }

  /** POST {drop_db_path}: forgets every backup of a database no subscription has any more. */
  async function dropBackups(name: string) {
    const live = await db.subscription.findFirst({ where: { database_name: name, database_created_at: { not: null } } });
    if (live) throw new ConflictError(`Database ${name} is subscription ${live.id}'s: its backups are kept while it exists`);
    const rows = await db.tenantBackup.findMany({ where: { backup_server_id: serverId, db_name: name } });
    if (rows.some((r) => r.state === 'pending' || r.state === 'running')) throw new ConflictError(`A backup of ${name} is running`);
    // Each repository on its own: one that refuses keeps its snapshots and the rows naming them, for a retry.
    const refused: string[] = [];
    const cleared: string[] = [];
    for (const repo of await db.backupRepository.findMany({ where: { backup_server_id: serverId } })) {
      try {
        const r = await repositories.toRestic(repo);
        const snaps = await deps.restic.snapshots(r, { tags: [dbTag(name)] });
        if (snaps.length > 0)
          await deps.restic.forget(
            r,
            snaps.map((s) => s.id),
            { prune: true },
          );
        cleared.push(repo.uuid);
      } catch (err) {
        refused.push(`${repo.name ?? repo.uuid} (${repo.provider}): ${(err as Error).message}`);
      }
    }
    if (refused.length > 0) {
      for (const row of rows) {
        const snaps = { ...(row.snapshots as Record<string, string>) };
        for (const uuid of cleared) delete snaps[uuid];
        await db.tenantBackup.update({ where: { id: row.id }, data: { snapshots: snaps } });
      }
      throw new UserError(`The backups of ${name} could not be forgotten everywhere (they stay listed: try again): ${refused.join('; ')}`);
    }
    await db.tenantBackup.deleteMany({ where: { backup_server_id: serverId, db_name: name } });
    return { db_name: name, dropped: rows.length };
  }

  // The three paths are the record's (settable there): matched when a request comes.
  app.post('/*', { schema: { body: operationBody } }, async (req, reply) => {
    await authenticate(req);
    const r = await record();
    const path = req.url.split('?')[0];
    const { db_name, backup_id, target_db_name } = req.body;
    if (path === r.backup_db_path) return reply.status(202).send(await requestBackup(db_name));
    if (path === r.restore_db_path) return reply.status(202).send(await requestRestore(db_name, backup_id, target_db_name));
    if (path === r.drop_db_path) return reply.status(200).send(await dropBackups(db_name));
    throw new NotFoundError(`POST ${path}`);
  });

  app.get(
    '/download/:id',
    {
      schema: {
        params: idParams,
        querystring: z.object({ expires: z.string().optional(), signature: z.string().optional() }).strict(),
      },
    },
    async (req, reply) => {
      if (!links.isValid(req.params.id, req.query.expires, req.query.signature))
        return reply.status(403).send({ error: { code: 'forbidden', message: 'This download link is not valid or has expired' } });
      const backup = await db.tenantBackup.findFirst({ where: { id: req.params.id, backup_server_id: serverId, state: 'done' } });
      if (!backup) throw new NotFoundError('Backup');
      const snaps = backup.snapshots as Record<string, string>;
      const repo = (await db.backupRepository.findMany({ where: { backup_server_id: serverId, uuid: { in: Object.keys(snaps) } } })).sort(
        (a, b) => Number(b.provider === 'local') - Number(a.provider === 'local'),
      )[0];
      if (!repo) throw new NotFoundError('Backup (no repository holds it any more)');
      const zip = deps.restic.dump(await repositories.toRestic(repo), snaps[repo.uuid]!, '/', { archive: 'zip' });
      zip.done.catch((err) => req.log.error({ err, backup_id: backup.id }, 'a backup download failed while it was sent'));
      const stamp = (backup.finished_at ?? backup.created_at).toISOString().replace(/[-:]/g, '').slice(0, 15);
      return reply
        .header('content-type', 'application/zip')
        .header('content-disposition', `attachment; filename="${backup.db_name}_${stamp}.zip"`)
        .send(zip.stream);
    },
  );

  await app.ready();
  return app;
}

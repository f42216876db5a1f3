// Where this backup server stores backups: its local restic repository (BACKUP_DIR/repository,
// made at the first start) and the cloud accounts an operator adds through its API (S3-compatible
// or SFTP). Each repository has its own random password; passwords and credentials are kept as
// svc ciphertexts and revealed only to hand them to restic.
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Config } from '../core/config.js';
import { BlockedAddressError, createAddressGuard } from '../core/outbound-guard.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { BackupRepository } from '../generated/prisma/client.js';
import type { ResticRepository, createRestic } from './restic.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Restic = ReturnType<typeof createRestic>;

export const LOCAL_UUID = 'local';

const s3Credentials = z.strictObject({
  access_key_id: z.string().min(1).max(256),
  secret_access_key: z.string().min(1).max(1024),
  region: z.string().min(1).max(64).optional(),
});
const sftpCredentials = z.strictObject({
  private_key: z.string().min(1).max(16_384),
  known_hosts: z.string().min(1).max(16_384),
  port: z.coerce.number().int().min(1).max(65535).optional(),
});

/**
 * The repository's restic password when the operator wants to know it (to open the repository
 * without svc, e.g. after losing svc's database); a random one otherwise.
 */
const repositoryPassword = z.string().min(16).max(1024).optional();

/** A cloud account as an operator adds it: POST /api/cloud-accounts. */
export const cloudAccountInput = z.discriminatedUnion('provider', [
  z
    .object({
      provider: z.literal('s3'),
      name: z.string().min(1).max(200).optional(),
      repository: z.string().regex(/^s3:https?:\/\/[^\s]+$/, 's3:http(s)://host[:port]/bucket[/prefix]'),
      credentials: s3Credentials,
      password: repositoryPassword,
    })
    .strict(),
  z
    .object({
      provider: z.literal('sftp'),
      name: z.string().min(1).max(200).optional(),
      repository: z.string().regex(/^sftp:[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\/[^\s]*$/, 'sftp:user@host:/absolute/path'),
      credentials: sftpCredentials,
      password: repositoryPassword,
    })
    .strict(),
]);
export type CloudAccountInput = z.infer<typeof cloudAccountInput>;

/** The host a cloud repository names (s3:http(s)://host/..., sftp:user@host:/...). */
function repositoryHost(location: string): string {
  if (location.startsWith('s3:')) return new URL(location.slice(3)).hostname;
  return /^sftp:[^@]+@([^:]+):/.exec(location)![1]!;
}

/**
 * A cloud repository's host, as every outbound call of svc: never a loopback, link-local or
 * unspecified address (by name too) unless OUTBOUND_ALLOW_NETS allows it. Checked when the account
 * is added (restic connects by itself afterwards).
 */
async function assertReachable(config: Pick<Config, 'OUTBOUND_ALLOW_NETS'>, location: string) {
  const guard = createAddressGuard(config.OUTBOUND_ALLOW_NETS);
  const host = repositoryHost(location);
  try {
    guard.checkHost(host);
    await new Promise<void>((resolve, reject) =>
      guard.lookup(host.replace(/^\[(.*)\]$/, '$1'), { all: true }, (err) => (err ? reject(err) : resolve())),
    );
  } catch (err) {
    if (err instanceof BlockedAddressError) throw new UserError(`The repository ${location}: ${err.message}`);
    throw new UserError(`The repository ${location}: its host ${host} cannot be resolved (${(err as Error).message})`);
  }
}

export const cloudAccountOut = (r: BackupRepository) => ({ id: r.id, uuid: r.uuid, provider: r.provider, name: r.name });

export function createRepositories(ctx: Ctx, restic: Restic, serverId: number) {
  const { db, secretBox } = ctx;

  async function toRestic(row: BackupRepository): Promise<ResticRepository> {
    const credentials = row.credentials ? (JSON.parse((await secretBox.decrypt(row.credentials))!) as Record<string, string>) : undefined;
    return {
      provider: row.provider as ResticRepository['provider'],
      location: row.location,
      password: await secretBox.decrypt(row.password),
      credentials,
    };
  }

  return {
    toRestic,

    /** The local repository, made (restic init) at the first start. */
    async ensureLocal(): Promise<BackupRepository> {
      const found = await db.backupRepository.findFirst({ where: { backup_server_id: serverId, provider: 'local' } });
      const row =
        found ??
        (await db.backupRepository.create({
          data: {
            backup_server_id: serverId,
            uuid: LOCAL_UUID,
            provider: 'local',
            name: 'local',
            location: path.resolve(ctx.config.BACKUP_DIR, 'repository'),
            password: await secretBox.encrypt(randomBytes(32).toString('base64url')),
          },
        }));
      await restic.init(await toRestic(row));
      return row;
    },

    /** The cloud accounts (what GET /api/cloud-accounts lists). */
    cloudAccounts: () =>
      db.backupRepository.findMany({ where: { backup_server_id: serverId, provider: { not: 'local' } }, orderBy: { id: 'asc' } }),

    /** Where a backup goes now, by the backup server record's enable_local_backup and enable_cloud_backup. */
    async targets(): Promise<BackupRepository[]> {
      const server = await db.backupServer.findUniqueOrThrow({ where: { id: serverId } });
      const out: BackupRepository[] = [];
      if (server.enable_local_backup) out.push(await this.ensureLocal());
      if (server.enable_cloud_backup) {
        const clouds = await this.cloudAccounts();
        if (clouds.length === 0) throw new UserError('enable_cloud_backup is set but the backup server has no cloud account');
        out.push(...clouds);
      }
      if (out.length === 0)
        throw new UserError('The backup server stores backups nowhere: set enable_local_backup or enable_cloud_backup on its record');
      return out;
    },

    /** Adds a cloud account: its repository is initialised (or opened) first, nothing is stored if that fails. */
    async addCloudAccount(input: CloudAccountInput): Promise<BackupRepository> {
      await assertReachable(ctx.config, input.repository);
      const taken = await db.backupRepository.findFirst({ where: { backup_server_id: serverId, location: input.repository } });
      if (taken) throw new ConflictError(`Cloud account ${taken.id} already uses ${input.repository}`);
      const password = input.password ?? randomBytes(32).toString('base64url');
      const credentials = Object.fromEntries(Object.entries(input.credentials).map(([k, v]) => [k, String(v)]));
      try {
        await restic.init({ provider: input.provider, location: input.repository, password, credentials });
      } catch (err) {
        throw new UserError(`The repository ${input.repository} could not be initialised: ${(err as Error).message}`);
      }
      return db.backupRepository.create({
        data: {
          backup_server_id: serverId,
          uuid: randomUUID(),
          provider: input.provider,
          name: input.name ?? null,
          location: input.repository,
          credentials: await secretBox.encrypt(JSON.stringify(credentials)),
          password: await secretBox.encrypt(password),
        },
      });
    },

    /** Forgets a cloud account (its repository and what is in it stay where they are). */
    async removeCloudAccount(id: number) {
      const row = await db.backupRepository.findFirst({ where: { id, backup_server_id: serverId, provider: { not: 'local' } } });
      if (!row) throw new NotFoundError('Cloud account');
      await db.backupRepository.delete({ where: { id } });
    },
  };
}

export type Repositories = ReturnType<typeof createRepositories>;

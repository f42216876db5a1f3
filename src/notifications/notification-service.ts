// Notification servers: records with write-only secrets checked by notification-validation.ts,
// one default per company (a database constraint → 409), and the operations test_connection,
// test_admin_credentials, send_notification and per-user token generation.
import type { AppContext } from '../context.js';
import { ConflictError, type FieldError, NotFoundError, UserError, ValidationError } from '../core/errors.js';
import { createOutboundHttp } from '../core/outbound-http.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import { postMessage, type Author } from '../core/chatter.js';
import type { NotificationServer } from '../generated/prisma/client.js';
import { createFcmClient } from './fcm-client.js';
import { createNtfyClient, type NtfyAuth } from './ntfy-client.js';
import { notificationJobs } from './notification-job-specs.js';
import { notificationServerModel } from './notification-models.js';
import { validateNotificationServer, type NotificationServerState } from './notification-validation.js';

const DEFAULT_TOPIC = 'svc';
/** Per-user tokens are renewed once they are this close to expiry. */
const RENEW_BEFORE_MS = 24 * 3600 * 1000;

type Data = Record<string, unknown>;

export interface SendInput {
  title: string;
  message: string;
  topic?: string;
  priority?: number;
  token?: string;
}

export interface TokenRunResult {
  users: number;
  created: number;
  renewed: number;
  kept: number;
}

/** Whether a secret will be set after writing `data` over `before`. */
function willBeSet(field: string, before: NotificationServer | null, data: Data): boolean {
  if (field in data && data[field] !== undefined) return typeof data[field] === 'string' && data[field] !== '';
  return Boolean(before?.[field as keyof NotificationServer]);
}

function stateOf(before: NotificationServer | null, data: Data): NotificationServerState {
  const pick = <K extends keyof NotificationServer>(k: K, dflt: NotificationServer[K]) =>
    (k in data && data[k] !== undefined ? data[k] : (before?.[k] ?? dflt)) as NotificationServer[K];
  return {
    provider: pick('provider', undefined as never),
    url: pick('url', null),
    auto_generate_tokens: pick('auto_generate_tokens', false),
    token_expiry_days: pick('token_expiry_days', 365),
    auth_enabled: pick('auth_enabled', false),
    auth_method: pick('auth_method', null),
    username: pick('username', null),
    fcm_project_id: pick('fcm_project_id', null),
    has: {
      password: willBeSet('password', before, data),
      auth_token: willBeSet('auth_token', before, data),
      fcm_server_key: willBeSet('fcm_server_key', before, data),
      fcm_service_account_json: willBeSet('fcm_service_account_json', before, data),
    },
    new_service_account_json:
      typeof data.fcm_service_account_json === 'string' && data.fcm_service_account_json !== '' ? data.fcm_service_account_json : undefined,
  };
}

export function createNotificationService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>) {
  const { db, secretBox } = ctx;
  const http = createOutboundHttp(ctx);
  const ntfy = createNtfyClient(http);
  const fcm = createFcmClient(http, ctx.config.FCM_API_URL);
  const records = createRecordService(ctx, notificationServerModel, {
    // Tokens made on the old server are of no use on another one: gone with the move, in its transaction.
    async prepareUpdate(tx, before, _data, moved) {
      if (moved.length > 0) await tx.notificationUserToken.deleteMany({ where: { notification_server_id: before.id } });
      return undefined;
    },
  });

  /** is_default is stored true or NULL (so the unique index allows one default per company). */
  const output = (row: Data) => ({ ...row, is_default: row.is_default === true });

  function toStored(data: Data): Data {
    return 'is_default' in data ? { ...data, is_default: data.is_default ? true : null } : data;
  }

  async function getServer(id: number): Promise<NotificationServer> {
    const server = await db.notificationServer.findUnique({ where: { id } });
    if (!server) throw new NotFoundError('Notification server');
    return server;
  }

  /** The one unique rule of this resource (one default per company), said in its own words. */
  async function writeChecked(write: () => Promise<Data>, companyId: unknown): Promise<Data> {
    try {
      return await write();
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      const company = typeof companyId === 'number' ? companyId : 1;
      const existing = await db.notificationServer.findFirst({ where: { company_id: company, is_default: true }, select: { id: true } });
      throw new ConflictError(`Company ${company} already has a default notification server`, {
        fields: [{ field: 'is_default', message: 'another notification server is the default of this company' }],
        ...(existing ? { existing_id: existing.id } : {}),
      });
    }
  }

  async function afterSave(row: Data, author: Author | null) {
    if (row.auto_generate_tokens && row.provider === 'selfhosted_push') {
      await ctx.queues.enqueue(notificationJobs.generate_notification_tokens, {
        notification_server_id: row.id as number,
        user_id: author?.id ?? null,
      });
    }
    return output(row);
  }

  function adminAuth(server: NotificationServer, password: string | null): NtfyAuth & { kind: 'basic' } {
    if (!server.username || !password) throw new UserError('Set the admin username and password first');
    return { kind: 'basic', username: server.username, password };
  }

  function selfHostedUrl(server: NotificationServer): string {
    if (server.provider !== 'selfhosted_push' || !server.url) throw new UserError('This operation is for the self-hosted push provider');
    return server.url;
  }

  async function publishAuth(server: NotificationServer): Promise<NtfyAuth> {
    if (!server.auth_enabled) return null;
    if (server.auth_method === 'token') return { kind: 'bearer', token: (await secretBox.reveal(server.auth_token)) ?? '' };
    return { kind: 'basic', username: server.username ?? '', password: (await secretBox.reveal(server.password)) ?? '' };
  }

  async function fcmCredentials(server: NotificationServer) {
    return {
      project_id: server.fcm_project_id,
      service_account_json: await secretBox.reveal(server.fcm_service_account_json),
      server_key: await secretBox.reveal(server.fcm_server_key),
    };
  }

  return {
    async list(query: Parameters<typeof records.list>[0]) {
      const page = await records.list(query);
      return { ...page, items: page.items.map(output) };
    },
    async get(id: number) {
      return output(await records.get(id));
    },
    remove: records.remove,

    async create(data: Data, author: Author | null) {
      validateNotificationServer(stateOf(null, data));
      const row = await writeChecked(() => records.create(toStored(data), author), data.company_id);
      return afterSave(row, author);
    },

    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      const before = await getServer(id);
      const moved = records.movedFields(before, data);
      const patch = records.bindSecrets(before, data);
      try {
        validateNotificationServer(stateOf(before, patch));
      } catch (err) {
        if (moved.length === 0 || !(err instanceof ValidationError)) throw err;
        throw new ValidationError(
          `${err.message} (changing ${moved.join(' and ')} clears the stored secrets: send them again in the same request)`,
          (err.details as { fields: FieldError[] }).fields,
        );
      }
      const row = await writeChecked(() => records.update(id, toStored(patch), author, precondition), data.company_id ?? before.company_id);
      return afterSave(row, author);
    },

    async testConnection(id: number, userId: number | null) {
      const server = await getServer(id);
      const target = { model_name: 'svc.ntfy.server' as const, rec_id: id, user_id: userId };
      if (server.provider === 'selfhosted_push') {
        await ntfy.health(selfHostedUrl(server), target);
        return { ok: true as const, provider: server.provider, api: 'ntfy' as const };
      }
      // A validate-only message: proves the credentials and the project without delivering anything.
      const probe = { title: 'svc connection test', message: 'svc connection test', priority: 3, topic: 'svc-connection-test' };
      const { api } = await fcm.send(await fcmCredentials(server), probe, target, true);
      return { ok: true as const, provider: server.provider, api };
    },

    async testAdminCredentials(id: number, userId: number | null) {
      const server = await getServer(id);
      const url = selfHostedUrl(server);
      const account = await ntfy.account(url, adminAuth(server, await secretBox.reveal(server.password)), {
        model_name: 'svc.ntfy.server',
        rec_id: id,
        user_id: userId,
      });
      return { ok: true as const, ...account };
    },

    async sendNotification(id: number, input: SendInput, userId: number | null) {
      const server = await getServer(id);
      const target = { model_name: 'svc.ntfy.server' as const, rec_id: id, user_id: userId };
      const msg = { title: input.title, message: input.message, topic: input.topic ?? DEFAULT_TOPIC, priority: input.priority ?? 3 };
      if (server.provider === 'selfhosted_push') {
        if (input.token)
          throw new ValidationError('token is for the cloud push provider; the self-hosted provider publishes to a topic', [
            { field: 'token', message: 'not used by ntfy' },
          ]);
        const { id: messageId } = await ntfy.publish(selfHostedUrl(server), await publishAuth(server), msg, target);
        return { provider: server.provider, api: 'ntfy' as const, id: messageId };
      }
      const sent = await fcm.send(await fcmCredentials(server), { ...msg, token: input.token }, target);
      return { provider: server.provider, ...sent };
    },

    async requestUserTokens(id: number, userId: number | null): Promise<string> {
      const server = await getServer(id);
      selfHostedUrl(server);
      if (!server.auto_generate_tokens) throw new UserError('auto_generate_tokens is off for this server');
      return ctx.queues.enqueue(notificationJobs.generate_notification_tokens, { notification_server_id: id, user_id: userId });
    },

    /** The server's per-user tokens: only whether each is set (they are write-only). */
    async listUserTokens(id: number) {
      await getServer(id);
      const rows = await db.notificationUserToken.findMany({ where: { notification_server_id: id }, orderBy: { user_id: 'asc' } });
      return {
        items: rows.map((t) => ({
          user_id: t.user_id,
          token_set: t.token !== '',
          expires_at: t.expires_at.toISOString(),
          created_at: t.created_at.toISOString(),
        })),
      };
    },

    /**
     * Gives every active user a token on the self-hosted server (label "svc user <email>", valid
     * token_expiry_days), renewing tokens that expire within a day. Stops at the first failure
     * (the next ones would fail the same way); tokens made so far are kept.
     */
    async generateUserTokens(id: number, run: { userId: number | null; jobId: string | null }): Promise<TokenRunResult> {
      const server = await getServer(id);
      const url = selfHostedUrl(server);
      if (!server.auto_generate_tokens) throw new UserError('auto_generate_tokens is off for this server');
      const auth = adminAuth(server, await secretBox.reveal(server.password));
      const target = { model_name: 'svc.ntfy.server' as const, rec_id: id, user_id: run.userId, job_id: run.jobId };
      const users = await db.user.findMany({ where: { active: true }, orderBy: { id: 'asc' } });
      const existing = new Map(
        (await db.notificationUserToken.findMany({ where: { notification_server_id: id } })).map((t) => [t.user_id, t]),
      );
      const result: TokenRunResult = { users: users.length, created: 0, renewed: 0, kept: 0 };
      const summary = () =>
        `User tokens: ${result.created} created, ${result.renewed} renewed, ${result.kept} still valid, of ${result.users} active users.`;

      try {
        for (const user of users) {
          const current = existing.get(user.id);
          if (current && current.expires_at.getTime() - Date.now() > RENEW_BEFORE_MS) {
            result.kept++;
            continue;
          }
          const expiresAt = new Date(Date.now() + server.token_expiry_days * 86_400_000);
          const token = await ntfy.createToken(url, auth, `svc user ${user.email}`, Math.floor(expiresAt.getTime() / 1000), target);
          const data = { token: await secretBox.encrypt(token), expires_at: expiresAt };
          await db.notificationUserToken.upsert({
            where: { notification_server_id_user_id: { notification_server_id: id, user_id: user.id } },
            create: { notification_server_id: id, user_id: user.id, ...data },
            update: data,
          });
          result[current ? 'renewed' : 'created']++;
        }
      } catch (err) {
        const message = `${summary()} Stopped: ${(err as Error).message}`;
        await postMessage(db, { model_name: 'svc.ntfy.server', rec_id: id, body: message, message_type: 'notification' });
        throw new UserError(message);
      }
      await postMessage(db, { model_name: 'svc.ntfy.server', rec_id: id, body: summary(), message_type: 'notification' });
      return result;
    },
  };
}

// Users and API tokens.
import type { AppContext } from '../context.js';
import { ConflictError, NotFoundError, UnauthenticatedError } from '../core/errors.js';
import type { UserGroup } from '../core/groups.js';
import type { AuthUser } from '../core/http/auth.js';
import { jsonSafe } from '../core/records.js';
import { hashApiToken, newApiToken } from './api-token.js';

// last_used_at is refreshed at most this often, so reads do not turn into writes.
const TOUCH_INTERVAL_MS = 60_000;

export function createAuthService(ctx: Pick<AppContext, 'db'>) {
  const { db } = ctx;
  return {
    /** The active user owning this bearer token, or UnauthenticatedError. */
    async authenticate(token: string): Promise<AuthUser> {
      const row = await db.apiToken.findUnique({ where: { token_hash: hashApiToken(token) }, include: { user: true } });
      const now = Date.now();
      if (!row?.user.active || (row.expires_at && row.expires_at.getTime() <= now)) {
        throw new UnauthenticatedError();
      }
      if (!row.last_used_at || now - row.last_used_at.getTime() > TOUCH_INTERVAL_MS) {
        await db.apiToken.update({ where: { id: row.id }, data: { last_used_at: new Date(now) } });
      }
      return { id: row.user.id, email: row.user.email, group: row.user.group };
    },

    /** Creates a token for a user; the plaintext is returned once and never stored. */
    async createToken(userId: number, name = '', expiresAt: Date | null = null) {
      const { token, hash, prefix } = newApiToken();
      const row = await db.apiToken.create({
        data: { user_id: userId, name, token_hash: hash, prefix, expires_at: expiresAt },
      });
      return { ...row, token };
    },

    /** CLI: creates the administrator (or promotes and reuses the user) and returns a new token. */
    async createAdmin(email: string, name = '') {
      const address = email.toLowerCase();
      // Not an upsert: PostgreSQL's INSERT … ON CONFLICT takes an id from the sequence even when the user exists.
      const before = await db.user.findUnique({ where: { email: address } });
      const user = before
        ? await db.user.update({ where: { id: before.id }, data: { group: 'administrator', active: true } })
        : await db.user.create({ data: { email: address, name, group: 'administrator' } });
      return { user, before, ...(await this.createToken(user.id, 'cli')) };
    },

    /** CLI: a new token for an existing user. */
    async createTokenForEmail(email: string) {
      const user = await db.user.findUnique({ where: { email: email.toLowerCase() } });
      if (!user) throw new NotFoundError(`User ${email}`);
      return { user, ...(await this.createToken(user.id, 'cli')) };
    },

    async createUser(data: { email: string; name?: string; group?: UserGroup; active?: boolean }) {
      const email = data.email.toLowerCase();
      const existing = await db.user.findUnique({ where: { email } });
      if (existing) {
        throw new ConflictError(`User ${email} already exists (user ${existing.id})`, {
          fields: [{ field: 'email', message: 'already used by another user' }],
          existing_id: existing.id,
        });
      }
      return db.user.create({ data: { ...data, email } });
    },

    /** POST /api-tokens: a token for a user (default: the caller), shown once. */
    async issueToken(input: { user_id?: number; name: string; expires_at: string | null }, caller: AuthUser) {
      const userId = input.user_id ?? caller.id;
      if (!(await db.user.findUnique({ where: { id: userId } }))) throw new NotFoundError('User');
      return jsonSafe(await this.createToken(userId, input.name, input.expires_at ? new Date(input.expires_at) : null));
    },

    async revokeToken(id: number) {
      const { count } = await db.apiToken.deleteMany({ where: { id } });
      if (count === 0) throw new NotFoundError('API token');
    },
  };
}

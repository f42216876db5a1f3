// Users and API tokens (DESIGN §3).
import type { Db } from '../core/db.js';
import { ConflictError, NotFoundError, UnauthenticatedError } from '../core/errors.js';
import type { UserGroup } from './groups.js';
import { hashApiToken, newApiToken } from './api-token.js';

export interface AuthUser {
  id: number;
  email: string;
  group: UserGroup;
}

// last_used_at is refreshed at most this often, so reads do not turn into writes.
const TOUCH_INTERVAL_MS = 60_000;

export function createAuthService(db: Db) {
  return {
    /** The active user owning this bearer token, or UnauthenticatedError. */
    async authenticate(token: string): Promise<AuthUser> {
      const row = await db.apiToken.findUnique({ where: { token_hash: hashApiToken(token) }, include: { user: true } });
      const now = Date.now();
      if (!row || !row.user.active || (row.expires_at && row.expires_at.getTime() <= now)) {
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
      const user = await db.user.upsert({
        where: { email: email.toLowerCase() },
        create: { email: email.toLowerCase(), name, group: 'administrator' },
        update: { group: 'administrator', active: true },
      });
      return { user, ...(await this.createToken(user.id, 'cli')) };
    },

    /** CLI: a new token for an existing user. */
    async createTokenForEmail(email: string) {
      const user = await db.user.findUnique({ where: { email: email.toLowerCase() } });
      if (!user) throw new NotFoundError(`User ${email}`);
      return { user, ...(await this.createToken(user.id, 'cli')) };
    },

    async createUser(data: { email: string; name?: string; group?: UserGroup; active?: boolean }) {
      const email = data.email.toLowerCase();
      if (await db.user.findUnique({ where: { email } })) throw new ConflictError(`User ${email} already exists`);
      return db.user.create({ data: { ...data, email } });
    },
  };
}

export type AuthService = ReturnType<typeof createAuthService>;

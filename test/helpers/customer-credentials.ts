// What the customer-instance tests check of the customer's credentials: the login and password a
// mail tells, the administrator's row in the instance, Debian's passlib verifying a password as
// Odoo would, and every text the service stored (to show a password is in none of them).
import { execFileSync } from 'node:child_process';
import type { TestApp } from './app.js';
import { queryIn } from './odoo-template.js';

/** Whether passlib's pbkdf2_sha512 (what Odoo's CryptContext uses) accepts `password` for `hash`. */
export function passlibVerifies(password: string, hash: string): boolean {
  const out = execFileSync(
    '/usr/bin/python3',
    ['-c', 'import sys; from passlib.hash import pbkdf2_sha512; print(pbkdf2_sha512.verify(sys.argv[1], sys.argv[2]))', password, hash],
    { encoding: 'utf8' },
  );
  return out.trim() === 'True';
}

/** The login and password a mail tells. */
export function credentialsIn(text: string) {
  const login = /Login: +(\S+)/.exec(text)?.[1];
  const password = /Password: +(\S+)/.exec(text)?.[1];
  if (!login || !password) throw new Error(`no credentials in:\n${text}`);
  return { login, password };
}

/** The instance's administrator (res_users id 2) with its partner. */
export const adminRow = (db: string) =>
  queryIn<{ login: string; password: string; name: string; email: string }>(
    db,
    'SELECT u.login, u.password, p.name, p.email FROM res_users u JOIN res_partner p ON p.id = u.partner_id WHERE u.id = 2',
  ).then((rows) => rows[0]!);

/** Every text the service stored: its database as SQL, the jobs in Redis, the log lines. */
export async function everythingStored(t: TestApp): Promise<string> {
  const url = `postgresql://postgres@127.0.0.1:5432/${t.ctx.dbName}`;
  const dump = execFileSync('pg_dump', ['--data-only', url], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const keys = await t.ctx.redis.keys(`${t.ctx.config.QUEUE_PREFIX}:*`);
  const jobs = await Promise.all(
    keys.map(async (k) => ((await t.ctx.redis.type(k)) === 'hash' ? JSON.stringify(await t.ctx.redis.hgetall(k)) : '')),
  );
  return [dump, jobs.join('\n'), t.ctx.logText()].join('\n');
}

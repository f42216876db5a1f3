// The host's own PostgreSQL role: Odoo refuses to run as `postgres`, and serves only databases its
// role owns, so each Odoo host gets a role of its own (LOGIN CREATEDB, never SUPERUSER or
// CREATEROLE) on the PostgreSQL server it uses. Its password is random, kept encrypted on the root
// server record, and sent to PostgreSQL as a SCRAM-SHA-256 verifier (what psql's \password does), so
// the password itself never reaches a statement PostgreSQL could log.
import { createHash, pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { type Query, onServer } from '../instances/index.js';
import { quoteIdent, scramVerifier, type PostgresqlServerRecord } from '../postgresql/index.js';
import type { SecretBox } from '../core/crypto.js';

const pbkdf2Async = promisify(pbkdf2);

/** A password of letters and digits only (it goes into Odoo's configuration file as it is). */
export function randomSecret(length = 32): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(length * 2);
  let out = '';
  // Bytes of 248 and more are skipped: 248 = 4 × 62, so every character is equally likely.
  for (const b of bytes) if (b < 248 && out.length < length) out += alphabet[b % 62];
  return out.length === length ? out : randomSecret(length);
}

/**
 * passlib's pbkdf2_sha512 form, which Odoo reads for admin_passwd (so the file holds no clear master
 * password). The salt comes from the password (a random one of 190 bits: nothing to precompute), so
 * the same password gives the same line and a set-up run again finds the file unchanged.
 */
export async function odooPasswordHash(password: string, rounds = 600_000): Promise<string> {
  const salt = createHash('sha256').update(`svc admin_passwd salt\0${password}`).digest().subarray(0, 16);
  const checksum = await pbkdf2Async(password, salt, rounds, 64, 'sha512');
  const ab64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '').replaceAll('+', '.');
  return `$pbkdf2-sha512$${rounds}$${ab64(salt)}$${ab64(checksum)}`;
}

/** The role's name for a root server: stable (its uuid), unique across hosts sharing a PostgreSQL server. */
export const roleNameOf = (server: { uuid: string }) => `odoo_${server.uuid.replaceAll('-', '').slice(0, 16)}`;

export interface RoleOutcome {
  created: boolean;
}

/** Creates the role, or brings an existing one back to LOGIN CREATEDB NOSUPERUSER with this password. */
export async function ensureRole(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  role: string,
  password: string,
): Promise<RoleOutcome> {
  return onServer(secretBox, server, async (query: Query) => {
    const verifier = scramVerifier(password);
    const { rows } = await query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
    const created = rows.length === 0;
    // The verifier is no secret PostgreSQL could be tricked into revealing the password from; still, no parameter
    // is possible in CREATE ROLE: it is a quoted literal of base64 and $ : characters only.
    const literal = `'${verifier}'`;
    const options = `LOGIN CREATEDB NOSUPERUSER NOCREATEROLE NOREPLICATION PASSWORD ${literal}`;
    await query(`${created ? 'CREATE' : 'ALTER'} ROLE ${quoteIdent(role)} WITH ${options}`);
    return { created };
  });
}

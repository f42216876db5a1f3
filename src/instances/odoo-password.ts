// The customer's password and its hash in Odoo's own format (passlib's pbkdf2_sha512, which Odoo
// uses through its CryptContext): "$pbkdf2-sha512$<rounds>$<salt>$<checksum>", salt and checksum in
// passlib's adapted base64 (standard alphabet with "." for "+", no padding).
import { pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const pbkdf2Async = promisify(pbkdf2);

/** Odoo's default (password.hashing.rounds unset). */
export const ODOO_DEFAULT_ROUNDS = 600_000;
const SALT_BYTES = 16;
const CHECKSUM_BYTES = 64;

const ab64 = (bytes: Buffer) => bytes.toString('base64').replaceAll('+', '.').replace(/=+$/, '');

/** 24 characters of letters, digits, "-" and "_": survives being copied out of a mail. */
export function newPassword(): string {
  return randomBytes(18).toString('base64url');
}

/** The hash Odoo stores in res_users.password (computed off the event loop). */
export async function hashOdooPassword(password: string, rounds = ODOO_DEFAULT_ROUNDS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const checksum = await pbkdf2Async(password, salt, rounds, CHECKSUM_BYTES, 'sha512');
  return `$pbkdf2-sha512$${rounds}$${ab64(salt)}$${ab64(checksum)}`;
}

/** The rounds each template's copies hashed with last (a cache: a wrong guess costs one more hash). */
const lastRounds = new Map<string, number>();

/**
 * Starts hashing `password` now, before the instance can say its rounds (half a second of CPU at
 * Odoo's default, spent while the database is copied), with the rounds `template`'s copies used
 * last, else Odoo's default. The answer gives the hash for the rounds the instance says, hashing
 * again only when they differ.
 */
export function earlyHash(password: string, template: string): (rounds: number) => Promise<string> {
  const guess = lastRounds.get(template) ?? ODOO_DEFAULT_ROUNDS;
  const early = hashOdooPassword(password, guess);
  early.catch(() => {}); // awaited below, or not needed
  return (rounds) => {
    lastRounds.set(template, rounds);
    return rounds === guess ? early : hashOdooPassword(password, rounds);
  };
}

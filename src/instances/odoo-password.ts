// The customer's password and its hash in Odoo's own format (passlib's pbkdf2_sha512, which Odoo
// uses through its CryptContext): "$pbkdf2-sha512$<rounds>$<salt>$<checksum>", salt and checksum in
// passlib's adapted base64 (standard alphabet with "." for "+", no padding).
//
// svc's passwords are random (144 bits): stretching protects guessable passwords, and no guess
// reaches 2^144, so svc hashes them with RANDOM_PASSWORD_ROUNDS, not Odoo's 600,000 (half a CPU-second
// each, twice per visitor: svc's hash and Odoo's check of the deployment's sign-in). svc's addon
// keeps such a hash as it is when the customer signs in with it (passlib would otherwise replace
// every hash whose rounds are not Odoo's, at the cost of one more 600,000-round hash:
// odoo-addons/svc_instance/models/res_users_password.py); a password the customer sets is hashed by
// Odoo with its own rounds.
import { pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const pbkdf2Async = promisify(pbkdf2);

/** Odoo's default (password.hashing.rounds unset). */
export const ODOO_DEFAULT_ROUNDS = 600_000;
/** The rounds of the hash of a password svc made (random, 144 bits); the addon knows them by this number. */
export const RANDOM_PASSWORD_ROUNDS = 1000;
const SALT_BYTES = 16;
const CHECKSUM_BYTES = 64;

const ab64 = (bytes: Buffer) => bytes.toString('base64').replaceAll('+', '.').replace(/=+$/, '');

/** 24 characters of letters, digits, "-" and "_" (144 random bits): survives being copied out of a mail. */
export function newPassword(): string {
  return randomBytes(18).toString('base64url');
}

/** The hash Odoo stores in res_users.password; svc's random passwords take the default rounds. */
export async function hashOdooPassword(password: string, rounds = RANDOM_PASSWORD_ROUNDS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const checksum = await pbkdf2Async(password, salt, rounds, CHECKSUM_BYTES, 'sha512');
  return `$pbkdf2-sha512$${rounds}$${ab64(salt)}$${ab64(checksum)}`;
}

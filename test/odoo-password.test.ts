// The hash of a password svc makes (random, 144 bits), and svc's addon keeping it at sign-in
// (issue 48, point 4): without Odoo, passlib as Odoo 18.0 and 19.0 configure it (res.users
// _crypt_context) and the addon's file loaded with a stand-in `odoo` package.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { hashOdooPassword, newPassword, ODOO_DEFAULT_ROUNDS, RANDOM_PASSWORD_ROUNDS } from '../src/instances/odoo-password.js';
import { passlibVerifies } from './helpers/customer-credentials.js';

const ADDON_FILE = path.resolve('odoo-addons/svc_instance/models/res_users_password.py');

/** Odoo's CryptContext (18.0 and 19.0: pbkdf2_sha512 at 600,000 rounds) wrapped by the addon; verify_and_update's answer. */
function odooVerifyAndUpdate(password: string, hash: string): { valid: boolean; replaced: string | null } {
  const program = `
import importlib.util, json, sys, types
from passlib.context import CryptContext
odoo = types.ModuleType("odoo"); models = types.ModuleType("odoo.models")
class Model:
    def _crypt_context(self):
        return CryptContext(["pbkdf2_sha512", "plaintext"], deprecated=["auto"], pbkdf2_sha512__rounds=${ODOO_DEFAULT_ROUNDS})
models.Model = Model; odoo.models = models
sys.modules["odoo"] = odoo; sys.modules["odoo.models"] = models
spec = importlib.util.spec_from_file_location("res_users_password", sys.argv[1])
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
valid, replacement = module.ResUsers()._crypt_context().verify_and_update(sys.argv[2], sys.argv[3])
print(json.dumps({"valid": valid, "replaced": replacement}))
`;
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', program, ADDON_FILE, password, hash], { encoding: 'utf8' }));
}

describe("svc's random passwords", () => {
  test('are hashed with few rounds, in the format Odoo verifies', async () => {
    const password = newPassword();
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const hash = await hashOdooPassword(password);
    expect(hash.startsWith(`$pbkdf2-sha512$${RANDOM_PASSWORD_ROUNDS}$`)).toBe(true);
    expect(RANDOM_PASSWORD_ROUNDS).toBeLessThan(ODOO_DEFAULT_ROUNDS / 100);
    expect(passlibVerifies(password, hash)).toBe(true);
    expect(passlibVerifies(newPassword(), hash)).toBe(false);
  });

  test("svc's addon keeps their hash when the customer signs in; every other hash is Odoo's to replace", async () => {
    const password = newPassword();
    // The addon's number is svc's.
    expect(
      execFileSync('grep', ['-c', `^SVC_RANDOM_PASSWORD_ROUNDS = ${RANDOM_PASSWORD_ROUNDS}$`, ADDON_FILE], { encoding: 'utf8' }).trim(),
    ).toBe('1');
    expect(odooVerifyAndUpdate(password, await hashOdooPassword(password))).toEqual({ valid: true, replaced: null });
    expect(odooVerifyAndUpdate(newPassword(), await hashOdooPassword(password))).toEqual({ valid: false, replaced: null });
    // Any other rounds: Odoo's own rule (passlib replaces the hash with one of Odoo's rounds).
    const other = odooVerifyAndUpdate(password, await hashOdooPassword(password, RANDOM_PASSWORD_ROUNDS + 1));
    expect(other.valid).toBe(true);
    expect(other.replaced?.startsWith(`$pbkdf2-sha512$${ODOO_DEFAULT_ROUNDS}$`)).toBe(true);
  });
});

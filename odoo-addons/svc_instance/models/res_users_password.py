# The password svc gives a customer is random (144 bits), and svc hashes it with few rounds
# (src/instances/odoo-password.ts, RANDOM_PASSWORD_ROUNDS): stretching protects guessable passwords,
# no guess reaches 2^144. Odoo's CryptContext (passlib) replaces at sign-in every hash whose rounds
# are not its own (600,000), which would cost each new instance one more 600,000-round hash (half a
# CPU-second) at the deployment's sign-in. A hash with exactly svc's rounds is checked and kept as
# it is; every other hash goes through Odoo's own verify_and_update, and a password the customer
# sets is hashed by Odoo with its own rounds.
from odoo import models

# RANDOM_PASSWORD_ROUNDS of src/instances/odoo-password.ts.
SVC_RANDOM_PASSWORD_ROUNDS = 1000
_SVC_HASH_PREFIX = f"$pbkdf2-sha512${SVC_RANDOM_PASSWORD_ROUNDS}$"


class KeepSvcRandomPasswordHash:
    """Odoo's CryptContext, whose verify_and_update keeps a hash of svc's random password."""

    def __init__(self, context):
        self._context = context

    def __getattr__(self, name):
        return getattr(self._context, name)

    def verify_and_update(self, secret, hashed):
        if isinstance(hashed, str) and hashed.startswith(_SVC_HASH_PREFIX):
            return self._context.verify(secret, hashed), None
        return self._context.verify_and_update(secret, hashed)


class ResUsers(models.Model):
    _inherit = "res.users"

    def _crypt_context(self):
        return KeepSvcRandomPasswordHash(super()._crypt_context())

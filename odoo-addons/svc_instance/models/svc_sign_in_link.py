# One-time sign-in links (svc's docs/odoo-addon.md, "Signed in from the trial page"). svc writes a
# row with its own SQL session the moment its trial page takes the visitor in: the SHA-256 of a
# random 256-bit token (the token itself is only ever in the visitor's browser), the user it signs
# in and when it expires (UTC, minutes ahead). controllers/sign_in.py consumes it. Nobody reads or
# writes it through the ORM (no access right grants anything: security/ir.model.access.csv).
from odoo import fields, models


class SvcSignInLink(models.Model):
    _name = "svc.sign.in.link"
    _description = "svc one-time sign-in link"
    _log_access = False

    token_hash = fields.Char(required=True, index=True)
    user_id = fields.Many2one("res.users", required=True, ondelete="cascade")
    expires_at = fields.Datetime(required=True)

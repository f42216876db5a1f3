# Which group makes a user internal is Odoo's base.group_user, found by its external id, for Odoo
# (has_group, share) and for the user limit alike (res_users.py). A tenant's administrator may
# edit external ids; pointing that one at another group (or deleting it) would make every internal
# user look like a portal one to the count. That one external id is kept as the module made it.
from odoo import _, models
from odoo.exceptions import UserError

GUARDED = (("base", "group_user"),)


class IrModelData(models.Model):
    _inherit = "ir.model.data"

    def _svc_refuse_guarded(self, vals=None):
        if self.pool._init:
            return  # installing or updating modules: their data is not the customer's doing
        guarded = self.sudo().filtered(lambda d: (d.module, d.name) in GUARDED)
        if vals is not None:
            guarded = guarded.filtered(lambda d: any(d[f] != vals[f] for f in ("module", "name", "model", "res_id") if f in vals))
        if guarded:
            raise UserError(_(
                "Which users are internal follows the external id base.group_user (Internal User): it cannot be changed or deleted."
            ))

    def write(self, vals):
        self._svc_refuse_guarded(vals)
        return super().write(vals)

    def unlink(self):
        self._svc_refuse_guarded()
        return super().unlink()

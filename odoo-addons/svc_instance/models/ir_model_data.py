# Which group makes a user internal is Odoo's base.group_user, found by its external id, for Odoo
# (has_group, share) and for the user limit alike (res_users.py). A tenant's administrator may
# edit external ids; pointing that one at another group (or deleting it) would make every internal
# user look like a portal one to the count. That one external id is kept as the module made it.
from odoo import api, models
from odoo.exceptions import UserError

GUARDED = (("base", "group_user"),)
IDENTITY = ("module", "name", "model", "res_id")


class IrModelData(models.Model):
    _inherit = "ir.model.data"

    def _svc_refuse_guarded(self, vals=None):
        if self.pool._init:
            return  # installing or updating modules: their data is not the customer's doing
        guarded = self.sudo().filtered(lambda d: (d.module, d.name) in GUARDED)
        if vals is not None:
            guarded = guarded.filtered(lambda d: any(d[f] != vals[f] for f in IDENTITY if f in vals))
        if guarded:
            raise UserError(self.env._(
                "Which users are internal follows the external id base.group_user (Internal User): "
                "it cannot be changed or deleted."
            ))

    def write(self, vals):
        self._svc_refuse_guarded(vals)
        return super().write(vals)

    # at_uninstall=True: an at_uninstall=False check is skipped whenever the context carries
    # `_force_unlink`, which any RPC caller can set; base (the module owning it) is never uninstalled.
    @api.ondelete(at_uninstall=True)
    def _svc_unlink_except_internal_group(self):
        self._svc_refuse_guarded()

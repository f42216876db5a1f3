# The svc.* parameters are the operator's: a tenant administrator reads them (Settings, RPC) but
# cannot create, change or delete them, through the web client, RPC or a server action (superuser
# included). svc itself writes them with its own SQL session, which never goes through this ORM.
from odoo import api, models
from odoo.exceptions import UserError

from .svc_params import PREFIX


class IrConfigParameter(models.Model):
    _inherit = "ir.config_parameter"

    def _svc_refuse(self, keys):
        guarded = sorted(k for k in keys if k.startswith(PREFIX))
        if guarded:
            raise UserError(self.env._(
                "The parameter(s) %(keys)s belong to your hosting package and are set by your provider: "
                "they can be read, not changed.",
                keys=", ".join(guarded),
            ))

    @api.model_create_multi
    def create(self, vals_list):
        self._svc_refuse({v.get("key") or "" for v in vals_list})
        return super().create(vals_list)

    def write(self, vals):
        self._svc_refuse(set(self.mapped("key")) | {vals.get("key") or ""})
        return super().write(vals)

    # at_uninstall=True: Odoo skips at_uninstall=False checks whenever the context carries
    # `_force_unlink` (module uninstallation's flag), which any RPC caller can put in its context.
    # No module's uninstallation deletes svc.* rows (svc writes them in SQL, no module owns them).
    @api.ondelete(at_uninstall=True)
    def _svc_unlink_except_svc_parameters(self):
        self._svc_refuse(set(self.mapped("key")))

# The svc.* parameters are the operator's: a tenant administrator reads them (Settings, RPC) but
# cannot create, change or delete them, through the web client, RPC or a server action (superuser
# included). svc itself writes them with its own SQL session, which never goes through this ORM.
from odoo import api, models
from odoo.exceptions import UserError

from .svc_params import PREFIX


def _refuse(keys):
    raise UserError(
        "The parameter(s) %s belong to your hosting package and are set by your provider: they can be read, not changed."
        % ", ".join(sorted(keys))
    )


class IrConfigParameter(models.Model):
    _inherit = "ir.config_parameter"

    @api.model_create_multi
    def create(self, vals_list):
        keys = {v.get("key") or "" for v in vals_list}
        if any(k.startswith(PREFIX) for k in keys):
            _refuse(k for k in keys if k.startswith(PREFIX))
        return super().create(vals_list)

    def write(self, vals):
        keys = set(self.mapped("key")) | {vals.get("key") or ""}
        if any(k.startswith(PREFIX) for k in keys):
            _refuse(k for k in keys if k.startswith(PREFIX))
        return super().write(vals)

    def unlink(self):
        keys = set(self.mapped("key"))
        if any(k.startswith(PREFIX) for k in keys):
            _refuse(k for k in keys if k.startswith(PREFIX))
        return super().unlink()

# The user limit through groups (see res_users.py): adding users to a group, creating a group with
# users, or making a group imply base.group_user (implied_ids on 18.0 and 19.0, implied_by_ids on
# 19.0) can make users internal without any write on res.users. Every create and write of a group
# is counted before and after, as res.users' own; a group change that adds no internal user passes.
from odoo import api, models


class ResGroups(models.Model):
    _inherit = "res.groups"

    @api.model_create_multi
    def create(self, vals_list):
        create = super().create
        return self.env["res.users"]._svc_guard_membership(lambda: create(vals_list))

    def write(self, vals):
        write = super().write
        return self.env["res.users"]._svc_guard_membership(lambda: write(vals))

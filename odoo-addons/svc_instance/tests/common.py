# What the tests share: svc's parameters written the way svc writes them (SQL, not the ORM, which
# refuses svc.* keys), and users of each kind in both 18.0 (groups_id) and 19.0 (group_ids).
from odoo.tests.common import TransactionCase


def set_svc(cr, **params):
    """svc.<name> = value (None removes it), as svc's own SQL session writes them."""
    for name, value in params.items():
        key = "svc." + name
        cr.execute("DELETE FROM public.ir_config_parameter WHERE key = %s", [key])
        if value is not None:
            cr.execute("INSERT INTO public.ir_config_parameter (key, value) VALUES (%s, %s)", [key, str(value)])


class SvcCase(TransactionCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.Users = cls.env["res.users"].with_context(no_reset_password=True)
        cls.groups_field = "groups_id" if "groups_id" in cls.Users._fields else "group_ids"
        cls.portal = cls.env.ref("base.group_portal")

    def set_svc(self, **params):
        set_svc(self.env.cr, **params)

    def internal_users(self):
        return self.env["res.users"]._svc_internal_users()

    def user_vals(self, login, portal=False):
        vals = {"name": login, "login": login}
        if portal:
            vals[self.groups_field] = [(6, 0, [self.portal.id])]
        return vals

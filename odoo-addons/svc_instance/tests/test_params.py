from odoo.exceptions import UserError
from odoo.tests import tagged

from .common import SvcCase


@tagged("post_install", "-at_install", "svc_instance")
class TestParametersAreTheOperators(SvcCase):
    def test_administrator_reads_but_cannot_change_svc_parameters(self):
        self.set_svc(user_limit=5)
        admin_env = self.env(user=self.env.ref("base.user_admin"))
        ICP = admin_env["ir.config_parameter"]
        self.assertEqual(ICP.get_param("svc.user_limit"), "5")
        self.assertEqual(ICP.search_read([("key", "=", "svc.user_limit")], ["value"])[0]["value"], "5")
        record = ICP.search([("key", "=", "svc.user_limit")])
        for attempt in (
            lambda: ICP.set_param("svc.user_limit", "500"),
            lambda: record.write({"value": "500"}),
            lambda: record.unlink(),
            lambda: ICP.create({"key": "svc.storage_limit_gb", "value": "999"}),
            lambda: ICP.sudo().set_param("svc.user_limit", "500"),
            lambda: ICP.search([("key", "=", "web.base.url")]).write({"key": "svc.user_limit"}),
        ):
            with self.assertRaises(UserError):
                attempt()
        self.assertEqual(ICP.get_param("svc.user_limit"), "5")
        ICP.set_param("svc_other.setting", "fine")  # only svc.* is guarded

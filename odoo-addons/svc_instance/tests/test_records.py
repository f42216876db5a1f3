from odoo.exceptions import UserError
from odoo.tests import tagged

from .common import SvcCase


@tagged("post_install", "-at_install", "svc_instance")
class TestModelLimits(SvcCase):
    def count(self):
        self.env.cr.execute("SELECT count(*) FROM res_partner")
        return self.env.cr.fetchone()[0]

    def test_record_beyond_a_model_limit_is_refused(self):
        n = self.count()
        self.set_svc(model_limits='{"res.partner": %d}' % (n + 1))
        Partner = self.env["res.partner"]
        Partner.create({"name": "svc first"})
        with self.assertRaises(UserError) as caught:
            Partner.create({"name": "svc second"})
        self.assertIn("allows %d" % (n + 1), str(caught.exception))
        self.assertIn("res.partner", str(caught.exception))
        with self.assertRaises(UserError):
            Partner.create([{"name": "svc batch a"}, {"name": "svc batch b"}])
        self.assertEqual(self.count(), n + 1)

    def test_import_that_crosses_the_limit_creates_nothing(self):
        n = self.count()
        self.set_svc(model_limits='{"res.partner": %d}' % (n + 1))
        result = self.env["res.partner"].load(["name"], [["svc import a"], ["svc import b"]])
        self.assertFalse(result["ids"])
        self.assertTrue(any("allows %d" % (n + 1) in m["message"] for m in result["messages"]))
        self.assertEqual(self.count(), n)

    def test_a_model_not_listed_is_not_limited(self):
        self.set_svc(model_limits='{"res.partner.category": 0, "res.country.state": 1}')
        self.env["res.partner"].create({"name": "svc free"})
        self.env["res.partner.category"].create({"name": "svc free"})

    def test_unreadable_model_limits_apply_none(self):
        self.set_svc(model_limits="{not json")
        with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING"):
            self.env["res.partner"].create({"name": "svc unread"})
        self.set_svc(model_limits='{"res.partner": "many"}')
        self.env["res.partner"].create({"name": "svc unread 2"})

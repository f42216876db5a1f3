from odoo.exceptions import UserError
from odoo.tests import tagged
from odoo.tools import SQL

from .common import SvcCase

LOGGER = "odoo.addons.svc_instance.models.svc_params"


@tagged("post_install", "-at_install", "svc_instance")
class TestModelLimits(SvcCase):
    def count(self, table="res_partner"):
        self.env.cr.execute(SQL("SELECT count(*) FROM %s", SQL.identifier(table)))
        return self.env.cr.fetchone()[0]

    def test_record_beyond_a_model_limit_is_refused(self):
        n = self.count()
        self.set_svc(model_limits=f'{{"res.partner": {n + 1}}}')
        Partner = self.env["res.partner"]
        Partner.create({"name": "svc first"})
        with self.assertRaises(UserError) as caught:
            Partner.create({"name": "svc second"})
        self.assertIn(f"allows {n + 1}", str(caught.exception))
        self.assertIn("res.partner", str(caught.exception))
        with self.assertRaises(UserError):
            Partner.create([{"name": "svc batch a"}, {"name": "svc batch b"}])
        self.assertEqual(self.count(), n + 1)

    def test_import_that_crosses_the_limit_creates_nothing(self):
        n = self.count()
        self.set_svc(model_limits=f'{{"res.partner": {n + 1}}}')
        result = self.env["res.partner"].load(["name"], [["svc import a"], ["svc import b"]])
        self.assertFalse(result["ids"])
        self.assertTrue(any(f"allows {n + 1}" in m["message"] for m in result["messages"]))
        self.assertEqual(self.count(), n)

    def test_a_model_not_listed_is_not_limited(self):
        partners, categories = self.count(), self.count("res_partner_category")
        self.set_svc(model_limits='{"res.partner.category": 0, "res.country.state": 1}')
        # The parameter is read: the one model listed with a limit is limited (it has hundreds of rows).
        country = self.env.ref("base.us")
        with self.assertRaises(UserError):
            self.env["res.country.state"].create({"name": "svc state", "code": "SVC", "country_id": country.id})
        # Not listed, and listed with 0 (no limit): created.
        self.assertTrue(self.env["res.partner"].create({"name": "svc free"}).exists())
        self.assertTrue(self.env["res.partner.category"].create({"name": "svc free"}).exists())
        self.assertEqual(self.count(), partners + 1)
        self.assertEqual(self.count("res_partner_category"), categories + 1)

    def test_unreadable_model_limits_apply_none(self):
        n = self.count()
        for unreadable in ("{not json", '{"res.partner": "many"}', "[1]", '{"res.partner": -1}'):
            self.set_svc(model_limits=unreadable)
            with self.subTest(model_limits=unreadable), self.assertLogs(LOGGER, "WARNING") as logs:
                self.assertTrue(self.env["res.partner"].create({"name": f"svc unread {unreadable}"}).exists())
            self.assertIn("svc.model_limits", logs.output[0])
        self.assertEqual(self.count(), n + 4)

# The maintenance patch (maintenance.py) through Odoo's HTTP server: while svc's flag file of this
# database is there, its pages answer the maintenance page and its RPC a clear error; the flag of
# another database changes nothing here.
import os

from odoo.service import common as common_service
from odoo.service import model as model_service
from odoo.tests import HttpCase, tagged
from odoo.tools import config

from .. import maintenance


@tagged("post_install", "-at_install", "svc_instance")
class TestMaintenance(HttpCase):
    def flag(self, dbname):
        directory = os.path.join(config["data_dir"], maintenance.FLAG_DIR)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, dbname)
        with open(path, "w", encoding="utf-8") as f:
            f.write("test\n")
        self.addCleanup(lambda: os.path.exists(path) and os.remove(path))
        return path

    def login_rpc(self):
        """common.login through the RPC service's dispatcher, as /xmlrpc and /jsonrpc reach it when the
        request has no database of its own (a request whose database is being updated gets the page first)."""
        return common_service.dispatch("login", [self.env.cr.dbname, "admin", "wrong"])

    def test_a_database_being_updated_answers_the_maintenance_page_and_rpc_an_error(self):
        self.assertEqual(self.url_open("/web/login").status_code, 200)
        self.assertIs(self.login_rpc(), False)  # a wrong password: the call reached the database
        self.flag(self.env.cr.dbname + "_other")  # another database's update: nothing here
        self.assertEqual(self.url_open("/web/login").status_code, 200)

        flag = self.flag(self.env.cr.dbname)
        page = self.url_open("/web/login")
        self.assertEqual(page.status_code, 503)
        self.assertEqual(page.headers["Retry-After"], str(maintenance.RETRY_AFTER_S))
        self.assertEqual(page.headers["Cache-Control"], "no-store")
        self.assertIn("<h1>This instance is being updated</h1>", page.text)
        self.assertIn('<meta http-equiv="refresh" content="15">', page.text)
        with self.assertRaises(maintenance.UnderMaintenance) as caught:
            self.login_rpc()
        self.assertEqual(
            str(caught.exception), f"Database {self.env.cr.dbname} is being updated; try again in a moment"
        )
        with self.assertRaises(maintenance.UnderMaintenance):
            model_service.dispatch("execute_kw", [self.env.cr.dbname, 2, "admin", "res.partner", "search", [[]]])

        os.remove(flag)
        self.assertEqual(self.url_open("/web/login").status_code, 200)
        self.assertIs(self.login_rpc(), False)

    def test_only_a_plain_database_name_is_looked_up(self):
        self.flag(self.env.cr.dbname)
        self.assertTrue(maintenance.under_maintenance(self.env.cr.dbname))
        for name in (None, "", ".", "..", "../" + self.env.cr.dbname, f"x/../{self.env.cr.dbname}", 42):
            self.assertFalse(maintenance.under_maintenance(name), name)

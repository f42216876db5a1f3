# Through Odoo's HTTP server: the suspended page, the RPC error, the trial in session_info.
import json
import re

import odoo

from odoo.tests import HttpCase, tagged

from ..models.suspension import SvcSuspended
from .common import set_svc


@tagged("post_install", "-at_install", "svc_instance")
class TestThroughHttp(HttpCase):
    def json_call(self, path, params=None):
        r = self.url_open(
            path,
            data=json.dumps({"jsonrpc": "2.0", "method": "call", "id": 1, "params": params or {}}),
            headers={"Content-Type": "application/json"},
        )
        return r.json()

    def test_suspended_instance_answers_a_page_and_rpc_a_clear_error(self):
        self.authenticate("admin", "admin")
        set_svc(self.env.cr, suspended="True", suspension_reason="The trial ended", contact="sales@example.com")
        for path in ("/web/login", "/odoo", "/web"):
            r = self.url_open(path, allow_redirects=False)
            self.assertEqual(r.status_code, 503, path)
            self.assertIn("This Odoo instance is suspended", r.text)
            self.assertIn("The trial ended.", r.text)
            self.assertIn("To reactivate it, contact sales@example.com.", r.text)
            self.assertEqual(r.headers["Retry-After"], "3600")
            self.assertEqual(r.headers["Cache-Control"], "no-store")
        set_svc(self.env.cr, suspension_reason="<script>alert(1)</script>")
        page = self.url_open("/web/login").text
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;.", page)
        self.assertNotIn("<script>alert", page)
        set_svc(self.env.cr, suspension_reason="The trial ended")
        error = self.json_call("/web/dataset/call_kw/res.partner/search_read", {
            "model": "res.partner", "method": "search_read", "args": [[]], "kwargs": {"fields": ["name"]},
        })["error"]
        # One wording for the page and the errors.
        self.assertIn(
            "This Odoo instance is suspended: The trial ended. To reactivate it, contact sales@example.com.",
            error["data"]["message"],
        )
        self.assertEqual(self.url_open("/web/health").status_code, 200)

        # RPC that reaches the models without ir.http (XML-RPC/JSON-RPC object and common services).
        Users = self.registry["res.users"]
        admin = self.env.ref("base.user_admin").id
        with self.assertRaises(SvcSuspended):
            if hasattr(Users, "_check_uid_passwd"):
                self.env["res.users"]._check_uid_passwd(admin, "admin")
            else:
                Users.check(self.env.cr.dbname, admin, "admin")
        credential = {"type": "password", "password": "admin"}
        with self.assertRaises(SvcSuspended):
            self.env["res.users"].browse(admin)._check_credentials(credential, {"interactive": False})

        set_svc(self.env.cr, suspended=None, suspension_reason=None)  # reactivated
        self.assertEqual(self.url_open("/web/login").status_code, 200)
        self.assertNotIn("error", self.json_call("/web/dataset/call_kw/res.partner/search_count", {
            "model": "res.partner", "method": "search_count", "args": [[]], "kwargs": {},
        }))

    def test_session_info_carries_a_trials_days_left(self):
        set_svc(self.env.cr, is_trial="True", trial_end_date="2099-01-01 00:00:00")
        self.authenticate("admin", "admin")
        info = self.json_call("/web/session/get_session_info")["result"]
        self.assertGreater(info["svc_trial"]["days_left"], 300)
        self.assertIn("2099", info["svc_trial"]["end_date"])
        set_svc(self.env.cr, is_trial="False")
        self.assertIsNone(self.json_call("/web/session/get_session_info")["result"]["svc_trial"])

    def test_the_web_client_bundle_carries_the_trial_systray_item(self):
        self.authenticate("admin", "admin")
        page = self.url_open("/odoo").text
        scripts = re.findall(r'src="(/web/assets/[^"]*web\.assets_web[^"]*\.js)"', page)
        self.assertTrue(scripts, "no web.assets_web script in the page")
        js = self.url_open(scripts[0]).text
        self.assertIn("svc_instance.trial", js)
        self.assertIn("svc_instance.TrialSystray", js)

    def test_no_scheduled_action_runs_while_suspended(self):
        set_svc(self.env.cr, suspended="True")
        job = {"id": 0, "cron_name": "svc test"}  # not a real job: running it would fail
        args = (self.env.cr, job) if odoo.release.version_info[0] >= 19 else (self.env.cr.dbname, self.env.cr, job)
        self.assertIsNone(self.registry["ir.cron"]._process_job(*args))

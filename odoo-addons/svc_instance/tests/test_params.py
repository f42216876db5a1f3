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
            record.unlink,
            # Module uninstallation's flag, which any RPC caller can put in its context.
            record.with_context(_force_unlink=True).unlink,
            lambda: ICP.create({"key": "svc.storage_limit_gb", "value": "999"}),
            lambda: ICP.sudo().set_param("svc.user_limit", "500"),
            lambda: ICP.search([("key", "=", "web.base.url")]).write({"key": "svc.user_limit"}),
        ):
            with self.assertRaises(UserError):
                attempt()
        self.assertEqual(ICP.get_param("svc.user_limit"), "5")
        ICP.set_param("svc_other.setting", "fine")  # only svc.* is guarded

    def test_a_schema_or_temporary_view_named_like_odoos_tables_hides_nothing(self):
        # A tenant's SQL (a code server action has env.cr) makes a schema named after the connecting
        # role, first in Odoo's default search_path ("$user", public), or a temporary view in its
        # pooled connection, that hides svc's rows and users: the addon reads public's tables.
        from ..models import svc_params

        self.set_svc(suspended="True", user_limit=1, model_limits='{"res.partner": 1}')
        n = self.internal_users()
        cr = self.env.cr
        cr.execute("""
            DO $$ BEGIN
                EXECUTE format('CREATE SCHEMA %I', current_user);
                EXECUTE format('CREATE VIEW %I.ir_config_parameter AS
                    SELECT * FROM public.ir_config_parameter WHERE left(key, 4) <> ''svc.''', current_user);
                EXECUTE format('CREATE VIEW %I.res_users AS SELECT * FROM public.res_users WHERE false', current_user);
                EXECUTE format('CREATE VIEW %I.res_partner AS SELECT * FROM public.res_partner WHERE false', current_user);
            END $$
        """)
        cr.execute("SELECT count(*) FROM ir_config_parameter WHERE key LIKE 'svc.%%'")
        self.assertEqual(cr.fetchone()[0], 0)  # the shadow is in place
        self.assertTrue(svc_params.flag(svc_params.read(cr), "svc.suspended"))
        self.assertEqual(self.internal_users(), n)
        with self.assertRaises(UserError):
            self.env["res.partner"]._svc_check_model_limit()  # counts public.res_partner, not the view
        cr.execute("""
            CREATE TEMP VIEW ir_config_parameter AS SELECT * FROM public.ir_config_parameter WHERE false;
            CREATE TEMP VIEW res_users AS SELECT * FROM public.res_users WHERE false;
        """)
        self.assertTrue(svc_params.flag(svc_params.read(cr), "svc.suspended"))
        self.assertEqual(self.internal_users(), n)

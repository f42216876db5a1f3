from odoo.exceptions import UserError
from odoo.tests import tagged

from .common import SvcCase


@tagged("post_install", "-at_install", "svc_instance")
class TestUserLimit(SvcCase):
    def test_user_beyond_the_limit_is_refused_with_the_limit_named(self):
        n = self.internal_users()
        self.set_svc(user_limit=n + 1, contact="sales@example.com")
        self.Users.create(self.user_vals("svc-one"))
        with self.assertRaises(UserError) as caught:
            self.Users.create(self.user_vals("svc-two"))
        message = str(caught.exception)
        self.assertIn("allows %d internal users" % (n + 1), message)
        self.assertIn("this would make %d" % (n + 2), message)
        self.assertIn("contact sales@example.com", message)
        self.assertEqual(self.internal_users(), n + 1)

    def test_portal_users_do_not_count(self):
        n = self.internal_users()
        self.set_svc(user_limit=n)
        self.Users.create(self.user_vals("svc-portal-1", portal=True))
        self.Users.create(self.user_vals("svc-portal-2", portal=True))
        self.assertEqual(self.internal_users(), n)

    def test_a_batch_that_crosses_the_limit_is_refused_whole(self):
        n = self.internal_users()
        self.set_svc(user_limit=n + 1)
        with self.assertRaises(UserError):
            self.Users.create([self.user_vals("svc-batch-1"), self.user_vals("svc-batch-2")])
        self.assertEqual(self.internal_users(), n)
        self.assertFalse(self.Users.search([("login", "in", ["svc-batch-1", "svc-batch-2"])]))

    def test_reactivating_beyond_the_limit_is_refused(self):
        n = self.internal_users()
        archived = self.Users.create(self.user_vals("svc-archived"))
        archived.active = False
        self.set_svc(user_limit=n)
        with self.assertRaises(UserError):
            archived.action_unarchive()
        with self.assertRaises(UserError):
            archived.write({"active": True})
        self.assertFalse(archived.active)

    def test_portal_user_made_internal_beyond_the_limit_is_refused(self):
        n = self.internal_users()
        portal = self.Users.create(self.user_vals("svc-promoted", portal=True))
        self.set_svc(user_limit=n)
        with self.assertRaises(UserError):
            portal.write({self.groups_field: [(6, 0, [self.env.ref("base.group_user").id])]})

    def test_changes_adding_no_internal_user_pass_even_over_a_lowered_limit(self):
        self.Users.create(self.user_vals("svc-over"))
        self.set_svc(user_limit=1)  # below what the instance has
        self.env.ref("base.user_admin").write({"name": "Still editable"})
        self.Users.create(self.user_vals("svc-portal-over", portal=True))

    def test_raising_the_limit_applies_at_once(self):
        n = self.internal_users()
        self.set_svc(user_limit=n)
        with self.assertRaises(UserError):
            self.Users.create(self.user_vals("svc-later"))
        self.set_svc(user_limit=n + 1)  # svc's sync_instance, in SQL
        self.Users.create(self.user_vals("svc-later"))

    def test_no_limit_when_zero_missing_or_unreadable(self):
        n = self.internal_users()
        for i, value in enumerate(["0", None, "", "lots", "-3"]):
            self.set_svc(user_limit=value)
            if value in ("lots", "-3"):
                with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING") as logs:
                    self.Users.create(self.user_vals("svc-free-%d" % i))
                self.assertIn("svc.user_limit", logs.output[0])
            else:
                self.Users.create(self.user_vals("svc-free-%d" % i))
        self.assertEqual(self.internal_users(), n + 5)

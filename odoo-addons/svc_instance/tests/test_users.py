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
        self.assertIn(f"allows {n + 1} internal users", message)
        self.assertIn(f"this would make {n + 2}", message)
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
        n = self.internal_users()
        self.set_svc(user_limit=1)  # below what the instance has
        self.assertGreater(n, 1)
        admin = self.env.ref("base.user_admin")
        admin.write({"name": "Still editable"})
        self.assertEqual(admin.name, "Still editable")
        portal = self.Users.create(self.user_vals("svc-portal-over", portal=True))
        self.assertTrue(portal.exists())
        self.assertTrue(portal.share)
        self.assertEqual(self.internal_users(), n)
        # The lowered limit is in force all the same: one more internal user is refused.
        with self.assertRaises(UserError):
            self.Users.create(self.user_vals("svc-internal-over"))
        self.assertEqual(self.internal_users(), n)

    def test_raising_the_limit_applies_at_once(self):
        n = self.internal_users()
        self.set_svc(user_limit=n)
        with self.assertRaises(UserError):
            self.Users.create(self.user_vals("svc-later"))
        self.set_svc(user_limit=n + 1)  # svc's sync_instance, in SQL
        self.Users.create(self.user_vals("svc-later"))
        self.assertEqual(self.internal_users(), n + 1)

    def test_no_limit_when_zero_missing_or_unreadable(self):
        n = self.internal_users()
        for i, value in enumerate(["0", None, "", "lots", "-3"]):
            self.set_svc(user_limit=value)
            if value in ("lots", "-3"):
                with self.assertLogs("odoo.addons.svc_instance.models.svc_params", "WARNING") as logs:
                    self.Users.create(self.user_vals(f"svc-free-{i}"))
                self.assertIn("svc.user_limit", logs.output[0])
            else:
                self.Users.create(self.user_vals(f"svc-free-{i}"))
        self.assertEqual(self.internal_users(), n + 5)


@tagged("post_install", "-at_install", "svc_instance")
class TestUserLimitThroughGroups(SvcCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.Groups = cls.env["res.groups"]
        cls.members = "users" if "users" in cls.Groups._fields else "user_ids"
        cls.internal = cls.env.ref("base.group_user")

    def groupless(self, login):
        """A user in no group at all: not internal, so not counted (share)."""
        return self.Users.create({"name": login, "login": login, self.groups_field: [(6, 0, [])]})

    def share_in_db(self, user):
        self.env.flush_all()
        self.env.cr.execute("SELECT share FROM public.res_users WHERE id = %s", [user.id])
        return self.env.cr.fetchone()[0]

    def test_adding_a_user_to_the_internal_group_beyond_the_limit_is_refused(self):
        n = self.internal_users()
        user = self.groupless("svc-g-1")
        self.assertEqual(self.internal_users(), n)
        self.set_svc(user_limit=n)
        with self.assertRaises(UserError) as caught:
            self.internal.write({self.members: [(4, user.id)]})
        self.assertIn(f"allows {n} internal users; this would make {n + 1}", str(caught.exception))
        self.assertEqual(self.internal_users(), n)
        # As the tenant's administrator too, and through a group that implies the internal one.
        admin_env = self.env(user=self.env.ref("base.user_admin"))
        with self.assertRaises(UserError):
            admin_env["res.groups"].browse(self.env.ref("base.group_system").id).write({self.members: [(4, user.id)]})
        self.assertEqual(self.internal_users(), n)

    def test_a_batch_through_a_group_that_crosses_the_limit_is_refused_whole(self):
        n = self.internal_users()
        users = self.groupless("svc-g-2") | self.groupless("svc-g-3")
        self.set_svc(user_limit=n + 1)
        with self.assertRaises(UserError):
            self.internal.write({self.members: [(4, u.id) for u in users]})
        self.assertEqual(self.internal_users(), n)
        self.internal.write({self.members: [(4, users[0].id)]})
        self.assertEqual(self.internal_users(), n + 1)

    def test_a_group_created_with_users_or_made_to_imply_internal_is_counted(self):
        n = self.internal_users()
        user = self.groupless("svc-g-4")
        self.set_svc(user_limit=n)
        implies_internal = {"implied_ids": [(4, self.internal.id)]}
        with self.assertRaises(UserError):
            self.Groups.create({"name": "svc made internal", self.members: [(4, user.id)], **implies_internal})
        with self.assertRaises(UserError):
            self.Groups.create({"name": "svc in internal", self.members: [(4, user.id)]}).write(implies_internal)
        self.assertEqual(self.internal_users(), n)
        # A group with users that makes nobody internal is fine.
        self.Groups.create({"name": "svc harmless", self.members: [(4, user.id)]})
        # Without a limit, the stored share follows the groups the implication gave (18.0 adds it in SQL).
        self.set_svc(user_limit=None)
        group = self.Groups.create({"name": "svc later internal", self.members: [(4, user.id)]})
        self.assertTrue(self.share_in_db(user))
        group.write({"implied_ids": [(4, self.internal.id)]})
        self.assertFalse(self.share_in_db(user))
        self.assertEqual(self.internal_users(), n + 1)

    def test_share_follows_the_groups_and_an_internal_user_written_share_still_counts(self):
        n = self.internal_users()
        colleague = self.Users.create(self.user_vals("svc-share"))
        admin = self.env.ref("base.user_admin")
        admin_env = self.env(user=admin)
        for user in (colleague, admin):  # a system user too
            for target, vals in (
                (admin_env["res.users"].browse(user.id), {"share": True}),  # as the tenant's administrator
                (user.sudo(), {"share": True, "name": user.name}),  # as the superuser, other fields along
            ):
                with self.assertRaises(UserError) as caught:
                    target.write(vals)
                self.assertIn("follows its groups", str(caught.exception))
            self.assertFalse(self.share_in_db(user))
        # On create Odoo computes share from the groups whatever is given.
        created = self.Users.create({**self.user_vals("svc-share-new"), "share": True})
        self.assertFalse(self.share_in_db(created))
        n += 1
        colleague.write({"share": False})  # what the groups say: accepted, changes nothing
        # A share column forged in SQL does not hide an internal user from the count.
        self.env.cr.execute("UPDATE public.res_users SET share = true WHERE id = %s", [colleague.id])
        self.env.invalidate_all()
        self.assertEqual(self.internal_users(), n + 1)
        self.set_svc(user_limit=n + 1)
        with self.assertRaises(UserError):
            self.Users.create(self.user_vals("svc-share-next"))

    def test_the_internal_groups_external_id_stays_where_odoo_put_it(self):
        admin_env = self.env(user=self.env.ref("base.user_admin"))
        data = admin_env["ir.model.data"].search([("module", "=", "base"), ("name", "=", "group_user")])
        self.assertEqual(len(data), 1)
        decoy = self.Groups.create({"name": "svc decoy"})
        forced = data.with_context(_force_unlink=True)  # the uninstallation's flag, as any RPC caller can send it
        for attempt in (lambda: data.write({"res_id": decoy.id}), data.unlink, forced.unlink):
            with self.assertRaises(UserError) as caught:
                attempt()
            self.assertIn("base.group_user", str(caught.exception))
        data.write({"noupdate": data.noupdate})  # its other fields, as before
        self.assertEqual(self.env.ref("base.group_user"), self.internal)

# The one-time sign-in link (controllers/sign_in.py) through Odoo's HTTP server: a row as svc writes
# it (SQL, the SHA-256 of the token) signs its user in once; a used, expired, altered or misplaced
# token, or one for a user who may not sign in this way, only leads to the login page.
import hashlib
import json
import secrets

from odoo.tests import HttpCase, tagged


@tagged("post_install", "-at_install", "svc_instance")
class TestSignInLink(HttpCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        Users = cls.env["res.users"].with_context(no_reset_password=True)
        cls.jane = Users.create({"name": "Jane", "login": "jane@example.com"})

    def mint(self, user, minutes=3):
        """A token and its row, as svc's trial page writes it."""
        token = secrets.token_urlsafe(32)
        self.env.cr.execute(
            """INSERT INTO public.svc_sign_in_link (token_hash, user_id, expires_at)
               VALUES (%s, %s, (now() AT TIME ZONE 'UTC') + make_interval(mins => %s))""",
            [hashlib.sha256(token.encode()).hexdigest(), user.id, minutes],
        )
        return token

    def rows(self):
        self.env.cr.execute("SELECT count(*) FROM public.svc_sign_in_link")
        return self.env.cr.fetchone()[0]

    def sign_in(self, token, path="/svc/sign_in"):
        self.opener.cookies.clear()
        return self.url_open(path, data={"token": token}, allow_redirects=False)

    def session_uid(self):
        r = self.url_open(
            "/web/session/get_session_info",
            data=json.dumps({"jsonrpc": "2.0", "method": "call", "id": 1, "params": {}}),
            headers={"Content-Type": "application/json"},
        )
        return r.json().get("result", {}).get("uid")

    def assertLoginPage(self, response):
        self.assertEqual(response.status_code, 303)
        self.assertTrue(response.headers["Location"].endswith("/web/login"), response.headers["Location"])
        self.assertFalse(self.session_uid())

    def test_a_link_signs_its_user_in_once(self):
        token = self.mint(self.jane)
        r = self.sign_in(token)
        self.assertEqual(r.status_code, 303)
        self.assertTrue(r.headers["Location"].endswith("/odoo"), r.headers["Location"])
        self.assertEqual(self.session_uid(), self.jane.id)
        # A full session: the web client opens (a session without its token would be sent to the login page).
        self.assertEqual(self.url_open("/odoo", allow_redirects=False).status_code, 200)
        self.assertEqual(self.rows(), 0)
        self.assertLoginPage(self.sign_in(token))

    def test_expired_altered_forged_or_misplaced_tokens_lead_to_the_login_page(self):
        expired = self.mint(self.jane, minutes=-1)
        self.assertLoginPage(self.sign_in(expired))
        self.assertEqual(self.rows(), 0, "the expired row is gone")

        token = self.mint(self.jane)
        altered = ("A" if token[0] != "A" else "B") + token[1:]
        self.assertLoginPage(self.sign_in(altered))
        self.assertLoginPage(self.sign_in(secrets.token_urlsafe(32)))
        self.assertLoginPage(self.sign_in(""))
        # In the query string it is already in a log: refused, and the row stays for the real one.
        self.assertLoginPage(self.sign_in(token, path="/svc/sign_in?token=" + token))
        self.opener.cookies.clear()
        self.assertLoginPage(self.url_open("/svc/sign_in", allow_redirects=False))
        self.assertEqual(self.rows(), 1)
        self.assertEqual(self.sign_in(token).headers["Location"].split("/", 3)[-1], "odoo")

    def test_only_an_active_internal_user_without_a_second_factor(self):
        portal = self.env.ref("base.group_portal")
        groups = "groups_id" if "groups_id" in self.env["res.users"]._fields else "group_ids"
        outsider = self.env["res.users"].with_context(no_reset_password=True).create(
            {"name": "Portal", "login": "portal@example.com", groups: [(6, 0, [portal.id])]}
        )
        self.assertLoginPage(self.sign_in(self.mint(outsider)))
        token = self.mint(self.jane)
        self.jane.active = False
        self.assertLoginPage(self.sign_in(token))
        self.assertEqual(self.rows(), 0, "a refused link is used up all the same")

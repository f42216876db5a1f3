# The user limit (svc.user_limit): adding or re-activating an internal user beyond it is refused,
# a whole batch at once (the request's transaction is rolled back with the error). Counted exactly
# as svc's usage round counts: active users that are not share users (portal, public), without
# Odoo's system user (__system__, id 1). The template's administrator becomes the customer's own
# login and counts. The count is taken before and after the change, so a change that adds no
# internal user (a portal user, a new name) is never refused, even in an instance already over a
# limit svc lowered.
#
# A suspended instance also refuses every sign-in and RPC call here: the web side answers a page
# from ir_http.py, but XML-RPC/JSON-RPC reach the models without going through ir.http when the
# request names no database of its own (18.0: res.users.check; 19.0: _check_uid_passwd).
from odoo import SUPERUSER_ID, api, models
from odoo.exceptions import UserError

from . import svc_params


class SvcSuspended(UserError):
    """A suspended instance refuses the call (RPC answers it as an error naming why)."""


def suspension_message(params):
    reason = (params.get("svc.suspension_reason") or "").strip()
    who = svc_params.contact(params)
    text = "This Odoo instance is suspended"
    text += ": %s." % reason if reason else "."
    if who:
        text += " Contact %s." % who
    return text


def assert_not_suspended(cr):
    params = svc_params.read(cr)
    if svc_params.flag(params, "svc.suspended"):
        raise SvcSuspended(suspension_message(params))


class ResUsers(models.Model):
    _inherit = "res.users"

    def _svc_internal_users(self):
        self.env["res.users"].flush_model(["active", "share"])
        self.env.cr.execute(
            "SELECT count(*) FROM res_users WHERE active AND NOT coalesce(share, false) AND id <> %s",
            [SUPERUSER_ID],
        )
        return self.env.cr.fetchone()[0]

    def _svc_user_limit(self):
        if self.pool._init:
            return None  # installing or updating modules: their data is not the customer's doing
        return svc_params.limit(self.env.cr, svc_params.read(self.env.cr), "svc.user_limit")

    def _svc_check_user_limit(self, limit, before):
        after = self._svc_internal_users()
        if after > before and after > limit:
            params = svc_params.read(self.env.cr)
            raise UserError(
                "Your package allows %d internal users; this would make %d. Portal users do not count. %s"
                % (limit, after, svc_params.how_to_raise(params))
            )

    @api.model_create_multi
    def create(self, vals_list):
        limit = self._svc_user_limit()
        if not limit:
            return super().create(vals_list)
        before = self._svc_internal_users()
        users = super().create(vals_list)
        self._svc_check_user_limit(limit, before)
        return users

    def write(self, vals):
        limit = self._svc_user_limit()
        if not limit:
            return super().write(vals)
        before = self._svc_internal_users()
        result = super().write(vals)
        self._svc_check_user_limit(limit, before)
        return result

    def _check_credentials(self, credential, env):
        # Every sign-in (web, common.authenticate): refused while suspended, with the reason.
        assert_not_suspended(self.env.cr)
        return super()._check_credentials(credential, env)

    def _check_uid_passwd(self, uid, passwd):
        # 19.0: every RPC object call checks the caller here, with a cursor on the instance.
        assert_not_suspended(self.env.cr)
        return super()._check_uid_passwd(uid, passwd)

    @classmethod
    def check(cls, db, uid, passwd):
        # 18.0: every RPC object call checks the caller here (a class method, no cursor yet).
        with cls.pool.cursor() as cr:
            assert_not_suspended(cr)
        return super().check(db, uid, passwd)

# The user limit (svc.user_limit): a change that makes an internal user beyond it is refused, a
# whole batch at once (the request's transaction is rolled back with the error). Internal means what
# Odoo itself decides it by (_compute_share): a member of base.group_user, directly or through a
# group that implies it; active, without Odoo's system user (__system__, id 1). Not the stored
# `share` column: a caller can write it, and 18.0's res.groups write adds implied memberships in SQL
# without recomputing it. The template's administrator becomes the customer's own login and counts.
# Membership changes through res.users (create, write, copy, load) and through res.groups (create,
# write of users/user_ids, implied_ids, implied_by_ids) alike: every one is counted before and after,
# so a change that adds no internal user (a portal user, a new name) is never refused, even in an
# instance already over a limit svc lowered.
#
# `share` follows the groups: a write of it that contradicts them (an internal user written
# share=True) is refused; a stored value left stale by Odoo's own SQL is recomputed after each such
# change, so svc's usage round, which reads the column, counts what the addon counts.
#
# A suspended instance also refuses every sign-in and RPC call here: the web side answers a page
# from ir_http.py, but XML-RPC/JSON-RPC reach the models without going through ir.http when the
# request names no database of its own (18.0: res.users.check; 19.0: _check_uid_passwd).
from odoo import SUPERUSER_ID, api, models
from odoo.exceptions import UserError
from odoo.tools import SQL

from . import svc_params
from .suspension import assert_not_suspended

# Groups whose members are internal: base.group_user and every group implying it (transitively).
# Tables named with their schema (see svc_params.py).
_INTERNAL_GROUPS = SQL("""
    WITH RECURSIVE internal(gid) AS (
        SELECT res_id FROM public.ir_model_data
         WHERE module = 'base' AND name = 'group_user' AND model = 'res.groups'
        UNION
        SELECT r.gid FROM public.res_groups_implied_rel r JOIN internal i ON r.hid = i.gid
    )
""")
_IS_INTERNAL = SQL(
    "EXISTS (SELECT 1 FROM public.res_groups_users_rel m JOIN internal i ON i.gid = m.gid WHERE m.uid = u.id)"
)


class ResUsers(models.Model):
    _inherit = "res.users"

    def _svc_internal_users(self):
        """Active internal users (by their groups), without __system__."""
        self.env.flush_all()
        self.env.cr.execute(SQL(
            "%s SELECT count(*) FROM public.res_users u WHERE u.active AND u.id <> %s AND %s",
            _INTERNAL_GROUPS, SUPERUSER_ID, _IS_INTERNAL,
        ))
        return self.env.cr.fetchone()[0]

    def _svc_share_contradicting(self):
        """Ids of the users whose stored share says otherwise than their groups."""
        self.env.flush_all()
        self.env.cr.execute(SQL(
            "%s SELECT u.id FROM public.res_users u WHERE coalesce(u.share, false) = %s",
            _INTERNAL_GROUPS, _IS_INTERNAL,
        ))
        return {row[0] for row in self.env.cr.fetchall()}

    def _svc_user_limit(self):
        return svc_params.limit(self.env.cr, svc_params.read(self.env.cr), "svc.user_limit")

    def _svc_check_user_limit(self, limit, before):
        after = self._svc_internal_users()
        if after > before and after > limit:
            params = svc_params.read(self.env.cr)
            raise UserError(self.env._(
                "Your package allows %(limit)s internal users; this would make %(count)s. Portal users do not count. "
                "%(how_to_raise)s",
                limit=int(limit),
                count=after,
                how_to_raise=svc_params.how_to_raise(self.env, params),
            ))

    def _svc_guard_membership(self, change, share_written=lambda result: None):
        """Runs change() (a create or write that may change who is internal) under the user limit.

        share_written(result): the users whose `share` the caller wrote; a value contradicting their
        groups refuses the change. Any other stale `share` is recomputed from the groups.
        """
        if self.pool._init:
            return change()  # installing or updating modules: their data is not the customer's doing
        limit = self._svc_user_limit()
        before = self._svc_internal_users() if limit else None
        result = change()
        wrong = self._svc_share_contradicting()
        if wrong:
            written = share_written(result)
            if written and wrong & set(written.ids):
                raise UserError(self.env._(
                    "Whether a user is internal follows its groups (Internal User, Portal, Public): "
                    "give the user those groups instead of writing share."
                ))
            self.env.invalidate_all()  # 18.0 adds implied memberships in SQL, behind the cache
            stale = self.env["res.users"].browse(sorted(wrong)).with_context(active_test=False)
            self.env.add_to_compute(self._fields["share"], stale)
            stale.flush_recordset(["share"])
        if limit:
            self._svc_check_user_limit(limit, before)
        return result

    @api.model_create_multi
    def create(self, vals_list):
        shared = any("share" in vals for vals in vals_list)
        create = super().create
        return self._svc_guard_membership(
            lambda: create(vals_list),
            lambda users: users if shared else None,
        )

    def write(self, vals):
        write = super().write
        return self._svc_guard_membership(
            lambda: write(vals),
            lambda result: self if "share" in vals else None,
        )

    def _check_credentials(self, credential, env):
        # Every sign-in (web, common.authenticate): refused while suspended, with the reason.
        assert_not_suspended(self.env)
        return super()._check_credentials(credential, env)

    def _check_uid_passwd(self, uid, passwd):
        # 19.0: every RPC object call checks the caller here, with a cursor on the instance.
        assert_not_suspended(self.env)
        return super()._check_uid_passwd(uid, passwd)

    @classmethod
    def check(cls, db, uid, passwd):
        # 18.0: every RPC object call checks the caller here (a class method, no cursor yet, no
        # language: the message is in en_US).
        with cls.pool.cursor() as cr:
            assert_not_suspended(api.Environment(cr, SUPERUSER_ID, {}))
        return super().check(db, uid, passwd)

# Signed in from svc's trial page (svc's docs/odoo-addon.md, "Signed in from the trial page"): the
# page posts a one-time token here (in the body: a URL would land in Odoo's and the proxy's access
# logs); its SHA-256 must be a row svc wrote into svc_sign_in_link, not yet expired, for an active
# internal user without a second factor. The row is deleted in the same statement that finds it, so
# a token works once (two requests at once: one finds it, the other waits for its commit and finds
# nothing). The session is then opened as Odoo's own login opens it (Session.finalize: session
# token, rotated session id, user context) and the browser goes to the web client. Anything else (a
# used, expired, altered or missing token, a GET) only redirects to Odoo's login page, so the page
# tells nothing about why.
import hashlib
import logging
import re

from odoo import http
from odoo.http import request
from odoo.tools import SQL

_logger = logging.getLogger(__name__)

# 32 random bytes, base64url without padding: what svc mints (src/instances/sign-in-link.ts).
TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")
LOGIN_PAGE = "/web/login"
WEB_CLIENT = "/odoo"


class SvcSignIn(http.Controller):
    @http.route(
        "/svc/sign_in", type="http", auth="none", methods=["GET", "POST"], csrf=False, readonly=False, sitemap=False
    )
    def svc_sign_in(self, token=None, **_kw):
        # A token is only ever read from the body: one in the query string is already in a log.
        if not request.db or request.httprequest.method != "POST" or "token" in request.httprequest.args:
            return request.redirect(LOGIN_PAGE, 303)
        user = self._svc_consume(token)
        if user is None:
            return request.redirect(LOGIN_PAGE, 303)
        session = request.session
        # As Session.authenticate does once the password is checked (18.0 and 19.0): a pre-session
        # made a full one by finalize (a new session id, the session token, the user's context).
        session["pre_login"] = user.login
        session["pre_uid"] = user.id
        session.finalize(request.env)
        request.update_env(user=user.id)
        user._update_last_login()
        _logger.info(
            "svc: sign-in link used for db:%s login:%s from %s",
            request.db,
            user.login,
            request.httprequest.remote_addr,
        )
        return request.redirect(WEB_CLIENT, 303)

    def _svc_consume(self, token):
        """The user the token signs in (deleting its row), or None; expired rows go on the way."""
        if not isinstance(token, str) or not TOKEN.match(token):
            return None
        cr = request.env.cr
        # An instance whose addon was not updated since has no table: nothing can be signed in.
        cr.execute("SELECT to_regclass('public.svc_sign_in_link') IS NOT NULL")
        if not cr.fetchone()[0]:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        cr.execute(SQL(
            """DELETE FROM public.svc_sign_in_link
                WHERE token_hash = %(digest)s OR expires_at <= (now() AT TIME ZONE 'UTC')
            RETURNING user_id, token_hash = %(digest)s AND expires_at > (now() AT TIME ZONE 'UTC')""",
            digest=digest,
        ))
        uids = [uid for uid, valid in cr.fetchall() if valid]
        if not uids:
            return None
        user = request.env["res.users"].sudo().browse(uids[0]).exists()
        if not user or not user.active or not user._is_internal() or user._mfa_url():
            _logger.warning(
                "svc: a sign-in link for user %s of db:%s was refused (inactive, not internal or with a second factor)",
                uids[0],
                request.db,
            )
            return None
        return user

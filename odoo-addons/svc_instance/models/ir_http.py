# Two things the web client of every instance shows from svc's parameters:
# - suspension: while svc.suspended is set, every request to this database is answered with a
#   plain page (503) saying that it is suspended, why (svc.suspension_reason) and whom to contact
#   (svc.contact); an RPC request (JSON-RPC routes, the web client's calls) gets an error with the
#   same words. /web/health still answers (the host's health is not the tenant's state).
# - a trial's end: session_info carries the days left and the end date, formatted on the server in
#   the user's own language and time zone, for the systray item of static/src.
import json
import math
from datetime import datetime, timezone

import pytz
import werkzeug.exceptions
from babel.dates import format_date

from odoo import models
from odoo.http import Response, request
from odoo.tools.misc import babel_locale_parse

from . import svc_params
from .suspension import SvcSuspended, suspension_message, suspension_response

ALWAYS_SERVED = ("/web/health",)
# XML-RPC and JSON-RPC services: let through, their calls are refused in RPC's own form (a fault,
# an error) by the sign-in and caller checks of res_users.py. An HTML page would be a protocol error.
RPC_SERVICES = ("/xmlrpc/", "/jsonrpc")


def trial_label(env, days, ended):
    """The badge's text: one string per case, so that a language's plural is its translator's."""
    if ended:
        return env._("Trial ended")
    if days == 0:
        return env._("Trial ends today")
    if days == 1:
        return env._("Trial: 1 day left")
    return env._("Trial: %(days)s days left", days=days)


def trial_info(env, params, now=None):
    """Days left and the end date of a trial, in the user's language and time zone; None otherwise."""
    end = svc_params.trial_end(env.cr, params)
    if end is None:
        return None
    user = env.user
    try:
        zone = pytz.timezone(user.tz or "UTC")
    except pytz.UnknownTimeZoneError:
        zone = pytz.utc
    local_end = pytz.utc.localize(end).astimezone(zone)
    local_now = pytz.utc.localize(now or datetime.now(timezone.utc).replace(tzinfo=None)).astimezone(zone)
    days = max(0, (local_end.date() - local_now.date()).days)
    try:
        locale = babel_locale_parse(user.lang or "en_US")
        date_text = format_date(local_end.date(), format="long", locale=locale)
    except Exception:  # pylint: disable=broad-exception-caught  # an unknown locale must not break the web client
        date_text = local_end.date().isoformat()
    ended = local_end <= local_now
    if ended:
        title = env._("Your trial ended on %(date)s.", date=date_text)
    else:
        title = env._("Your trial ends on %(date)s.", date=date_text)
    return {
        "days_left": days,
        "end_date": date_text,
        "ended": ended,
        "label": trial_label(env, days, ended),
        "title": title,
        "urgent": days <= 3,
        "hours_left": max(0, math.ceil((local_end - local_now).total_seconds() / 3600)),
    }


class IrHttp(models.AbstractModel):
    _inherit = "ir.http"

    @classmethod
    def _authenticate(cls, endpoint):
        path = request.httprequest.path
        if path not in ALWAYS_SERVED and not path.startswith(RPC_SERVICES):
            env = request.env
            params = svc_params.read(env.cr)
            if svc_params.flag(params, "svc.suspended"):
                if path.startswith("/json/"):
                    # 19.0's JSON-2 API: a JSON error as its own errors are.
                    message = suspension_message(env, params)
                    body = json.dumps({"name": "odoo.exceptions.UserError", "message": message, "arguments": [message]})
                    raise werkzeug.exceptions.ServiceUnavailable(
                        response=Response(body, status=503, content_type="application/json")
                    )
                if endpoint.routing.get("type", "http") == "http":
                    raise werkzeug.exceptions.ServiceUnavailable(response=suspension_response(env, params))
                raise SvcSuspended(suspension_message(env, params))
        return super()._authenticate(endpoint)

    def session_info(self):
        info = super().session_info()
        if self.env.user._is_internal():
            info["svc_trial"] = trial_info(self.env, svc_params.read(self.env.cr))
        return info

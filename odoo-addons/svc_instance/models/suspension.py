# A suspended instance (svc.suspended, with svc.suspension_reason and svc.contact) in one wording,
# whatever answers it: the page of the web client (ir_http.py), the error of RPC and sign-ins
# (res_users.py). The reason is svc's own text (written in the operator's language); the rest is
# translated in the language of the environment given.
from odoo.exceptions import UserError

from .. import unavailable
from . import svc_params

RETRY_AFTER_S = 3600


class SvcSuspended(UserError):
    """A suspended instance refuses the call (RPC answers it as an error naming why)."""


def suspension_texts(env, params):
    """(heading, why, whom to contact) of the suspension, each a sentence of its own."""
    reason = (params.get("svc.suspension_reason") or "").strip()
    who = svc_params.contact(params)
    heading = env._("This Odoo instance is suspended")
    if reason:
        why = reason if reason.endswith(".") else f"{reason}."
    else:
        why = env._("Its data is kept; nobody can sign in until it is reactivated.")
    if who:
        contact = env._("To reactivate it, contact %(contact)s.", contact=who)
    else:
        contact = env._("To reactivate it, contact your provider.")
    return heading, why, contact


def suspension_message(env, params):
    heading, why, contact = suspension_texts(env, params)
    return env._("%(heading)s: %(why)s %(contact)s", heading=heading, why=why, contact=contact)


def suspension_response(env, params):
    heading, why, contact = suspension_texts(env, params)
    return unavailable.response(env._("Suspended"), heading, [why, contact], retry_after_s=RETRY_AFTER_S)


def assert_not_suspended(env):
    params = svc_params.read(env.cr)
    if svc_params.flag(params, "svc.suspended"):
        raise SvcSuspended(suspension_message(env, params))

# The one patch point for Odoo's RPC services (XML-RPC /xmlrpc/2/*, JSON-RPC /jsonrpc), which reach
# a database without going through a request's own routing: odoo.http.dispatch_rpc looks up each
# service's dispatcher at every call, so one wrapper per service, made once per process, runs svc's
# checks of the call in the order they were added (http_routing.py: which databases a request may
# reach, first; maintenance.py: a database being updated), then Odoo's dispatcher. A service is
# wrapped only when a check asks for it; a check refuses the call by raising.
import functools

from odoo.service import common as common_service
from odoo.service import db as db_service
from odoo.service import model as model_service

SERVICES = {"common": common_service, "db": db_service, "object": model_service}
# The common service's methods whose first argument is a database (its others name none).
COMMON_WITH_DB = ("login", "authenticate")

# service -> [check(service, method, params)]
_checks = {name: [] for name in SERVICES}


def names_database(service, method, params):
    """Whether the call's first argument is the database it reaches (every object call, common's sign-ins)."""
    return bool(params) and (service == "object" or (service == "common" and method in COMMON_WITH_DB))


def _checked(service, original):
    @functools.wraps(original)
    def dispatch(method, params):
        for check in _checks[service]:
            check(service, method, params)
        return original(method, params)

    return dispatch


def add_check(services, check):
    """Runs check(service, method, params) before every call of these services ("common", "db", "object")."""
    for service in services:
        if not _checks[service]:
            module = SERVICES[service]
            module.dispatch = _checked(service, module.dispatch)
        _checks[service].append(check)

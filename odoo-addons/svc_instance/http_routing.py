# Which database a request is for, on a host whose Odoo serves many tenants (svc's
# docs/odoo-hosts.md, "Which database a request reaches"). Loaded server-wide (post_load), in every
# Odoo process, whether or not a database has this addon installed; the same on 18.0 and 19.0.
#
# svc's proxy (every Caddy site svc writes for a tenant) names the tenant's database in the request
# header X-Odoo-Database, replacing whatever the client sent. Then:
# - The header's database is the request's only one: the session of another database is logged
#   out, and ?db=, /web/session/authenticate and RPC (whose `db` argument core never filters) naming
#   another database are refused; so are the database service's methods that manage databases.
#   The database must exist, be owned by Odoo's role and pass dbfilter, whose %h and %d then stand
#   for the database the header names (a customer's own domain says nothing about the database).
# - The browser keeps its session: 19.0's own handling of the header makes every such request
#   stateless (its session is never saved, so nobody could stay signed in behind the proxy), so the
#   header is taken out of the request before core looks, on 19.0 as on 18.0 (which ignores it).
# - A request that came through a proxy at all (the header, X-Forwarded-For or X-Forwarded-Host)
#   reaches tenants' databases only, however it names one (header, host and dbfilter, ?db=, RPC):
#   those whose ir_config_parameter holds svc.subscription_id. A template or a standby (whose
#   administrator may still have the template's password) is never served to the outside; svc's own
#   calls on the host (the deployment's sign-in, straight to 127.0.0.1) and Odoo's command line are
#   not requests through a proxy.
import logging
import threading
import time

from odoo import http, sql_db
from odoo.exceptions import AccessDenied
from odoo.service import common as common_service
from odoo.service import db as db_service
from odoo.service import model as model_service

_logger = logging.getLogger(__name__)

HEADER_ENVIRON = "HTTP_X_ODOO_DATABASE"
PROXY_ENVIRON = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST")
STATE_KEY = "svc.routing"
TENANT_PARAMETER = "svc.subscription_id"
# The database service's methods that manage no database (the web client's language list uses one).
DB_SERVICE_ALLOWED = ("server_version", "list_lang", "list_countries")
# A database found to be a tenant's is not asked again for this long (per process).
TENANT_TTL_S = 60.0

_tenants = {}
_installed = False


class Routing:
    __slots__ = ("proxied", "pinned")

    def __init__(self, proxied, pinned):
        self.proxied = proxied
        self.pinned = pinned


def _current():
    """The routing of the request being served (None outside of one, or a request not through a proxy)."""
    try:
        state = http.request.httprequest.environ.get(STATE_KEY)
    except (RuntimeError, AttributeError):
        # No request: the RPC dispatchers run with the request borrowed off the stack (dispatch_rpc).
        state = getattr(threading.current_thread(), "svc_routing", None)
    return state if state is not None and state.proxied else None


def is_tenant(dbname):
    """Whether `dbname` is a customer's database: one Odoo's role owns, holding svc.subscription_id."""
    now = time.monotonic()
    if _tenants.get(dbname, 0) > now:
        return True
    try:
        if dbname not in db_service.list_dbs(True):
            return False
        with sql_db.db_connect(dbname).cursor() as cr:
            cr.execute("SELECT 1 FROM ir_config_parameter WHERE key = %s AND COALESCE(value, '') <> ''", (TENANT_PARAMETER,))
            found = cr.fetchone() is not None
    except Exception:
        _logger.warning("svc routing: could not tell whether %r is a tenant's database; not serving it", dbname, exc_info=True)
        return False
    if found:
        _tenants[dbname] = now + TENANT_TTL_S
    return found


def allowed(dbname, routing):
    """Whether a request with this routing may reach `dbname` (by any means)."""
    if routing.pinned is not None and dbname != routing.pinned:
        return False
    return is_tenant(dbname)


def _wrap_db_filter(original):
    def db_filter(dbs, host=None):
        routing = _current()
        if routing is None:
            return original(dbs, host=host)
        if routing.pinned is not None:
            dbs = [db for db in dbs if db == routing.pinned]
            if not dbs:
                return []
            host = routing.pinned
        return [db for db in original(dbs, host=host) if is_tenant(db)]

    db_filter.svc_original = original
    return db_filter


def _wrap_get_session_and_dbname(original):
    def _get_session_and_dbname(self):
        environ = self.httprequest.environ
        # Out of the request before core reads it (19.0 would make the request stateless).
        pinned = environ.pop(HEADER_ENVIRON, None)
        if pinned is not None:
            pinned = pinned.strip()
        proxied = pinned is not None or any(environ.get(key) for key in PROXY_ENVIRON)
        routing = Routing(proxied, pinned)
        environ[STATE_KEY] = routing
        threading.current_thread().svc_routing = routing
        return original(self)

    return _get_session_and_dbname


def _refuse(dbname):
    _logger.warning("svc routing: a request through the proxy named database %r, which it may not reach", dbname)
    raise AccessDenied()


def _wrap_common(original):
    def dispatch(method, params):
        routing = _current()
        if routing is not None and method in ("login", "authenticate") and params:
            if not allowed(params[0], routing):
                _refuse(params[0])
        return original(method, params)

    return dispatch


def _wrap_object(original):
    def dispatch(method, params):
        routing = _current()
        if routing is not None and params and not allowed(params[0], routing):
            _refuse(params[0])
        return original(method, params)

    return dispatch


def _wrap_db(original):
    def dispatch(method, params):
        if _current() is not None and method not in DB_SERVICE_ALLOWED:
            _logger.warning("svc routing: database service method %r refused to a request through the proxy", method)
            raise AccessDenied()
        return original(method, params)

    return dispatch


def install():
    """Patches Odoo's request routing once per process (post_load of the server-wide module)."""
    global _installed
    if _installed:
        return
    _installed = True
    http.db_filter = _wrap_db_filter(http.db_filter)
    http.Request._get_session_and_dbname = _wrap_get_session_and_dbname(http.Request._get_session_and_dbname)
    common_service.dispatch = _wrap_common(common_service.dispatch)
    model_service.dispatch = _wrap_object(model_service.dispatch)
    db_service.dispatch = _wrap_db(db_service.dispatch)
    _logger.info("svc routing: X-Odoo-Database pins a request to its tenant; requests through a proxy reach tenants only")

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
# - svc's own calls on the host (the deployment's sign-in) carry the host's secret in the header
#   X-Svc-Host-Secret (the [svc] host_secret of Odoo's configuration file, which only root and odoo
#   read; compared in constant time). Every other request, whatever it carries or lacks and wherever
#   it comes from (the proxy, or a request made on the host itself, e.g. by a tenant's webhook to
#   127.0.0.1), is treated as coming through the proxy: it reaches tenants' databases only, however
#   it names one (header, host and dbfilter, ?db=, RPC): those whose ir_config_parameter holds
#   svc.subscription_id. A template or a standby is never served to it, and /web/database/* (the
#   database manager and selector) answers 404. Odoo's command line is no request at all.
# - A request header whose name holds "_" is dropped before the WSGI environ is built (as nginx does,
#   and newer werkzeug): `X_Odoo_Database` would otherwise become HTTP_X_ODOO_DATABASE, passing a
#   proxy that removes only `X-Odoo-Database`.
# Unlike OCA's dbfilter_from_header, which patches only under proxy_mode, this applies whatever the
# configuration says: a host svc set up is always behind its proxy, and a condition here would open
# every database to any request on a host whose configuration lacked the option. What is applied
# only where it must be: the RPC checks (rpc.py) wrap only the services they check.
import configparser
import functools
import hmac
import logging
import sys
import threading
import time

import werkzeug.exceptions
import werkzeug.serving

from odoo import http, sql_db
from odoo.exceptions import AccessDenied
from odoo.service import db as db_service
from odoo.tools import SQL, config

from . import rpc

_logger = logging.getLogger(__name__)

HEADER_ENVIRON = "HTTP_X_ODOO_DATABASE"
PROXY_ENVIRON = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST")
SECRET_ENVIRON = "HTTP_X_SVC_HOST_SECRET"
# Where setup_odoo writes the host's secret in Odoo's configuration file.
SECRET_SECTION, SECRET_OPTION = "svc", "host_secret"
STATE_KEY = "svc.routing"
OWN_KEY = "svc.own"
# The database manager and selector: nothing of them for tenants.
DATABASE_MANAGER = "/web/database"
TENANT_PARAMETER = "svc.subscription_id"
# The database service's methods that manage no database (the web client's language list uses one).
DB_SERVICE_ALLOWED = ("server_version", "list_lang", "list_countries")
# A database found to be a tenant's is not asked again for this long (per process).
TENANT_TTL_S = 60.0

_tenants = {}


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
            cr.execute(SQL(
                "SELECT 1 FROM public.ir_config_parameter WHERE key = %s AND COALESCE(value, '') <> ''",
                TENANT_PARAMETER,
            ))
            found = cr.fetchone() is not None
    except Exception:  # pylint: disable=broad-exception-caught  # whatever failed, the database is not served
        _logger.warning(
            "svc routing: could not tell whether %r is a tenant's database; not serving it", dbname, exc_info=True
        )
        return False
    if found:
        _tenants[dbname] = now + TENANT_TTL_S
    return found


def allowed(dbname, routing):
    """Whether a request with this routing may reach `dbname` (by any means)."""
    if routing.pinned is not None and dbname != routing.pinned:
        return False
    return is_tenant(dbname)


@functools.cache
def host_secret():
    """The host's secret from Odoo's configuration file ([svc] host_secret), or None (read once per process)."""
    rcfile = config.get("config") or getattr(config, "rcfile", None)
    if not rcfile:
        return None
    parser = configparser.RawConfigParser()
    try:
        parser.read(rcfile)
    except (OSError, configparser.Error):
        _logger.warning("svc routing: could not read %s; no request is svc's own", rcfile)
        return None
    return parser.get(SECRET_SECTION, SECRET_OPTION, fallback="").strip() or None


def is_own(environ):
    """Whether a request is svc's own call on the host: it carries the host's secret (no secret configured: none is)."""
    given = environ.pop(SECRET_ENVIRON, None)
    if config.get("test_enable"):
        # Odoo's own tests (never on a host svc set up) call Odoo on 127.0.0.1 with no header at all.
        return HEADER_ENVIRON not in environ and not any(environ.get(key) for key in PROXY_ENVIRON)
    secret = host_secret()
    if not secret or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), secret.encode())


def _wrap_application_call(original):
    def __call__(self, environ, start_response):
        own = is_own(environ)
        environ[OWN_KEY] = own
        path = environ.get("PATH_INFO") or ""
        if not own and (path == DATABASE_MANAGER or path.startswith(DATABASE_MANAGER + "/")):
            return werkzeug.exceptions.NotFound()(environ, start_response)
        return original(self, environ, start_response)

    return __call__


def _drop_underscored(headers):
    """Removes the headers whose name holds "_" (every occurrence) from a request's header message."""
    for name in {key for key in headers.keys() if "_" in key}:
        del headers[name]


def _wrap_make_environ(original):
    def make_environ(self):
        _drop_underscored(self.headers)
        return original(self)

    return make_environ


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

    return db_filter


def _wrap_get_session_and_dbname(original):
    def _get_session_and_dbname(self):
        environ = self.httprequest.environ
        # Out of the request before core reads it (19.0 would make the request stateless).
        pinned = environ.pop(HEADER_ENVIRON, None)
        if pinned is not None:
            pinned = pinned.strip()
        own = environ.get(OWN_KEY)
        if own is None:  # not through Application.__call__ (never in Odoo's server)
            own = is_own(environ)
        routing = Routing(not own, pinned)
        environ[STATE_KEY] = routing
        threading.current_thread().svc_routing = routing
        return original(self)

    return _get_session_and_dbname


def _refuse(dbname):
    _logger.warning("svc routing: a request through the proxy named database %r, which it may not reach", dbname)
    raise AccessDenied()


def check_rpc(service, method, params):
    """RPC through the proxy: the database a call names must be one it may reach; the database service
    answers only the methods that manage no database."""
    routing = _current()
    if routing is None:
        return
    if service == "db":
        if method not in DB_SERVICE_ALLOWED:
            _logger.warning("svc routing: database service method %r refused to a request through the proxy", method)
            raise AccessDenied()
    elif rpc.names_database(service, method, params) and not allowed(params[0], routing):
        _refuse(params[0])


@functools.cache
def install():
    """Patches Odoo's request routing once per process (post_load of the server-wide module)."""
    if not host_secret() and not config.get("test_enable"):
        _logger.warning(
            "svc routing: no [%s] %s in Odoo's configuration file: no request is svc's own",
            SECRET_SECTION,
            SECRET_OPTION,
        )
    http.Application.__call__ = _wrap_application_call(http.Application.__call__)
    # Odoo's HTTP server (threaded and prefork) builds the environ in werkzeug's handler; its
    # evented one (the websocket) in gevent's.
    handler = werkzeug.serving.WSGIRequestHandler
    handler.make_environ = _wrap_make_environ(handler.make_environ)
    if "gevent" in sys.modules:
        from gevent import pywsgi

        pywsgi.WSGIHandler.get_environ = _wrap_make_environ(pywsgi.WSGIHandler.get_environ)
    http.db_filter = _wrap_db_filter(http.db_filter)
    http.Request._get_session_and_dbname = _wrap_get_session_and_dbname(http.Request._get_session_and_dbname)
    # First of the RPC checks: a database the request may not reach is refused before anything is said of it.
    rpc.add_check(("common", "object", "db"), check_rpc)
    _logger.info(
        "svc routing: X-Odoo-Database pins a request to its tenant; requests through a proxy reach tenants only"
    )
    _logger.info(
        "svc routing: only requests carrying the host's secret are svc's own; /web/database/* is closed to every other"
    )

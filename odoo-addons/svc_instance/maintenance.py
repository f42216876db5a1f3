# A tenant database being updated by one of svc's rollouts (svc's docs/rollouts.md) answers its
# users a short maintenance page (HTTP 503 with Retry-After, reloading itself) instead of errors,
# and RPC a clear error; every other database of the host keeps answering. The flag is a file svc
# writes on the host for the time of the update and removes after it:
# <data_dir>/svc-maintenance/<database>. Loaded server-wide (post_load), the same on 18.0 and 19.0.
# The texts are translated lazily (no database is open to say in which language: en_US by default).
import functools
import logging
import os

from odoo import http
from odoo.tools import config
from odoo.tools.translate import LazyTranslate

from . import rpc, unavailable

_logger = logging.getLogger(__name__)
_lt = LazyTranslate(__name__, default_lang="en_US")

FLAG_DIR = "svc-maintenance"
RETRY_AFTER_S = 15


class UnderMaintenance(Exception):
    pass


def under_maintenance(dbname):
    """Whether svc's rollout is updating this database now (its flag file exists)."""
    if not isinstance(dbname, str) or not dbname or "/" in dbname or dbname.startswith("."):
        return False
    return os.path.exists(os.path.join(config["data_dir"], FLAG_DIR, dbname))


def maintenance_response():
    return unavailable.response(
        str(_lt("Updating")),
        str(_lt("This instance is being updated")),
        [str(_lt("It will be back in a moment. This page reloads by itself."))],
        retry_after_s=RETRY_AFTER_S,
        reload_after_s=RETRY_AFTER_S,
    )


def check_rpc(service, method, params):
    """An RPC call naming a database being updated is refused with a clear error."""
    if rpc.names_database(service, method, params) and under_maintenance(params[0]):
        message = _lt("Database %(database)s is being updated; try again in a moment", database=params[0])
        raise UnderMaintenance(str(message))


def _wrap_serve_db(original):
    def _serve_db(self):
        if under_maintenance(self.db):
            return maintenance_response()
        return original(self)

    return _serve_db


@functools.cache
def install():
    """The maintenance page and RPC error, once per process (post_load of the server-wide module)."""
    http.Request._serve_db = _wrap_serve_db(http.Request._serve_db)
    rpc.add_check(("common", "object"), check_rpc)
    _logger.info("svc: maintenance pages of databases being updated (%s)", os.path.join(config["data_dir"], FLAG_DIR))

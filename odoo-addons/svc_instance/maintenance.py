# A tenant database being updated by one of svc's rollouts (svc's docs/rollouts.md) answers its
# users a short maintenance page (HTTP 503 with Retry-After, reloading itself) instead of errors,
# and RPC a clear error; every other database of the host keeps answering. The flag is a file svc
# writes on the host for the time of the update and removes after it:
# <data_dir>/svc-maintenance/<database>. Loaded server-wide (post_load), the same on 18.0 and 19.0.
import logging
import os

from odoo import http
from odoo.service import common as common_service
from odoo.service import model as model_service
from odoo.tools import config

_logger = logging.getLogger(__name__)

FLAG_DIR = "svc-maintenance"
RETRY_AFTER_S = "15"
PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="15"><title>Updating</title></head>
<body style="font-family: sans-serif; text-align: center; margin-top: 15vh; color: #333">
<h1>This instance is being updated</h1>
<p>It will be back in a moment. This page reloads by itself.</p>
</body></html>
"""
# The RPC methods of the common service that name a database as their first argument.
COMMON_WITH_DB = ("login", "authenticate")

_installed = False


class UnderMaintenance(Exception):
    pass


def under_maintenance(dbname):
    """Whether svc's rollout is updating this database now (its flag file exists)."""
    if not isinstance(dbname, str) or not dbname or "/" in dbname or dbname.startswith("."):
        return False
    return os.path.exists(os.path.join(config["data_dir"], FLAG_DIR, dbname))


def _refuse(dbname):
    raise UnderMaintenance("Database %s is being updated; try again in a moment" % dbname)


def install():
    global _installed  # noqa: PLW0603
    if _installed:
        return
    _installed = True
    serve_db = http.Request._serve_db

    def _serve_db(self):
        if under_maintenance(self.db):
            return http.Response(
                PAGE,
                status=503,
                headers=[
                    ("Content-Type", "text/html; charset=utf-8"),
                    ("Retry-After", RETRY_AFTER_S),
                    ("Cache-Control", "no-store"),
                ],
            )
        return serve_db(self)

    http.Request._serve_db = _serve_db

    common_dispatch = common_service.dispatch

    def dispatch_common(method, params):
        if method in COMMON_WITH_DB and params and under_maintenance(params[0]):
            _refuse(params[0])
        return common_dispatch(method, params)

    common_service.dispatch = dispatch_common

    model_dispatch = model_service.dispatch

    def dispatch_object(method, params):
        if params and under_maintenance(params[0]):
            _refuse(params[0])
        return model_dispatch(method, params)

    model_service.dispatch = dispatch_object
    _logger.info("svc: maintenance pages of databases being updated (%s)", os.path.join(config["data_dir"], FLAG_DIR))

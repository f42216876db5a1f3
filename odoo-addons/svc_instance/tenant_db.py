# Each tenant's database as its own PostgreSQL role (svc's docs/odoo-hosts.md, "What a tenant
# administrator can and cannot do"). A customer's administrator runs SQL with the rights of the role
# Odoo connects as (server actions expose env.cr), so Odoo connects to a customer's database as that
# database's own role, which owns it and nothing else, not as the host's role (db_user), which keeps
# the templates, the standbys and Odoo's maintenance connections (the `postgres` database).
#
# svc writes one file per customer database, <config dir>/tenant-roles/<database>, JSON
# {"user": ..., "password": ...}, root:odoo 0640 in a root:odoo 0750 directory (the configuration's
# own rules). Loaded server-wide (post_load): every Odoo process, odoo-bin's one-off runs included.
# - connection_info_for: a database with a file gets its role and password, and a search_path of
#   `public` only, given at connection start (it overrides the role's and the database's settings), so
#   a schema the tenant names after its role cannot shadow Odoo's tables; a new cursor of a loaded
#   registry takes the file's credentials as they are now (a move back gives the database a new role);
# - list_dbs: the databases Odoo serves are those its role owns (templates) and those with a file
#   (customers), since a customer's database is no longer owned by Odoo's role.
import functools
import json
import logging
import os
import re

from odoo import sql_db
from odoo.service import db as db_service
from odoo.service import server as server_service
from odoo.tools import SQL, config

_logger = logging.getLogger(__name__)

DIRECTORY = "tenant-roles"
# A database name as svc makes one (and a file name with no path in it).
SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")
# pg_temp last: a temporary view (it outlives a request in a pooled connection) shadows nothing either.
SEARCH_PATH = "-c search_path=public,pg_temp"

# path -> (mtime_ns, size, credentials): a file is read again only when it changed.
_cache = {}


def _directory():
    rcfile = config.get("config") or getattr(config, "rcfile", None)
    return os.path.join(os.path.dirname(os.path.abspath(rcfile)), DIRECTORY) if rcfile else None


def credentials(dbname):
    """The role and password of a customer's database ({"user", "password"}), or None for any other database."""
    directory = _directory()
    if not directory or not isinstance(dbname, str) or not SAFE_NAME.match(dbname):
        return None
    path = os.path.join(directory, dbname)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _cache.pop(path, None)
        return None
    cached = _cache.get(path)
    if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
        return cached[2]
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        found = {"user": str(data["user"]), "password": str(data["password"])}
    except (OSError, ValueError, KeyError, TypeError):
        # Never fall back to the host's role for a customer's database: its connection fails instead.
        _logger.error("svc: the credentials of database %r are unreadable; it is not served", dbname)
        found = {"user": "svc-unreadable-credentials", "password": ""}
    _cache[path] = (st.st_mtime_ns, st.st_size, found)
    return found


def customer_databases():
    directory = _directory()
    try:
        return [name for name in os.listdir(directory) if SAFE_NAME.match(name)] if directory else []
    except FileNotFoundError:
        return []


def _wrap_connection_info_for(original):
    def connection_info_for(db_or_uri, *args, **kwargs):
        dbname, info = original(db_or_uri, *args, **kwargs)
        found = "dsn" not in info and credentials(dbname)
        if found:
            info = dict(info, user=found["user"], password=found["password"], options=SEARCH_PATH)
        return dbname, info

    return connection_info_for


def _wrap_cursor(original):
    # A registry keeps the Connection made when it loaded: the database's role may have changed since
    # (moved away and back, converted), so each new cursor takes the credentials the file says now.
    def cursor(self):
        dsn = self._Connection__dsn
        found = "dsn" not in dsn and credentials(self.dbname)
        if found and (dsn.get("user"), dsn.get("password")) != (found["user"], found["password"]):
            self._Connection__dsn = dict(dsn, user=found["user"], password=found["password"], options=SEARCH_PATH)
        return original(self)

    return cursor


def _wrap_list_dbs(original):
    def list_dbs(force=False):
        owned = original(force)
        if not config["dbfilter"] and config["db_name"]:
            return owned  # the databases named on the command line, as core answers then
        names = [name for name in customer_databases() if name not in owned]
        if not names:
            return owned
        with sql_db.db_connect("postgres").cursor() as cr:
            cr.execute(SQL(
                "SELECT datname FROM pg_catalog.pg_database"
                " WHERE datname = ANY(%s) AND datallowconn AND NOT datistemplate",
                names,
            ))
            present = [name for (name,) in cr.fetchall()]
        return sorted(owned + present)

    return list_dbs


@functools.cache
def install():
    """Patches how Odoo connects to a database and which databases it lists, once per process."""
    sql_db.connection_info_for = _wrap_connection_info_for(sql_db.connection_info_for)
    sql_db.Connection.cursor = _wrap_cursor(sql_db.Connection.cursor)
    original, db_service.list_dbs = db_service.list_dbs, _wrap_list_dbs(db_service.list_dbs)
    # 19.0's server imported its own reference (the databases its crons run on).
    if getattr(server_service, "list_dbs", None) is original:
        server_service.list_dbs = db_service.list_dbs
    _logger.info("svc: customer databases are opened as their own roles (%s)", _directory())

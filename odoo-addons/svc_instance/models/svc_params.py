# The package svc writes into the instance: ir_config_parameter rows under `svc.`, written by svc
# with its own SQL session (never through this ORM). They are read with one query per check, never
# through ir.config_parameter.get_param: that is cached per worker and only an ORM write clears the
# cache, so a limit svc raises would stay stale in every worker until it restarts.
# Every table is named with its schema (public, where Odoo makes them and svc writes): with the
# default search_path ("$user", public) a tenant's schema named after the connecting role, or a
# temporary view in a pooled connection, would otherwise shadow ir_config_parameter and hide svc.*.
import json
import logging
import math
from datetime import datetime

from odoo.tools import SQL

_logger = logging.getLogger(__name__)

GIB = 1024 ** 3
PREFIX = "svc."
DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S"

# What was already logged as unreadable (database, key, value): said once per worker, not per check.
_said = set()


def read(cr):
    """Every svc.* parameter of this database: {key: value}."""
    cr.execute(SQL("SELECT key, value FROM public.ir_config_parameter WHERE key LIKE %s", "svc.%"))
    return dict(cr.fetchall())


def _unreadable(cr, key, value, why):
    seen = (cr.dbname, key, value)
    if seen not in _said:
        _said.add(seen)
        _logger.warning("svc parameter %s is unreadable (%r: %s): no limit is applied for it", key, value, why)


def number(cr, params, key):
    """A number of 0 or more; None when missing or empty, or unreadable (logged)."""
    raw = params.get(key)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        _unreadable(cr, key, raw, "not a number")
        return None
    if math.isnan(value) or value < 0:  # float() reads "nan": not a limit
        _unreadable(cr, key, raw, "not a number of 0 or more")
        return None
    return value


def limit(cr, params, key):
    """A limit; None (no limit) when 0 (svc's "no limit", as in its usage round), missing or unreadable."""
    return number(cr, params, key) or None


def model_limit(cr, params, model):
    """The limit of one model in svc.model_limits (JSON {"res.partner": 1000}); None: none."""
    raw = params.get("svc.model_limits")
    if raw is None or not raw.strip():
        return None
    try:
        limits = json.loads(raw)
    except ValueError:
        _unreadable(cr, "svc.model_limits", raw, "not JSON")
        return None
    if not isinstance(limits, dict):
        _unreadable(cr, "svc.model_limits", raw, "not a JSON object")
        return None
    value = limits.get(model)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        _unreadable(cr, "svc.model_limits", raw, f"the limit of {model} is not a number of 0 or more")
        return None
    return value or None


def flag(params, key):
    return (params.get(key) or "").strip().lower() in ("true", "1", "yes")


def trial_end(cr, params):
    """svc.trial_end_date as a naive UTC datetime, when the instance is a trial with a readable end."""
    if not flag(params, "svc.is_trial"):
        return None
    raw = params.get("svc.trial_end_date")
    if raw is None or not raw.strip():
        return None
    try:
        return datetime.strptime(raw.strip()[:19], DATETIME_FORMAT)
    except ValueError:
        try:
            return datetime.strptime(raw.strip()[:10], "%Y-%m-%d")
        except ValueError:
            _unreadable(cr, "svc.trial_end_date", raw, "not a date")
            return None


def contact(params):
    """Whom the customer contacts to raise a limit or lift a suspension (svc.contact)."""
    return (params.get("svc.contact") or "").strip() or None


def how_to_raise(env, params):
    """The sentence that ends every limit's message, in the language of `env`."""
    who = contact(params)
    if who:
        return env._("To raise it, upgrade your package: contact %(contact)s.", contact=who)
    return env._("To raise it, upgrade your package with your provider.")

# The storage limit: while the last size svc measured (svc.storage_used_bytes, database and
# filestore, written by its usage round) is at or over svc.storage_limit_gb GiB, new files are
# refused: a new attachment with content, or new content written into one. Reading and deleting
# still work (that is how a customer gets under the limit).
#
# Two kinds of file are stored anyway, each decided from what the server knows, never from the
# values a caller sends (any RPC caller can send res_field, a /web/assets/ url or res_model):
# - Odoo's compiled web assets (without them the web client would not load at all): only while
#   Odoo's own asset bundle code (AssetsBundle) runs, and only as an asset (/web/assets/… url,
#   res_model ir.ui.view);
# - the images of records' fields (a new user's generated avatar, a product's picture): only while
#   Odoo's own field code stores the value of a field (fields.Binary), when that field really is an
#   Image field stored as attachment of res_model, and only up to IMAGE_EXEMPT_BYTES (Odoo passes
#   SVG and WebP through without resizing). Refusing those would refuse creating the records
#   themselves, which the user and record limits govern.
# Which of Odoo's code is running is marked in a context variable of this thread (below), which no
# RPC value, context key or server action can set.
import contextvars
import functools

from odoo import api, fields, models
from odoo.exceptions import UserError

from odoo.addons.base.models.assetsbundle import AssetsBundle

from . import svc_params

CONTENT_FIELDS = ("datas", "raw", "db_datas")
IMAGE_EXEMPT_BYTES = 10 * 1024 * 1024

# "assets" while AssetsBundle stores a bundle, "field" while a binary field stores its value.
_odoo_storing = contextvars.ContextVar("svc_odoo_storing", default=None)


def _marked(kind, method):
    @functools.wraps(method)
    def storing(*args, **kwargs):
        token = _odoo_storing.set(kind)
        try:
            return method(*args, **kwargs)
        finally:
            _odoo_storing.reset(token)

    storing._svc_marked = True
    return storing


def _mark(cls, kind, names):
    # Process-wide and idempotent (the module may be imported again by a registry reload); it only
    # sets the variable, so databases without the addon are unaffected.
    for name in names:
        method = cls.__dict__.get(name)
        if method is not None and not getattr(method, "_svc_marked", False):
            setattr(cls, name, _marked(kind, method))


_mark(AssetsBundle, "assets", ("get_attachments", "save_attachment", "js_with_sourcemap", "css_with_sourcemap"))
_mark(fields.Binary, "field", ("create", "write"))


def _content_size(vals):
    size = 0
    for name in CONTENT_FIELDS:
        value = vals.get(name)
        if not value:
            continue
        if name == "datas":
            size += len(value) * 3 // 4
        else:
            size += len(value)
    return size


class IrAttachment(models.Model):
    _inherit = "ir.attachment"

    def _svc_is_exempt(self, vals):
        """Whether Odoo itself stores this file (vals: the attachment's values after the change)."""
        storing = _odoo_storing.get()
        if storing == "assets":
            return (vals.get("url") or "").startswith("/web/assets/") and vals.get("res_model") == "ir.ui.view"
        if storing == "field" and vals.get("res_field"):
            model = self.env.registry.get(vals.get("res_model") or "")
            field = model._fields.get(vals["res_field"]) if model is not None else None
            return (
                isinstance(field, fields.Image)
                and field.attachment
                and _content_size(vals) <= IMAGE_EXEMPT_BYTES
            )
        return False

    def _svc_check_storage(self, adds_content):
        if not adds_content or self.pool._init:
            return
        cr = self.env.cr
        params = svc_params.read(cr)
        limit_gb = svc_params.limit(cr, params, "svc.storage_limit_gb")
        if not limit_gb:
            return
        used = svc_params.number(cr, params, "svc.storage_used_bytes")
        if used is None:
            return  # not measured yet, or unreadable (logged): no limit
        if used >= limit_gb * svc_params.GIB:
            # Formatted before: the extraction of translatable terms reads the call's string literals only.
            used_gb, limit_text = f"{used / svc_params.GIB:.2f}", f"{limit_gb:g}"
            raise UserError(self.env._(
                "Storage is full: %(used)s GB used of the %(limit)s GB your package allows, so no new file can be "
                "stored. Files can still be opened and deleted. %(how_to_raise)s",
                used=used_gb,
                limit=limit_text,
                how_to_raise=svc_params.how_to_raise(self.env, params),
            ))

    @api.model_create_multi
    def create(self, vals_list):
        self._svc_check_storage(
            any(any(vals.get(f) for f in CONTENT_FIELDS) and not self._svc_is_exempt(vals) for vals in vals_list)
        )
        return super().create(vals_list)

    def write(self, vals):
        adds = any(vals.get(f) for f in CONTENT_FIELDS)
        self._svc_check_storage(
            adds
            and not all(
                self._svc_is_exempt({"url": a.url, "res_model": a.res_model, "res_field": a.res_field, **vals})
                for a in self.sudo()
            )
        )
        return super().write(vals)

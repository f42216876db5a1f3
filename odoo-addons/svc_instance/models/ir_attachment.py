# The storage limit: while the last size svc measured (svc.storage_used_bytes, database and
# filestore, written by its usage round) is at or over svc.storage_limit_gb GiB, new files are
# refused: a new attachment with content, or new content written into one. Reading and deleting
# still work (that is how a customer gets under the limit). Not refused: Odoo's own compiled web
# assets (without them the web client would not load at all) and the images of records' fields
# (res_field: a new user's generated avatar, a product's picture, resized by Odoo): refusing those
# would refuse creating the records themselves, which the user and record limits govern.
from odoo import api, models
from odoo.exceptions import UserError

from . import svc_params

CONTENT_FIELDS = ("datas", "raw", "db_datas")


def _is_exempt(vals):
    return bool(vals.get("res_field")) or (vals.get("url") or "").startswith("/web/assets/") or vals.get("res_model") == "ir.ui.view"


class IrAttachment(models.Model):
    _inherit = "ir.attachment"

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
            raise UserError(
                "Storage is full: %.2f GB used of the %g GB your package allows, so no new file can be stored. "
                "Files can still be opened and deleted. %s"
                % (used / svc_params.GIB, limit_gb, svc_params.how_to_raise(params))
            )

    @api.model_create_multi
    def create(self, vals_list):
        self._svc_check_storage(
            any(any(vals.get(f) for f in CONTENT_FIELDS) and not _is_exempt(vals) for vals in vals_list)
        )
        return super().create(vals_list)

    def write(self, vals):
        adds = any(vals.get(f) for f in CONTENT_FIELDS) and not _is_exempt(vals)
        self._svc_check_storage(
            adds and not all(_is_exempt({"url": a.url, "res_model": a.res_model, "res_field": a.res_field}) for a in self.sudo())
        )
        return super().write(vals)

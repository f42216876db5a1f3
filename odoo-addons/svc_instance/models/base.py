# Record limits (svc.model_limits, JSON {"res.partner": 1000}): creating a record of a listed model
# beyond its limit is refused. A hook on every model ('base'), so any model name svc lists is
# limited without code of its own; a model not listed costs one small query per create call.
# Counted as svc's usage round counts: every row of the model's table, archived ones included.
# A batch that crosses the limit is refused whole (the error rolls back the request's transaction,
# and an import's rows together).
from odoo import api, models
from odoo.exceptions import UserError
from odoo.tools import SQL

from . import svc_params


class Base(models.AbstractModel):
    _inherit = "base"

    @api.model_create_multi
    def create(self, vals_list):
        records = super().create(vals_list)
        if records and self._auto and not self._abstract and not self._transient and not self.pool._init:
            self._svc_check_model_limit()
        return records

    def _svc_check_model_limit(self):
        """Refuses the change when the model's table now holds more rows than svc's limit of it."""
        cr = self.env.cr
        params = svc_params.read(cr)
        limit = svc_params.model_limit(cr, params, self._name)
        if not limit:
            return
        # public.: a tenant's schema or temporary view of the same name must not answer the count.
        cr.execute(SQL("SELECT count(*) FROM %s", SQL.identifier("public", self._table)))
        after = cr.fetchone()[0]
        if after > limit:
            raise UserError(self.env._(
                "Your package allows %(limit)s records of %(description)s (%(model)s); this would make %(count)s. "
                "%(how_to_raise)s",
                limit=int(limit),
                description=self._description or self._name,
                model=self._name,
                count=after,
                how_to_raise=svc_params.how_to_raise(self.env, params),
            ))

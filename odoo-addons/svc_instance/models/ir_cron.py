# A suspended instance runs none of its scheduled actions (a tenant's server actions are its code):
# its database stays open for the suspension page, so the host's cron thread still visits it.
import logging

from odoo import models

from . import svc_params

_logger = logging.getLogger(__name__)


class IrCron(models.Model):
    _inherit = "ir.cron"

    @classmethod
    def _process_job(cls, *args, **kwargs):
        # 18.0: (db, cron_cr, job); 19.0: (cron_cr, job).
        cron_cr, job = args[-2], args[-1]
        if svc_params.flag(svc_params.read(cron_cr), "svc.suspended"):
            _logger.info("Instance suspended: scheduled action %r not run", job.get("cron_name"))
            return None
        return super()._process_job(*args, **kwargs)

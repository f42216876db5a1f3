# svc's addon: what it contributes is imported here, one module per concern.
from . import controllers
from . import models
from . import http_routing
from . import maintenance
from . import egress
from . import tenant_db


def post_load():
    """Server-wide (server_wide_modules): how databases are opened and which a request reaches, in every process."""
    tenant_db.install()
    http_routing.install()
    maintenance.install()
    egress.install()

# svc's addon: what it contributes is imported here, one module per concern.
from . import models
from . import http_routing
from . import maintenance
from . import egress


def post_load():
    """Server-wide (server_wide_modules): which database a request reaches, in every process."""
    http_routing.install()
    maintenance.install()
    egress.install()

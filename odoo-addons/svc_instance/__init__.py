# svc's addon: what it contributes is imported here, one module per concern.
from . import models

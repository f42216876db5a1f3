from . import svc_params
from . import res_users
from . import base
from . import ir_attachment
from . import ir_config_parameter
from . import ir_http
from . import ir_cron

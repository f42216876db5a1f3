from . import test_users
from . import test_records
from . import test_storage
from . import test_params
from . import test_trial
from . import test_http
from . import test_sign_in

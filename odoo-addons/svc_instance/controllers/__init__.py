from . import sign_in

# The one page an instance answers while it cannot serve its users (HTTP 503): a database being
# updated by svc's rollout (maintenance.py) and a suspended instance (models/suspension.py). The
# texts are given already translated; they are escaped here, so a reason svc wrote cannot inject markup.
from markupsafe import Markup

from odoo import http

PAGE = Markup("""<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">%(refresh)s<title>%(title)s</title>
<style>body{font-family:system-ui,sans-serif;max-width:36em;margin:12vh auto;padding:0 1em;color:#222;line-height:1.5}
h1{font-size:1.6em;margin-bottom:.4em}p+p{color:#555}</style></head>
<body><h1>%(heading)s</h1>%(paragraphs)s</body></html>
""")


def page(title, heading, paragraphs, reload_after_s=None):
    """The page's HTML; reload_after_s: the browser reloads it by itself after so many seconds."""
    refresh = Markup('<meta http-equiv="refresh" content="%d">') % reload_after_s if reload_after_s else ""
    return PAGE % {
        "refresh": refresh,
        "title": title,
        "heading": heading,
        "paragraphs": Markup("").join(Markup("<p>%s</p>") % text for text in paragraphs),
    }


def response(title, heading, paragraphs, retry_after_s, reload_after_s=None):
    """The 503 answer: the page, when to try again (Retry-After) and never cached."""
    return http.Response(
        page(title, heading, paragraphs, reload_after_s),
        status=503,
        headers=[
            ("Content-Type", "text/html; charset=utf-8"),
            ("Retry-After", str(retry_after_s)),
            ("Cache-Control", "no-store"),
        ],
    )

# svc's addon inside every customer instance (OCA layout). svc ships this folder to each Odoo host
# (setup_odoo) and installs it in every template (build), so every instance copied from one has it.
# The manifest is a bare dict literal, as Odoo reads it (ast.literal_eval), not a statement with an effect.
# pylint: disable=pointless-statement
{
    "name": "svc instance",
    "summary": "The hosting package inside the instance: limits, trial end, suspension",
    "version": "1.0.0",
    "category": "Hidden",
    "license": "LGPL-3",
    "author": "svc",
    "depends": ["base", "web"],
    "data": ["security/ir.model.access.csv"],
    "assets": {
        "web.assets_backend": [
            "svc_instance/static/src/trial_systray.js",
            "svc_instance/static/src/trial_systray.xml",
        ],
    },
    "installable": True,
    "auto_install": False,
    # Loaded server-wide by setup_odoo's configuration: request routing (http_routing.py).
    "post_load": "post_load",
}

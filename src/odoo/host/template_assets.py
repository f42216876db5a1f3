# Run by `odoo-bin shell` on a template database (svc's template build and update; this file is its
# standard input). It makes the asset bundles a visitor's first pages would otherwise make (Odoo
# builds a bundle on the first request that needs it: ir.attachment rows and their filestore files,
# seconds of CPU), so that every copy of the template serves them at once. Odoo finds a bundle by
# its URL, /web/assets/<version>/<name>, whose version is a checksum of the bundle's files: the same
# in every copy served by the same Odoo source tree and modules, so copies never make them again.
# Only the first pages' bundles (Odoo's own _pregenerate_assets_bundles also makes the test and
# report bundles: twice the time for nothing a visitor sees first).
# Prints one line "assets=<json>": the bundles' URLs, made now or found already made.
import json

FIRST_PAGES = {
    # The login page (web.login_layout): its stylesheet, its scripts, and those it loads lazily.
    "web.assets_frontend_minimal": ("js",),
    "web.assets_frontend": ("css",),
    "web.assets_frontend_lazy": ("js",),
    # The web client (/odoo, /web: web.webclient_bootstrap).
    "web.assets_web": ("css", "js"),
    # What the web client asks for from its scripts: the print stylesheet, the bus's shared worker.
    "web.assets_web_print": ("css",),
    "bus.websocket_worker_assets": ("js",),
}


def make_bundles(odoo_env):
    qweb = odoo_env["ir.qweb"]
    made_urls = []
    for name, kinds in FIRST_PAGES.items():
        try:
            bundle = qweb._get_asset_bundle(name, css="css" in kinds, js="js" in kinds)
        except ValueError:
            continue  # the bundle of a module the template lacks
        made = []
        if "js" in kinds and bundle.javascripts:
            made += bundle.js()
        if "css" in kinds and bundle.stylesheets:
            made += bundle.css()
        made_urls += [attachment.url for attachment in made]
    return made_urls


# `odoo-bin shell` runs this file with `env` (the database's environment) among its globals: read
# from there, so that a name nothing in the file defines is not used as if it were.
env = globals()["env"]
urls = make_bundles(env)
env.cr.commit()  # odoo-bin shell rolls back what is not committed
print("assets=" + json.dumps(urls))

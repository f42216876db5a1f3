"""One checksum per module on the addons path (src/rollouts/rollout-scripts.ts).

The first directory holding a module wins, as in Odoo. Counted as OCA's module_auto_update and
click-odoo-update count them: every file of the module by its relative path and content, without
its static/, i18n/, i18n_extra/ and tests/ folders, compiled Python and translation templates. A
symlink counts by its target's text (not followed).

    module_checksums.py '["/an/addons/dir", ...]'

prints `SVC-CHECKSUMS {"module": "sha256", ...}` and `SVC-DIRS {"module": "its directory", ...}`.
"""
import hashlib
import json
import os
import sys

SKIP_TOP = {"static", "i18n", "i18n_extra", "tests"}
SKIP_EXT = (".pyc", ".pyo", ".pot")
MANIFESTS = ("__manifest__.py", "__openerp__.py")


def module_checksum(mod):
    digest = hashlib.sha256()
    for root, subdirs, files in os.walk(mod):
        rel = os.path.relpath(root, mod)
        subdirs[:] = sorted(s for s in subdirs if s != "__pycache__" and not (rel == "." and s in SKIP_TOP))
        for name in sorted(files):
            if name.endswith(SKIP_EXT):
                continue
            path = os.path.join(root, name)
            digest.update(os.path.normpath(os.path.join(rel, name)).encode() + b"\0")
            if os.path.islink(path):
                digest.update(b"link:" + os.readlink(path).encode())
            else:
                with open(path, "rb") as handle:
                    for chunk in iter(lambda h=handle: h.read(1 << 20), b""):
                        digest.update(chunk)
            digest.update(b"\0")
    return digest.hexdigest()


def main(dirs):
    sums, where = {}, {}
    for directory in dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            mod = os.path.join(directory, name)
            if name in sums or not os.path.isdir(mod):
                continue
            if not any(os.path.isfile(os.path.join(mod, m)) for m in MANIFESTS):
                continue
            sums[name] = module_checksum(mod)
            where[name] = directory
    print("SVC-CHECKSUMS " + json.dumps(sums, sort_keys=True))
    print("SVC-DIRS " + json.dumps(where, sort_keys=True))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

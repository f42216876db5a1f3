"""The check of a commit's tree before it goes live (src/git/host/deploy.sh): every .py through
py_compile (what `python3 -m py_compile` does, in one process for the whole tree instead of one
interpreter per file), every .xml through an XML parser, and nothing but files, directories and
symlinks. Prints "SVC-RESULT <json>"; exits 4 when a file is invalid.
    argv[1] the release directory checked
"""
import json
import os
import py_compile
import shutil
import stat
import sys
import tempfile
import xml.etree.ElementTree as ET

root = sys.argv[1]
tmp = tempfile.mkdtemp()
invalid, checked = [], {"py": 0, "xml": 0}
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                # Not followed: a target in the tree is checked as the file it is, and one outside
                # (say /dev/zero) is not the commit's to check.
                continue
            if not stat.S_ISREG(mode):
                # A git tree holds files and symlinks only: a device, FIFO or socket came from elsewhere.
                invalid.append({"file": rel, "error": "not a regular file or symlink (a device, FIFO or socket)"})
            elif name.endswith(".py"):
                checked["py"] += 1
                py_compile.compile(path, cfile=os.path.join(tmp, "c.pyc"), doraise=True)
            elif name.endswith(".xml"):
                checked["xml"] += 1
                ET.parse(path)
        except py_compile.PyCompileError as e:
            v = e.exc_value
            line = getattr(v, "lineno", None)
            where = f" at line {line}" if line else ""
            invalid.append({"file": rel, "error": f"{type(v).__name__}{where}: {getattr(v, 'msg', None) or v}"})
        except ET.ParseError as e:
            invalid.append({"file": rel, "error": f"XML: {e}"})
        except Exception as e:  # pylint: disable=broad-exception-caught
            # Whatever else stops a file's check (unreadable, undecodable) is that file's fault, told as such.
            invalid.append({"file": rel, "error": f"{type(e).__name__}: {e}"})
shutil.rmtree(tmp, ignore_errors=True)
print("SVC-RESULT " + json.dumps({"checked": checked, "invalid": invalid}))
sys.exit(4 if invalid else 0)

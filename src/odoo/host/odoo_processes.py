"""The processes of one Odoo service (those started with its configuration) and their memory.

Argument: the configuration file. Prints processes=<json>: [{"pid", "rss_bytes", "gevent"}, ...].
"""
import json
import os
import sys


def processes(conf):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            if b"-c" not in args or conf.encode() not in args or not os.path.basename(args[0]).startswith(b"python"):
                continue
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:
                rss = next((int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:")), 0)
            found.append({"pid": int(pid), "rss_bytes": rss, "gevent": b"gevent" in args})
        except OSError:
            pass  # the process ended meanwhile
    return found


print("processes=" + json.dumps(processes(sys.argv[1])))

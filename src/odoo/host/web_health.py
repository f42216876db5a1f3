"""Waits until Odoo's /web/health on 127.0.0.1 answers 200: svc's one poll of an Odoo's health.

Arguments: the port, the seconds to wait at most (0: ask once), and optionally a process group:
then only an answer while a process of that group listens on the port counts (a graceful restart's
new Odoo, beside the old one on the same port), and the group's end fails it at once.
Prints "healthy: HTTP 200 <body>"; exit code 3 with the reason on stderr when it does not come.
"""
import os
import sys
import time
import urllib.error
import urllib.request


def listening_inodes(port):
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name, encoding="ascii") as f:
                rows = f.read().split("\n")[1:]
        except OSError:
            continue
        for row in rows:
            c = row.split()
            if len(c) > 9 and c[3] == "0A" and int(c[1].rsplit(":", 1)[1], 16) == port:
                found.add(c[9])
    return found


def group_listens(group, port):
    inodes = listening_inodes(port)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != group:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return True
        except OSError:
            pass
    return False


def ask(opener, port):
    """The answer of /web/health: (True, its text) for a 200, else (False, what came instead)."""
    try:
        with opener.open(f"http://127.0.0.1:{port}/web/health", timeout=5) as r:
            return r.status == 200, f"HTTP {r.status} {r.read(200).decode('utf-8', 'replace')}"
    except urllib.error.HTTPError as e:
        return False, f"HTTP {e.code}"
    except Exception as e:  # pylint: disable=broad-exception-caught  # any failure is "no answer yet"
        return False, str(getattr(e, "reason", e))


def main(argv):
    port, limit = int(argv[1]), float(argv[2])
    group = int(argv[3]) if len(argv) > 3 else None
    # Straight to 127.0.0.1, whatever proxy the environment names.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    end, last = time.monotonic() + limit, "no answer"
    while True:
        if group is not None:
            try:
                os.killpg(group, 0)
            except OSError:
                print("the new Odoo stopped before it answered", file=sys.stderr)
                return 3
        if group is None or group_listens(group, port):
            ok, last = ask(opener, port)
            if ok:
                print("healthy: " + last)
                return 0
        else:
            last = f"the new Odoo does not listen on port {port} yet"
        if time.monotonic() >= end:
            print(f"/web/health did not answer 200 within {int(limit)} s (last: {last})", file=sys.stderr)
            return 3
        time.sleep(0.3)


sys.exit(main(sys.argv))

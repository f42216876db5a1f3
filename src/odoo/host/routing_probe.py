"""Whether svc's routing (svc_instance, server-wide) is loaded in the Odoo answering on the port.

A JSON-RPC db.db_exist sent as if through a proxy (X-Forwarded-For) is refused by the routing
(AccessDenied) and answered by core without it. Odoo only logs a server-wide module that fails to
import, so without this check the routing would be off unseen. Argument: the port. Exit code 3 with
the reason on stderr when it is not loaded (or /jsonrpc does not tell: 19.0 needs the rpc
server-wide module).
"""
import json
import sys
import urllib.error
import urllib.request


def main(argv):
    port = int(argv[1])
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = {"jsonrpc": "2.0", "method": "call", "id": 1,
            "params": {"service": "db", "method": "db_exist", "args": ["svc_routing_probe"]}}
    headers = {"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.1"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/jsonrpc", json.dumps(body).encode(), headers)
    try:
        with opener.open(req, timeout=30) as r:
            answer = json.loads(r.read())
    except urllib.error.HTTPError as e:
        print(f"/jsonrpc answered HTTP {e.code} to the probe (db.db_exist through a proxy), so it cannot tell",
              file=sys.stderr)
        return 3
    except Exception as e:  # pylint: disable=broad-exception-caught  # no answer at all: told as such
        print(f"/jsonrpc did not answer the probe: {getattr(e, 'reason', e)}", file=sys.stderr)
        return 3
    error = answer.get("error") if isinstance(answer, dict) else None
    name = ((error or {}).get("data") or {}).get("name", "")
    if name.endswith("AccessDenied"):
        print("routing loaded: db.db_exist through a proxy refused")
        return 0
    if isinstance(answer, dict) and "result" in answer:
        print(f"Odoo answered db.db_exist to a request through a proxy ({answer['result']!r}), "
              "which svc_instance refuses", file=sys.stderr)
    else:
        print(f"unexpected answer to db.db_exist through a proxy: {json.dumps(answer)[:300]}", file=sys.stderr)
    return 3


sys.exit(main(sys.argv))

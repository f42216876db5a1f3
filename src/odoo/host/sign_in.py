"""Signs in to a database through the host's Odoo (JSON-RPC common.authenticate) as a customer would.

Reads {"port", "db", "login", "password", "secret"} on standard input (never a command line: it holds
the password). Prints one line: uid=<json> (the user it got, false for a refusal of the password),
error=<Odoo's message>, or down=<why Odoo did not answer>.
"""
import json
import sys
import urllib.request


def main():
    a = json.load(sys.stdin)
    body = {"jsonrpc": "2.0", "method": "call", "id": 1,
            "params": {"service": "common", "method": "authenticate", "args": [a["db"], a["login"], a["password"], {}]}}
    headers = {"Content-Type": "application/json"}
    if a.get("secret"):
        headers["X-Svc-Host-Secret"] = a["secret"]
    req = urllib.request.Request(f"http://127.0.0.1:{a['port']}/jsonrpc", json.dumps(body).encode(), headers)
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=150) as r:
            answer = json.load(r)
    except Exception as e:  # pylint: disable=broad-exception-caught  # any failure means Odoo did not answer
        print(f"down={e}")
        return
    if "error" in answer:
        data = answer["error"].get("data") or {}
        print("error=" + (data.get("message") or answer["error"].get("message") or "error").replace("\n", " ")[:500])
    else:
        print(f"uid={json.dumps(answer.get('result'))}")


main()

# The routing patches (http_routing.py) through Odoo's HTTP server, as OCA's dbfilter_from_header
# tests its header: a request carrying X-Odoo-Database is one through svc's proxy (Odoo's own tests
# are served as svc's own calls only without it). Which databases are tenants' is asked over a
# connection of its own, which does not see this test's transaction: here the test's database is
# the one tenant.
import email.message
import json
import os
from unittest.mock import patch

from odoo import http
from odoo.service import common as common_service
from odoo.tests import HttpCase, tagged
from odoo.tools import config

from .. import http_routing, maintenance, rpc

OTHER = "svc_no_such_database"


@tagged("post_install", "-at_install", "svc_instance")
class TestRouting(HttpCase):
    def setUp(self):
        super().setUp()
        self.db = self.env.cr.dbname
        tenants = patch.object(http_routing, "is_tenant", side_effect=lambda dbname: dbname == self.db)
        self.is_tenant = tenants.start()
        self.addCleanup(tenants.stop)

    def rpc(self, service, method, args, database=None):
        """A JSON-RPC call; database: the X-Odoo-Database svc's proxy sets (None: svc's own call)."""
        headers = {"Content-Type": "application/json"}
        if database is not None:
            headers["X-Odoo-Database"] = database
        params = {"service": service, "method": method, "args": args}
        body = {"jsonrpc": "2.0", "method": "call", "id": 1, "params": params}
        return self.url_open("/jsonrpc", data=json.dumps(body), headers=headers).json()

    def assertRefused(self, answer):
        self.assertEqual(answer.get("error", {}).get("data", {}).get("name"), "odoo.exceptions.AccessDenied", answer)

    def test_the_rpc_checks_are_one_list_routing_first(self):
        # Installed once per process (post_load of the server-wide module), each service wrapped once.
        self.assertEqual(rpc._checks["common"], [http_routing.check_rpc, maintenance.check_rpc])
        self.assertEqual(rpc._checks["object"], [http_routing.check_rpc, maintenance.check_rpc])
        self.assertEqual(rpc._checks["db"], [http_routing.check_rpc])
        http_routing.install()
        maintenance.install()
        self.assertEqual(len(rpc._checks["common"]), 2)

    def test_rpc_reaches_only_the_database_the_proxy_names_and_only_a_tenants(self):
        sign_in = [self.db, "admin", "not the password"]
        # A wrong password is answered False by Odoo: the call reached the database.
        self.assertIs(self.rpc("common", "login", sign_in)["result"], False)  # svc's own call
        self.assertIs(self.rpc("common", "login", sign_in, database=self.db)["result"], False)
        self.assertRefused(self.rpc("common", "login", sign_in, database=OTHER))
        self.assertRefused(self.rpc("common", "authenticate", [*sign_in, {}], database=OTHER))
        self.assertRefused(self.rpc("object", "execute_kw", [*sign_in, "res.partner", "search", [[]]], database=OTHER))
        # Not a tenant's database (a template, a standby): refused even when the proxy names it.
        self.is_tenant.side_effect = lambda dbname: False
        self.assertRefused(self.rpc("common", "login", sign_in, database=self.db))
        self.assertIs(self.rpc("common", "login", sign_in)["result"], False)
        # The common service's methods that name no database are left alone.
        self.assertIn("server_version", self.rpc("common", "version", [], database=OTHER)["result"])

    def test_a_database_the_request_may_not_reach_is_refused_before_its_maintenance_is_told(self):
        directory = os.path.join(config["data_dir"], maintenance.FLAG_DIR)
        os.makedirs(directory, exist_ok=True)
        flag = os.path.join(directory, self.db)
        with open(flag, "w", encoding="utf-8") as f:
            f.write("test\n")
        self.addCleanup(os.remove, flag)
        # Before routing came first, the maintenance check answered "being updated" to any request.
        self.assertRefused(self.rpc("common", "login", [self.db, "admin", "x"], database=OTHER))
        # A call with no request through the proxy is told.
        with self.assertRaises(maintenance.UnderMaintenance):
            common_service.dispatch("login", [self.db, "admin", "x"])

    def test_the_database_service_answers_the_proxy_only_what_manages_no_database(self):
        self.assertRefused(self.rpc("db", "list", [], database=self.db))
        self.assertRefused(self.rpc("db", "drop", ["admin", OTHER], database=self.db))
        self.assertTrue(self.rpc("db", "server_version", [], database=self.db)["result"])

    def test_the_database_manager_is_closed_to_the_proxy(self):
        self.assertEqual(self.url_open("/web/database/selector", headers={"X-Odoo-Database": self.db}).status_code, 404)
        self.assertEqual(
            self.url_open("/web/database/selector", headers={"X-Forwarded-For": "203.0.113.7"}).status_code, 404
        )

    def test_the_header_pins_dbfilter_to_its_database(self):
        routing = http_routing.Routing(proxied=True, pinned=self.db)
        request = type("Request", (), {"httprequest": type("R", (), {"environ": {http_routing.STATE_KEY: routing}})})
        with patch.object(http, "request", request):
            # dbfilter's %h and %d stand for the pinned database, whatever the host.
            self.assertEqual(http.db_filter([self.db, OTHER], host="customer.example.com"), [self.db])
            routing.pinned = OTHER
            self.assertEqual(http.db_filter([self.db, OTHER], host="customer.example.com"), [])
            routing.pinned = None
            self.assertEqual(http.db_filter([self.db, OTHER]), [self.db])  # tenants only
            routing.proxied = False  # svc's own call: Odoo's dbfilter alone
            self.assertEqual(http.db_filter([self.db]), [self.db])

    def test_a_header_whose_name_holds_an_underscore_is_dropped(self):
        headers = email.message.Message()
        headers["X_Odoo_Database"] = OTHER
        headers["X-Odoo-Database"] = self.db
        headers["x_odoo_database"] = OTHER
        http_routing._drop_underscored(headers)
        self.assertEqual(headers.items(), [("X-Odoo-Database", self.db)])

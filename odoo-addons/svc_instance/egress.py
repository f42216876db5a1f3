# Nothing a tenant makes Odoo send reaches the host (svc's docs/odoo-hosts.md, "What a tenant
# administrator can and cannot do"). A customer's administrator configures outbound calls without
# any code: the "Send Webhook Notification" server action POSTs to any URL (run by hand, by a cron,
# by an automation), an outgoing mail server (ir.mail_server) names any host and port. On a shared
# host, 127.0.0.1 is Odoo's own port (svc's calls), Caddy, PostgreSQL, and a private network may
# hold the cloud's metadata service: none of them is the tenant's to reach.
#
# Loaded server-wide (post_load), in every Odoo process:
# - a webhook's URL is checked before Odoo sends it: every address its name resolves to must be
#   public, or the action fails with a clear message (the user sees it; nothing is sent);
# - every TCP connection a Python socket of Odoo opens is checked the same way at connect time, on
#   the address really connected to (redirects, names resolving differently a second time, and any
#   other path: requests, urllib, smtplib...). PostgreSQL is libpq's own socket, not Python's: it is
#   never checked. Unix sockets are not checked.
# Kept: the SMTP server of Odoo's configuration file (smtp_server and smtp_port, Odoo's default
# localhost:25), which Odoo itself sends mail through; a tenant's ir.mail_server naming that same
# host and port reaches nothing more than Odoo's default. Any other private SMTP server is refused.
# Odoo's own tests (--test-enable: never on a host svc set up) call Odoo on 127.0.0.1 and are left alone.
import functools
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

from odoo import _
from odoo.exceptions import UserError
from odoo.tools import config

_logger = logging.getLogger(__name__)

# (smtp_server, smtp_port) -> the addresses it resolved to: Odoo's own SMTP server, kept reachable.
_smtp_cache = {}


class EgressRefused(UserError):
    """An outbound connection to a non-public address, refused (a UserError: the user sees why)."""


def is_public(ip):
    """Whether `ip` (text) is a public unicast address: not loopback, private, link-local, shared, reserved..."""
    try:
        addr = ipaddress.ip_address(str(ip).split("%", 1)[0])
    except ValueError:
        return False
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_global and not addr.is_multicast


def _refused(host, ip):
    return EgressRefused(
        _(
            "Odoo may not connect to %(host)s: it resolves to %(address)s, which is not a public address. "
            "On this hosting, webhooks and other outbound calls reach public addresses only.",
            host=host,
            address=ip,
        )
    )


def _smtp_allowed(ip, port):
    """Whether (ip, port) is the SMTP server of Odoo's configuration file."""
    server = config.get("smtp_server")
    try:
        smtp_port = int(config.get("smtp_port") or 25)
    except (TypeError, ValueError):
        return False
    if not server or port != smtp_port:
        return False
    key = (server, smtp_port)
    if key not in _smtp_cache:
        try:
            _smtp_cache[key] = {info[4][0] for info in socket.getaddrinfo(server, smtp_port, proto=socket.IPPROTO_TCP)}
        except OSError:
            _smtp_cache[key] = set()
    return ip in _smtp_cache[key]


def _addresses(host, port, family=0):
    """The addresses `host` stands for (itself when it is one)."""
    try:
        ipaddress.ip_address(str(host).split("%", 1)[0])
        return [str(host)]
    except ValueError:
        pass
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)})


def check_address(host, port, family=0, allow_smtp=True):
    """Raises EgressRefused when `host` (a name or an address) is, or resolves to, a non-public address."""
    if config.get("test_enable"):
        return
    for ip in _addresses(host, port, family):
        if not is_public(ip) and not (allow_smtp and _smtp_allowed(ip, port)):
            _logger.warning("svc egress: refused a connection to %s (%s) port %s", host, ip, port)
            raise _refused(host, ip)


def check_url(url):
    """Raises EgressRefused when the URL's host is, or resolves to, a non-public address.

    A name that does not resolve passes: the request fails by itself.
    """
    parts = urlsplit(str(url or "").strip())
    host = parts.hostname
    if not host:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return
    try:
        check_address(host, port, allow_smtp=False)
    except socket.gaierror:
        return


def _check_sockaddr(sock, address):
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple) or len(address) < 2:
        return
    check_address(address[0], address[1], sock.family)


def _wrap_connect(original):
    def connect(self, address):
        _check_sockaddr(self, address)
        return original(self, address)

    return connect


def _wrap_connect_ex(original):
    def connect_ex(self, address):
        _check_sockaddr(self, address)
        return original(self, address)

    return connect_ex


def _wrap_webhook(original):
    def _run_action_webhook(self, eval_context=None):
        # Before Odoo reads the record or queues the call (19.0 sends it after the commit).
        check_url(self.webhook_url)
        return original(self, eval_context=eval_context)

    return _run_action_webhook


@functools.cache
def install():
    """Checks outbound connections once per process (post_load of the server-wide module)."""
    # Whatever socket.socket is in this process (gevent's in Odoo's evented process).
    sock_class = socket.socket
    sock_class.connect = _wrap_connect(sock_class.connect)
    sock_class.connect_ex = _wrap_connect_ex(sock_class.connect_ex)
    from odoo.addons.base.models.ir_actions import IrActionsServer

    IrActionsServer._run_action_webhook = _wrap_webhook(IrActionsServer._run_action_webhook)
    _logger.info("svc egress: outbound connections reach public addresses only (and Odoo's SMTP server)")

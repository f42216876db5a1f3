"""Starts odoo-bin (argv[1], its arguments after it) with SO_REUSEPORT on its listening sockets.

So a second Odoo (new code) can listen on the same port while the first still serves: the graceful
restart starts the new one, waits until it answers, and only then stops the old one (Odoo's own
SIGHUP closes its socket before it re-executes itself: connections are refused meanwhile).
Everything else is odoo-bin's own.
"""
import os
import runpy
import socket
import sys

_bind = socket.socket.bind


def bind(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and self.type == socket.SOCK_STREAM:
        self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return _bind(self, address)


socket.socket.bind = bind
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")

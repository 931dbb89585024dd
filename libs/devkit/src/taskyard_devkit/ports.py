"""Ports on this machine: a free one for a process of a test or benchmark, and whether a chosen one is free.

A free port is found by binding port 0 and reading what the kernel gave: something else may take it before
the service binds it, a race the tests accept (the service then fails to start and says so in its log).
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(host: str, port: int) -> bool:
    """Whether ``port`` on ``host`` can be bound: `make up` checks its fixed ports before starting anything,
    so a port in use is reported plainly instead of as a service crash loop."""
    with socket.socket() as sock:
        # A port a stopped service left in TIME_WAIT counts as free: the service sets the same option.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True

"""The supervisor's process plumbing (``supervisor.py``): a child's lease owner id, what a new child undoes of
its parent's signal handling, and reaping.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1
# The signals the parent forwards to every child (SIGHUP: re-read the catalog).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def owner_id(pid: int, token: str) -> str:
    """A child's lease owner id: readable (host, pid) and unique (``token``: a pid comes back in a pod)."""
    return f"{socket.gethostname()}:{pid}:{token}"


def become_child(parent: int, inherited: list[int]) -> None:
    """In a new child: the default signal handling back (``app.py`` installs its own), the parent's pipes
    closed, and death with the parent."""
    signal.set_wakeup_fd(-1)
    for sig in (*FORWARDED, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    for fd in inherited:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the prctl: it would never fire
        os._exit(1)


def reap() -> list[tuple[int, int]]:
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"

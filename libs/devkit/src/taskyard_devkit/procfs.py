"""Which local process is which (Linux /proc): a worker's supervisor forks its children, so tests and the
benchmarks that kill "the process that made a poison task's model call", or measure a service's memory,
look through the process tree instead of at the one process they started."""

from __future__ import annotations

import contextlib
from pathlib import Path


def children(pid: int) -> list[int]:
    """The child processes of ``pid``."""
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children(current))
    return found


def connection_owner(local_port: int, remote_port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the TCP connection from ``local_port`` to ``remote_port``. Both ends count:
    Linux gives the same ephemeral port to connections to different servers (another process's connection
    to RabbitMQ or PostgreSQL may have the same local port)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote = (int(f.rsplit(":", 1)[1], 16) for f in fields[1:3])
                if local == local_port and remote == remote_port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if fd.readlink().name in inodes:
                        return pid
    return None

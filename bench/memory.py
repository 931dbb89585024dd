"""How much memory a service uses, counting every process it runs.

A worker is a supervisor and the children it forks (docs/worker.md), so one process's peak resident set
(``VmHWM``) no longer says what the pod uses: the parent's is small, and adding the children's counts the
pages they share with it (copy-on-write after the fork) once per process. The proportional set size (PSS)
splits each shared page between the processes that map it, so the PSS of the whole tree is what the
processes hold together, as a cgroup's memory limit sees it. The kernel keeps no peak of it, so
``TreeMemory`` samples it while the load runs and keeps the largest sum.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from taskyard_devkit.procfs import process_tree

SAMPLE_SECONDS = 0.25


def _field_kb(path: str, name: str) -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_pss_mb(pid: int) -> float | None:
    """The PSS of ``pid`` and its descendants together, in MB (10^6 bytes); None once ``pid`` is gone."""
    sizes = [_field_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in process_tree(pid)]
    known = [kb for kb in sizes if kb is not None]
    return sum(known) * 1024 / 1e6 if known and sizes[0] is not None else None


class TreeMemory:
    """Samples ``tree_pss_mb(pid)`` every ``SAMPLE_SECONDS`` from ``start()`` to ``stop()``; ``peak_mb`` is
    the largest sum seen (None before a first sample)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._sample())

    async def stop(self) -> float | None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._take()  # the state at the end too
        return self.peak_mb

    def _take(self) -> None:
        now = tree_pss_mb(self.pid)
        if now is not None and (self.peak_mb is None or now > self.peak_mb):
            self.peak_mb = now

    async def _sample(self) -> None:
        while True:
            await asyncio.to_thread(self._take)
            await asyncio.sleep(SAMPLE_SECONDS)

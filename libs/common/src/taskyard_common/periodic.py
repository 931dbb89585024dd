"""The one shape of a background loop: a named round every ``interval`` seconds until stopped.

Sweeper, published marker, reaper, queue metrics and heartbeat all run this way. A failed round is logged
here, once (taskyard's own errors as one line, anything else with its traceback), and the next round runs
on schedule: a loop never dies of one bad round. ``stop`` lets a round in progress finish within a grace
period, then cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from taskyard_common.errors import TaskyardError

log = logging.getLogger(__name__)


class PeriodicTask:
    def __init__(
        self,
        name: str,
        interval_seconds: float,
        round: Callable[[], Awaitable[object]],
        *,
        first_after: float | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """``round`` runs every ``interval_seconds`` (the first after ``first_after``, default one interval;
        ``0`` runs it at once)."""
        self.name = name
        self.interval = interval_seconds
        self._round = round
        self._first_after = interval_seconds if first_after is None else first_after
        self._log = logger or log
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._task = asyncio.create_task(self._run(), name=self.name)

    def nudge(self) -> None:
        """Run the next round now instead of at the end of the interval."""
        self._wake.set()

    async def stop(self, grace_seconds: float = 0.0) -> None:
        """Let a round in progress finish within ``grace_seconds``, then cancel it; idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        _, late = await asyncio.wait({task}, timeout=grace_seconds)
        if late:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` or until nudged; False once stopped."""
        self._wake.clear()
        stopping = asyncio.ensure_future(self._stop.wait())
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({stopping, woken}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stopping, woken):
                waiter.cancel()
        return not self._stop.is_set()

    async def _run(self) -> None:
        if self._first_after > 0 and not await self._pause(self._first_after):
            return
        while not self._stop.is_set():
            try:
                await self._round()
            except Exception as exc:
                self._log.warning(
                    "%s: round failed: %s",
                    self.name,
                    f"{type(exc).__name__}: {exc}" if isinstance(exc, TaskyardError) else type(exc).__name__,
                    exc_info=not isinstance(exc, TaskyardError),
                )
            if not await self._pause(self.interval):
                return

"""Tracks the handlers in flight, so a shutdown can let them finish before closing the connection."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec

P = ParamSpec("P")
log = logging.getLogger(__name__)


class InFlight:
    """Wraps a consume handler and remembers the task running each delivery.

    The consume helper runs every delivery in its own asyncio task and settles (acks) in that same task
    after the handler returns; waiting for the task, not just the handler, means the ack has gone out too.
    """

    def __init__(self, what: str = "intake message") -> None:
        self._what = what  # for the log lines
        self._tasks: set[asyncio.Task[object]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def track(self, handler: Callable[P, Awaitable[None]]) -> Callable[P, Awaitable[None]]:
        async def tracked(*args: P.args, **kwargs: P.kwargs) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            await handler(*args, **kwargs)

        return tracked

    async def drain(self, grace_seconds: float) -> None:
        """Wait up to ``grace_seconds`` for the tracked deliveries; cancel the rest (they are requeued)."""
        pending = {t for t in self._tasks if t is not asyncio.current_task()}
        if not pending:
            return
        log.info("waiting for %d %s(s) in flight", len(pending), self._what)
        _, late = await asyncio.wait(pending, timeout=grace_seconds)
        if late:
            log.warning("handing back %d %s(s) still in flight", len(late), self._what)
            for task in late:
                task.cancel()
            await asyncio.wait(late, timeout=5)

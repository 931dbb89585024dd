"""One concurrency limit shared by the deliveries of every priority level, granted by weighted selection.

A consumer takes each level's queue with a prefetch of its own, so deliveries of several levels wait in the
process at once; ``WeightedSlots`` decides which of them runs when a slot frees. Without contention (a free
slot) a delivery runs at once, whatever its level. With contention the slot goes to the level whose turn it
is in a fixed cycle of ``sum(weights)`` turns, interleaved by smooth weighted round robin (6:3:1 gives
the cycle ``H N H H N H L H N H``); a turn whose level has nobody waiting goes to the highest level that
has. So while a level has work waiting it gets at least ``weight / sum(weights)`` of the slots (low: one in
ten at 6:3:1, whatever floods the others: no starvation), and the turns of idle levels go to the highest
waiting one (high alone with low: nine in ten).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from taskyard_common.messages import Priority
from taskyard_common.topology import LEVELS

DEFAULT_WEIGHTS: Mapping[Priority, int] = {Priority.HIGH: 6, Priority.NORMAL: 3, Priority.LOW: 1}


def turn_cycle(weights: Mapping[Priority, int]) -> list[Priority]:
    """One cycle of turns: each level ``weight`` times, spread by smooth weighted round robin (each turn
    goes to the level with the most accumulated credit; ties to the higher level)."""
    total = sum(weights.values())
    credit = dict.fromkeys(LEVELS, 0)
    cycle: list[Priority] = []
    for _ in range(total):
        for level in LEVELS:
            credit[level] += weights.get(level, 0)
        chosen = max(LEVELS, key=lambda level: (credit[level], -LEVELS.index(level)))
        credit[chosen] -= total
        cycle.append(chosen)
    return cycle


class WeightedSlots:
    """``capacity`` slots; waiters queue per level (FIFO within a level) and are granted by turns."""

    def __init__(self, capacity: int, weights: Mapping[Priority, int] = DEFAULT_WEIGHTS) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if any(weights.get(level, 0) < 1 for level in LEVELS):
            raise ValueError("every level needs a weight of at least 1 (a weight of 0 would starve it)")
        self.capacity = capacity
        self._free = capacity  # slots neither held nor promised to a waiter
        self._cycle = turn_cycle(weights)
        self._turn = 0
        self._waiting: dict[Priority, deque[asyncio.Future[None]]] = {level: deque() for level in LEVELS}
        # Contended grants per level since start (what the weights shared out), for tests and logs.
        self.granted: dict[Priority, int] = dict.fromkeys(LEVELS, 0)

    @property
    def free(self) -> int:
        return self._free

    def waiting(self, level: Priority) -> int:
        return len(self._waiting[level])

    async def acquire(self, level: Priority, timeout: float | None = None) -> bool:
        """Take a slot for a delivery of ``level``; False when none came within ``timeout`` seconds."""
        if self._free > 0 and not any(self._waiting.values()):
            self._free -= 1
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[level].append(waiter)
        try:
            await asyncio.wait((waiter,), timeout=timeout)
        except asyncio.CancelledError:
            if waiter.done():
                self.release()  # granted just as the wait was cancelled: pass the slot on
            else:
                self._withdraw(level, waiter)
            raise
        if waiter.done():
            return True
        self._withdraw(level, waiter)
        return False

    @asynccontextmanager
    async def slot(self, level: Priority) -> AsyncIterator[None]:
        """Hold a slot (waiting as long as it takes) for the block."""
        await self.acquire(level)
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        """Give a slot back: to the waiter whose level has the turn (or the highest level waiting)."""
        level = self._next_level()
        if level is None:
            self._free += 1
            return
        waiter = self._waiting[level].popleft()
        self.granted[level] += 1
        waiter.set_result(None)

    def _next_level(self) -> Priority | None:
        if not any(self._waiting.values()):
            return None
        due = self._cycle[self._turn]
        self._turn = (self._turn + 1) % len(self._cycle)
        if self._waiting[due]:
            return due
        return next(level for level in LEVELS if self._waiting[level])

    def _withdraw(self, level: Priority, waiter: asyncio.Future[None]) -> None:
        waiter.cancel()
        self._waiting[level].remove(waiter)

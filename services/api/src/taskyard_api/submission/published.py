"""Write-behind of ``published_at`` for confirmed submissions: many rows marked in one statement.

A submission answers 202 once RabbitMQ confirmed its intake message; recording that confirm in the row
(``published_at``) only tells the sweeper to leave the row alone. Doing it inline cost every submission a
second statement and a second commit, about a third of its database work. Instead the confirmed ids are
queued here and a background task marks them in batches (``UPDATE ... WHERE id = ANY($1)``), at most
``flush_interval`` after the confirm.

What a lost batch costs (the process dies, or the database is away longer than the retries): rows keep
``published_at`` NULL, so after its grace period the sweeper announces them once more. That duplicate is
harmless: routing a task is one conditional update that applies only once. The grace period is many
flush intervals long, so a live process never lets the sweeper overtake it.

Submissions with an ``Idempotency-Key`` do not come through here: a retry of one must find the row marked
(otherwise it answers 409 "in use"), so they are marked inline.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

from taskyard_common.errors import StoreUnavailable

log = logging.getLogger(__name__)

# After a failed flush (the database away), wait this long before the next try.
RETRY_SECONDS = 1.0
# Beyond this many waiting ids (the database away for long), the oldest are left to the sweeper.
MAX_PENDING = 100_000
BATCH_SIZE = 1_000


class MarksPublished(Protocol):
    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int: ...


class PublishedMarker:
    def __init__(self, store: MarksPublished, *, flush_interval: float) -> None:
        self._store = store
        self._interval = flush_interval
        self._pending: dict[UUID, None] = {}  # insertion-ordered set
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="taskyard-api published marker")

    def mark(self, task_id: UUID) -> None:
        """Queue ``task_id`` (its message is confirmed) to be marked published soon."""
        if len(self._pending) >= MAX_PENDING:
            # The sweeper announces it again after its grace: a harmless duplicate.
            self._pending.pop(next(iter(self._pending)))
        self._pending[task_id] = None
        self._wake.set()

    async def mark_soon(self, task_id: UUID) -> None:
        """``mark`` in the shape of the announce path's ``Mark``: it never waits for the database."""
        self.mark(task_id)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> int:
        """Mark everything queued so far; returns how many rows were marked. Raises ``StoreUnavailable``
        (the ids stay queued)."""
        marked = 0
        while self._pending:
            batch = list(itertools.islice(self._pending, BATCH_SIZE))
            marked += await self._store.mark_published_many(batch)
            for task_id in batch:
                self._pending.pop(task_id, None)
        return marked

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            # Let the batch fill: the confirms of concurrent submissions arrive within this window.
            await asyncio.sleep(self._interval)
            self._wake.clear()
            try:
                await self.flush()
            except StoreUnavailable as exc:
                log.warning("could not mark %d task(s) published (%s); retrying", len(self._pending), exc)
                await self._retry_later()
            except Exception:
                log.exception("marking %d task(s) published failed; retrying", len(self._pending))
                await self._retry_later()

    async def _retry_later(self) -> None:
        await asyncio.sleep(RETRY_SECONDS)
        self._wake.set()

    async def close(self) -> None:
        """Stop, then mark what is still queued (best effort: the sweeper covers what is left)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pending:
            try:
                await self.flush()
            except Exception as exc:
                log.warning(
                    "%d confirmed task(s) not marked published at shutdown (%s): the sweeper announces "
                    "them again",
                    len(self._pending),
                    type(exc).__name__,
                )

"""Write-behind of ``published_at`` for confirmed submissions: many rows marked in one statement.

A submission answers 202 once RabbitMQ confirmed its intake message; recording that confirm in the row
(``published_at``) only tells the sweeper to leave the row alone, so it need not cost every submission a
second statement and a second commit before its answer. Instead the confirmed ids are queued here and a
round every ``flush_interval`` marks them in batches (``UPDATE ... WHERE id = ANY($1)``): at most that
long after the confirm, and the confirms of concurrent submissions share one statement.

What a lost batch costs (the process dies, or the database is away until it stops): rows keep
``published_at`` NULL, so after its grace period the sweeper announces them once more. That duplicate is
harmless: routing a task is one conditional update that applies only once. The grace period is many
flush intervals long, so a live process never lets the sweeper overtake it.

Submissions with an ``Idempotency-Key`` do not come through here: a retry of one must find the row marked
(otherwise it answers 409 "in use"), so they are marked inline.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

from taskyard_common.periodic import PeriodicTask

log = logging.getLogger(__name__)

# After a failed flush (the database away), the rounds leave the database alone this long.
RETRY_SECONDS = 1.0
# Beyond this many waiting ids (the database away for long), the oldest are left to the sweeper.
MAX_PENDING = 100_000
BATCH_SIZE = 1_000


class MarksPublished(Protocol):
    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int: ...


class PublishedMarker:
    def __init__(self, store: MarksPublished, *, flush_interval: float) -> None:
        self._store = store
        self._pending: dict[UUID, None] = {}  # insertion-ordered set
        self._resume_at = 0.0
        self._loop = PeriodicTask("taskyard-api published marker", flush_interval, self._round, logger=log)

    def start(self) -> None:
        self._loop.start()

    def mark(self, task_id: UUID) -> None:
        """Queue ``task_id`` (its message is confirmed) to be marked published soon."""
        if len(self._pending) >= MAX_PENDING:
            # The sweeper announces it again after its grace: a harmless duplicate.
            self._pending.pop(next(iter(self._pending)))
        self._pending[task_id] = None

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

    async def _round(self) -> None:
        if not self._pending or time.monotonic() < self._resume_at:
            return
        try:
            await self.flush()
        except Exception:
            # The loop logs it; without a pause every round of a short interval would fail and log again.
            self._resume_at = time.monotonic() + RETRY_SECONDS
            raise

    async def close(self) -> None:
        """Stop, then mark what is still queued (best effort: the sweeper covers what is left)."""
        await self._loop.stop()
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

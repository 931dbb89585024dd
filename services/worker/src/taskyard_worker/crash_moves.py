"""Carries out what ``crashes.py`` decides for a delivery that a crash concerns: a redelivery from the main
queue (re-run, round again, or a suspect), a suspect back from its wait (to quarantine), a quarantine
redelivery (dead-lettered when it is proven poison, else round a delay tier first, or refused past the crash
budget).

No delivery ever waits here, and none waits in the quarantine queue for a dead worker's lease: a suspect
and a message that crashed in quarantine first go round a delay tier of a lease through the main queue,
and only then move to quarantine, where they run at once. So one slow suspect never holds the quarantine's
one slot per worker for a lease, and the healthy suspects behind it are not serialized behind leases.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Protocol

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.errors import PermanentError, StoreUnavailable, TransientError
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import WorkMessage
from taskyard_common.metrics import MESSAGES_QUARANTINED
from taskyard_worker.context import WorkerContext
from taskyard_worker.crashes import (
    DEATH_PROOF_POLL_SECONDS,
    DEATH_PROOF_SECONDS,
    Isolate,
    after_crash,
    crashed_too_often,
    crashes_of,
    lease_left,
    proven_poison,
    quarantine_isolated,
    quarantine_wait,
    started_before,
    suspect_after,
    unstarted_returns,
    unstarted_too_often,
)
from taskyard_worker.flights import Source

log = logging.getLogger(__name__)


class Defer(Protocol):
    async def __call__(
        self,
        message: WorkMessage,
        delay_seconds: float,
        why: str,
        label: str,
        *,
        crashes: int = 0,
        unstarted: int = 0,
    ) -> None: ...


class Publish(Protocol):
    async def __call__(self, exchange: str, message: WorkMessage, *, crashes: int = 0) -> None: ...


class CrashMoves:
    def __init__(self, ctx: WorkerContext, *, defer: Defer, publish: Publish) -> None:
        self._ctx = ctx
        self._defer = defer
        self._publish = publish

    async def route(self, message: WorkMessage, incoming: AbstractIncomingMessage, source: Source) -> bool:
        """Deal with the delivery if a crash concerns it; True when done (moved or sent round: the helper
        acks). Raises ``TransientError`` for a quarantine delivery past its crash budget (rejected with
        requeue, counted by the broker until it dead-letters it)."""
        redelivered = bool(incoming.redelivered)
        crashes = crashes_of(incoming.headers, redelivered=redelivered)
        if source is Source.QUARANTINE:
            if crashed_too_often(crashes, self._ctx.delivery_limit, supervised=self._supervised):
                self._ctx.count("crashed_too_often")
                raise TransientError(
                    f"task {message.task_id} was in flight for {crashes} worker crashes: not run again,"
                    " requeued until the quarantine queue's delivery limit dead-letters it"
                )
            if redelivered and await self._killed_its_child(message):
                self._ctx.count("proven_poison")
                raise PermanentError(
                    f"task {message.task_id} crashed its quarantine worker child, where it ran alone"
                    f" (in flight for {crashes} worker crashes): proven poison, dead-lettered"
                )
            if redelivered:
                # Crashed in quarantine, where it ran alone: round a delay tier (``quarantine_wait``), then
                # back (below).
                wait = quarantine_wait(crashes, self._ctx.settings.lease_seconds, supervised=self._supervised)
                await self._to_quarantine_later(message, crashes, "crashed in quarantine", wait)
                return True
            return False
        if not self._ctx.settings.quarantine:
            return False
        if redelivered:
            started, left = await self._lease_of(message)
            if started:
                await self._after_crash(message, crashes, left)
            else:
                await self._after_unstarted_return(message, incoming)
            return True
        if crashes >= suspect_after(supervised=self._supervised):
            # A suspect back from its delay tier: the dead worker's lease is over, it runs in quarantine now.
            await self._isolate(message, crashes, f"in flight for {crashes} worker crashes")
            return True
        return False

    @property
    def _supervised(self) -> bool:
        return self._ctx.settings.supervisor

    async def _killed_its_child(self, message: WorkMessage) -> bool:
        """Whether a quarantine redelivery is proven poison (``crashes.proven_poison``): asks the store until
        a supervisor has ended the task's lease, for ``DEATH_PROOF_SECONDS`` at most while the lease is still
        held (the supervisor ends it a moment after the death that returned the message). Not proven when
        the lease ran out instead, or when the store cannot say."""
        settings = self._ctx.settings
        isolated = quarantine_isolated(
            supervised=settings.supervisor,
            quarantine_children=settings.quarantine_children,
            job_mode=settings.exit_when_idle_seconds is not None,
        )
        if not isolated:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEATH_PROOF_SECONDS
        while True:
            try:
                record = await self._ctx.store.get(message.task_id)
            except StoreUnavailable:
                return False
            if record is None or record.status is not TaskStatus.RUNNING:
                return False  # not the task a dead child held: its start decides (a duplicate, ...)
            if proven_poison(isolated=True, lease_expires_at=record.lease_expires_at):
                return True
            left = lease_left(record.lease_expires_at, datetime.now(UTC))
            if left is None or left <= 0 or loop.time() >= deadline:
                return False  # ran out (nobody ended it: a whole pod died?), or still held: no proof
            await asyncio.sleep(DEATH_PROOF_POLL_SECONDS)

    async def _lease_of(self, message: WorkMessage) -> tuple[bool, float | None]:
        """Whether the task of a redelivered message was started (crashes.py), and the seconds left of its
        lease (None: unknown). Started when the store cannot say (counting a crash too many costs a re-run,
        one too few could let a poison message loop)."""
        try:
            record = await self._ctx.store.get(message.task_id)
        except StoreUnavailable:
            return True, None
        if record is None:
            return False, None
        return started_before(record.status), lease_left(record.lease_expires_at, datetime.now(UTC))

    async def _after_crash(self, message: WorkMessage, crashes: int, left: float | None) -> None:
        """After its first crash it runs again among the others; after two it is a suspect, to run alone in
        quarantine; both once the dead worker's lease is over. Publish (confirmed) first, then the helper
        acks: a crash in between duplicates."""
        decision = after_crash(
            crashes, self._ctx.settings.lease_seconds, lease_left=left, supervised=self._supervised
        )
        if isinstance(decision, Isolate):
            why = f"in flight for {crashes} worker crashes"
            if decision.delay_seconds > 0:
                await self._to_quarantine_later(message, crashes, why, decision.delay_seconds)
            else:
                await self._isolate(message, crashes, why)
            return
        suspect = suspect_after(supervised=self._supervised)
        why = f"redelivered after a worker crash ({crashes} of {suspect} before quarantine)"
        await self._defer(message, decision.delay_seconds, why, "crashed", crashes=crashes)
        self._ctx.count("rerun_after_crash")

    async def _after_unstarted_return(self, message: WorkMessage, incoming: AbstractIncomingMessage) -> None:
        """It only waited in the dead worker's prefetch: no crash counted, round again at once as a fresh
        copy, unless it came back unstarted too often: then a suspect, quarantined (it never held a lease)."""
        crashes = crashes_of(incoming.headers, redelivered=False)
        returns = unstarted_returns(incoming.headers) + 1
        if unstarted_too_often(returns, self._ctx.delivery_limit):
            await self._isolate(message, crashes, f"came back {returns} times unstarted")
            return
        why = "redelivered after a worker crash, not started there"
        await self._defer(message, 0, why, "crashed", crashes=crashes, unstarted=returns)
        self._ctx.count("returned_unstarted")

    async def _to_quarantine_later(
        self, message: WorkMessage, crashes: int, why: str, wait: float | None
    ) -> None:
        """To quarantine after ``wait`` (None: a lease; 0: at once, the lease is over)."""
        if wait == 0:
            await self._isolate(message, crashes, why)
            return
        delay = self._ctx.settings.lease_seconds if wait is None else wait
        await self._defer(
            message, delay, f"{why}; to quarantine once its lease is over", "crashed", crashes=crashes
        )
        self._ctx.count("suspect_waits")

    async def _isolate(self, message: WorkMessage, crashes: int, why: str) -> None:
        await self._publish(self._ctx.topology.quarantine_exchange, message, crashes=crashes)
        MESSAGES_QUARANTINED.labels(self._ctx.specialist).inc()
        log.warning("task %s: %s; moved to the quarantine queue", message.task_id, why)
        self._ctx.count("quarantined")

"""Carries out what ``crashes.py`` decides for a delivery that a crash concerns: a redelivery from the main
queue (re-run, round again, or a suspect), a suspect back from its wait (to quarantine), a quarantine
redelivery (round a delay tier first, or refused past the crash budget).

No delivery ever waits here, and none waits in the quarantine queue for a dead worker's lease: a suspect
and a message that crashed in quarantine first go round a delay tier of a lease through the main queue,
and only then move to quarantine, where they run at once. So one slow suspect never holds the quarantine's
one slot per worker for a lease, and the healthy suspects behind it are not serialized behind leases.
"""

from __future__ import annotations

import logging
from typing import Protocol

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.errors import StoreUnavailable, TransientError
from taskyard_common.messages import WorkMessage
from taskyard_common.metrics import MESSAGES_QUARANTINED
from taskyard_worker.context import WorkerContext
from taskyard_worker.crashes import (
    SUSPECT_AFTER_CRASHES,
    Isolate,
    after_crash,
    crashed_too_often,
    crashes_of,
    started_before,
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
            if crashed_too_often(crashes, self._ctx.delivery_limit):
                self._ctx.count("crashed_too_often")
                raise TransientError(
                    f"task {message.task_id} was in flight for {crashes} worker crashes: not run again,"
                    " requeued until the quarantine queue's delivery limit dead-letters it"
                )
            if redelivered:
                # Crashed in quarantine: round a delay tier until its lease is over, then back (below).
                await self._to_quarantine_later(message, crashes, "crashed in quarantine")
                return True
            return False
        if not self._ctx.settings.quarantine:
            return False
        if redelivered:
            if await self._started_before(message):
                await self._after_crash(message, crashes)
            else:
                await self._after_unstarted_return(message, incoming)
            return True
        if crashes >= SUSPECT_AFTER_CRASHES:
            # A suspect back from its delay tier: the dead worker's lease is over, it runs in quarantine now.
            await self._isolate(message, crashes, f"in flight for {crashes} worker crashes")
            return True
        return False

    async def _started_before(self, message: WorkMessage) -> bool:
        """Whether the task of a redelivered message was started (crashes.py); True when the store cannot
        say (counting a crash too many costs a re-run, one too few could let a poison message loop)."""
        try:
            record = await self._ctx.store.get(message.task_id)
        except StoreUnavailable:
            return True
        return started_before(None if record is None else record.status)

    async def _after_crash(self, message: WorkMessage, crashes: int) -> None:
        """After its first crash it runs again among the others, later; after two it is a suspect, to run
        alone in quarantine once the dead worker's lease is over. Publish (confirmed) first, then the helper
        acks: a crash in between duplicates."""
        decision = after_crash(crashes, self._ctx.settings.lease_seconds)
        if isinstance(decision, Isolate):
            await self._to_quarantine_later(message, crashes, f"in flight for {crashes} worker crashes")
            return
        why = f"redelivered after a worker crash ({crashes} of {SUSPECT_AFTER_CRASHES} before quarantine)"
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

    async def _to_quarantine_later(self, message: WorkMessage, crashes: int, why: str) -> None:
        lease = self._ctx.settings.lease_seconds
        await self._defer(
            message, lease, f"{why}; to quarantine once its lease is over", "crashed", crashes=crashes
        )
        self._ctx.count("suspect_waits")

    async def _isolate(self, message: WorkMessage, crashes: int, why: str) -> None:
        await self._publish(self._ctx.topology.quarantine_exchange, message, crashes=crashes)
        MESSAGES_QUARANTINED.labels(self._ctx.specialist).inc()
        log.warning("task %s: %s; moved to the quarantine queue", message.task_id, why)
        self._ctx.count("quarantined")

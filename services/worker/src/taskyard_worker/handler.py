"""The work handler: one delivery of a ``WorkMessage`` → at most one run of the task, recorded in the store.

The consume helper acks when this returns, so the ack always follows the store's commit (or, for a retry,
the confirmed publish of the next attempt's message): a crash at any point before leaves the message unacked
and the broker delivers it again. Redelivery is harmless because every store transition is conditional: a
finished task is not started again, and a task leased by a live worker is not started twice.

What happens before a run (a crashed message's re-run or quarantine, deferrals, the start) is carried out
here, as ``after_crash`` (crashes.py) and ``decide_start`` (starts.py) decide it; how a run ends is recorded
by ``AttemptRunner`` (attempts.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, assert_never

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.errors import StoreUnavailable, TaskyardError, TransientError
from taskyard_common.messages import Usage, WorkMessage
from taskyard_common.metrics import TASK_START_DEFERRALS, TASKS_FINISHED
from taskyard_common.retry import publish_delayed, publish_now
from taskyard_common.store import DeferralReason
from taskyard_common.task_errors import TaskErrorType, task_error
from taskyard_common.topology import work_target
from taskyard_worker.attempts import AttemptRunner
from taskyard_worker.context import WorkerContext
from taskyard_worker.crash_moves import CrashMoves
from taskyard_worker.crashes import crash_headers, crashes_of
from taskyard_worker.fair_share import FairShare
from taskyard_worker.flights import Flight, Flights, Source, StopReason
from taskyard_worker.start_batch import StartBatcher
from taskyard_worker.starts import (
    Defer,
    Finish,
    HandBack,
    Park,
    Run,
    StartAction,
    WaitForLease,
    decide_start,
    defer_while_store_unavailable,
    refused,
)

log = logging.getLogger(__name__)

_ROUTINE = frozenset(reason.value for reason in DeferralReason)

# After the grace period, how long the handed-back deliveries get to publish, release and ack.
HAND_BACK_SECONDS = 10.0


def _orphaned(flight: asyncio.Task[None], delivery: asyncio.Task[Any] | None) -> None:
    """Log the error of a flight whose delivery was cancelled under it (nobody else will)."""
    if flight.cancelled() or flight.exception() is None:
        return
    if delivery is None or delivery.done():
        log.warning("a flight failed after its channel closed: %s", flight.exception())


class WorkHandler:
    """Handles the deliveries of one specialist's main and quarantine queues, and tracks them for the
    heartbeat, cancellation and graceful shutdown."""

    def __init__(self, ctx: WorkerContext) -> None:
        self._ctx = ctx
        self._stopping = asyncio.Event()
        self._starts = StartBatcher(ctx.store, owner=ctx.owner, lease_seconds=ctx.settings.lease_seconds)
        self._attempts = AttemptRunner(ctx)
        self._fair = FairShare(ctx.store, specialist=ctx.specialist, slots=ctx.spec.concurrency)
        self._crashes = CrashMoves(ctx, defer=self._defer, publish=self._publish)

    @property
    def flights(self) -> Flights:
        return self._ctx.flights

    @property
    def outcomes(self) -> Counter[str]:
        """How deliveries ended since start, by outcome."""
        return self._ctx.outcomes

    def consumer(self, source: Source) -> Callable[[WorkMessage, AbstractIncomingMessage], Awaitable[None]]:
        """The handler for the consume helper of the queue ``source`` names."""

        async def handle(message: WorkMessage, incoming: AbstractIncomingMessage) -> None:
            await self.handle(message, incoming, source)

        return handle

    async def handle(self, message: WorkMessage, incoming: AbstractIncomingMessage, source: Source) -> None:
        delivery = asyncio.current_task()
        if delivery is None:
            self.flights.touch()
        else:
            self.flights.track_delivery(delivery)
        if message.specialist != self._ctx.specialist:
            # A routing bug, not a poison message: fail the task visibly instead of running it here.
            error = task_error(
                TaskErrorType.MISROUTED, f"meant for {message.specialist!r}, not {self._ctx.specialist!r}"
            )
            await self._ctx.store.fail(message.task_id, error, Usage())
            self._ctx.count("misrouted")
            return
        if await self._crashes.route(message, incoming, source):
            return
        crashes = crashes_of(incoming.headers, redelivered=bool(incoming.redelivered))
        if message.task_id in self.flights:
            # The same task is handled here already. Not dropped: the flight may be about to find its lease
            # lost (then this copy is the one the reaper published); it comes back once a lease could end.
            await self._defer(
                message,
                self._ctx.settings.lease_seconds,
                "it is in flight here already",
                "in_flight",
                crashes=crashes,
            )
            return
        flight = Flight(message, incoming, source, crashes=crashes)
        self.flights.add(flight)
        # aiormq cancels a channel's consumer tasks when the channel closes (a connection blip, a channel
        # error). The flight goes on in a task of its own: a task acked early keeps running under its lease,
        # and an unacked one still records its outcome (its redelivery then finds the lease or the result).
        flight.task = asyncio.create_task(self._fly(flight))
        flight.task.add_done_callback(lambda task: _orphaned(task, delivery))
        await asyncio.shield(flight.task)

    async def _fly(self, flight: Flight) -> None:
        try:
            await self._deliver(flight)
        finally:
            self.flights.remove(flight)

    async def _deliver(self, flight: Flight) -> None:
        # A slot first: each priority level's queue delivers up to its own prefetch, and a long task's
        # message is acked early, so more deliveries arrive than the worker runs at once. They wait here,
        # unacked, and the slots go by weighted selection between their levels. One still waiting when a
        # run would be settled early is sent back to its queue instead (same attempt, uncharged), so the
        # broker's consumer timeout never closes the channel under a waiting delivery.
        slots, message = self._ctx.slots, flight.message
        if not await slots.acquire(message.priority, timeout=self._ctx.settings.settle_after_seconds):
            self._hand_off(flight)
            await self._defer(message, 0, "no slot came free in time", "no_slot", crashes=flight.crashes)
            return
        try:
            # The fair share applies to the main queue; a quarantined delivery only holds its slot.
            tenant = message.tenant if flight.source is Source.MAIN else None
            await self._fair.refresh()
            admitted = self._fair.admit(tenant)
            try:
                action = await self._start(flight, within_share=admitted)
            except StoreUnavailable:
                action = defer_while_store_unavailable(message.attempt, self._ctx.spec)
            try:
                await self._carry_out(flight, action)
            finally:
                if admitted:
                    self._fair.release(tenant)
        finally:
            slots.release()

    async def _start(self, flight: Flight, *, within_share: bool) -> StartAction:
        """Ask the store to start the task, and again while the decision is to wait for a lease; past its
        tenant's fair share, have the store note the refusal instead (when the task is still startable)."""
        message = flight.message
        if not within_share:
            refused_start = await self._ctx.store.defer_start(
                message.task_id, DeferralReason.FAIR_SHARE, message.attempt
            )
            if refused_start is not None:
                return refused(refused_start, self._fair.backlog(message.tenant))
            # Not startable (cancelled, finished, leased...): the start below says what to do instead.
        loop = asyncio.get_running_loop()
        waiting_since: float | None = None
        capped = self._fair.capped(message.tenant)
        result = await self._starts.start(message.task_id, message.attempt, capped=capped)
        while True:
            decision = decide_start(
                result,
                flight.source,
                settle_after_seconds=self._ctx.settings.settle_after_seconds,
                waited_seconds=None if waiting_since is None else loop.time() - waiting_since,
                stopping=self._stopping.is_set(),
                backlog=self._fair.backlog(message.tenant),
            )
            if not isinstance(decision, WaitForLease):
                return decision
            if waiting_since is None:
                log.info("task %s: leased by another worker; waiting in quarantine", message.task_id)
                self._ctx.count("waited_for_lease")
                waiting_since = loop.time()
            try:
                await asyncio.wait_for(self._stopping.wait(), decision.poll_seconds)
            except TimeoutError:
                result = await self._starts.start(message.task_id, message.attempt, capped=capped)
            # Stopping: decided again on the same answer, which hands the message back.

    async def _carry_out(self, flight: Flight, action: StartAction) -> None:
        message = flight.message
        match action:
            case Run(record=record):
                flight.leased = True
                await self._attempts.run(flight, record)
            case Defer(delay_seconds=delay, reason=reason, label=label):
                self._hand_off(flight)
                await self._defer(message, delay, reason, label, crashes=flight.crashes)
            case Park(reason=reason, label=label):
                # Routine under load, like a refusal sent round (counted, in the task's history): debug.
                log.debug("task %s: %s; parked until its tenant has room", message.task_id, reason)
                TASK_START_DEFERRALS.labels(self._ctx.specialist, label).inc()
                self._ctx.count("parked")
            case Finish(outcome=outcome, status=status, note=note):
                if status is not None:
                    TASKS_FINISHED.labels(self._ctx.specialist, status.value).inc()
                log.info("task %s: %s", message.task_id, note)
                self._ctx.count(outcome)
            case HandBack():
                self._hand_off(flight)
                await self._publish(self._ctx.topology.quarantine_exchange, message, crashes=flight.crashes)
                self._ctx.count("handed_back")
            case _:
                assert_never(action)

    def _hand_off(self, flight: Flight) -> None:
        """The flight, which never started its task, is about to publish its message's successor: it stops
        counting as the task's flight first. The copy can be delivered here before the publish's confirm
        resumes this flight (on a loaded machine, often), and a delivery that finds its task in flight is
        sent round for a whole lease as a duplicate."""
        self.flights.remove(flight)

    async def _defer(
        self,
        message: WorkMessage,
        delay_seconds: float,
        why: str,
        label: str,
        *,
        crashes: int = 0,
        unstarted: int = 0,
    ) -> None:
        """Send the same message (same attempt: not charged) through a delay tier, then ack; ``label``:
        the reason counted in ``taskyard_task_start_deferrals_total``; ``crashes``: its crash count, carried."""
        target = work_target(self._ctx.specialist, self._ctx.publisher.level(message.priority))
        headers = crash_headers(crashes, unstarted)
        try:
            if delay_seconds <= 0:  # at once (a crash's message whose lease is over, crash_moves.py)
                await publish_now(self._ctx.publisher, self._ctx.topology, target, message, headers=headers)
                tier = 0
            else:
                tier = await publish_delayed(
                    self._ctx.publisher, self._ctx.topology, target, message, delay_seconds, headers=headers
                )
        except TaskyardError as exc:
            raise TransientError(f"could not defer task {message.task_id}: {exc}") from exc
        # A refusal for the tenant's cap or share is routine under load (a backlog goes round the delay
        # queues): counted and in the task's history, logged only at debug.
        level = logging.DEBUG if label in _ROUTINE else logging.INFO
        log.log(level, "task %s: %s; trying again in %ds", message.task_id, why, tier)
        TASK_START_DEFERRALS.labels(self._ctx.specialist, label).inc()
        self._ctx.count("deferred")

    async def _publish(self, exchange: str, message: WorkMessage, *, crashes: int = 0) -> None:
        try:
            await self._ctx.publisher.publish(
                exchange, self._ctx.specialist, message, headers=crash_headers(crashes)
            )
        except TaskyardError as exc:
            # Even "unroutable" is worth another delivery here, not a dead letter: the message is fine.
            raise TransientError(f"could not move task {message.task_id}: {exc}") from exc

    async def drain(self, grace_seconds: float) -> int:
        """Ask every run to end after its current step (recorded, then handed back uncharged; a run whose
        step was its last completes) and wait up to ``grace_seconds`` for the deliveries in flight; then
        stop the rest mid-step and hand them back too (same message republished, lease released, original
        acked). Returns how many had to be stopped mid-step."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        # A delivery that arrived just before the consumers were cancelled needs a turn of the loop to reach
        # the handler; the loop below also picks up any that register while it waits.
        await asyncio.sleep(0)
        while (pending := self.flights.in_flight()) and (remaining := deadline - loop.time()) > 0:
            self.flights.stop_after_step()
            await asyncio.wait(pending, timeout=remaining)
        if not self.flights.in_flight():
            return 0
        self._stopping.set()
        stopped = self.flights.stop_all(StopReason.SHUTDOWN)
        _, stuck = await asyncio.wait(self.flights.in_flight(), timeout=HAND_BACK_SECONDS)
        for task in stuck:
            # Could not hand back in time (broker or store down): the unacked message is requeued when
            # the connection closes, a settled task is taken back by the reaper when its lease runs out.
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=5)
        return stopped

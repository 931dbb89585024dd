"""The work handler: one delivery of a ``WorkMessage`` → at most one run of the task, recorded in the store.

The consume helper acks when this returns, so the ack always follows the store's commit (or, for a retry,
the confirmed publish of the next attempt's message): a crash at any point before leaves the message unacked
and the broker delivers it again. Redelivery is harmless because every store transition is conditional: a
finished task is not started again, and a task leased by a live worker is not started twice.

What happens before a run (quarantine, the start outcomes, deferrals) lives here; how a run ends is
recorded by ``Outcomes`` (outcomes.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.errors import StoreUnavailable, TaskyardError, TransientError
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage, WorkMessage
from taskyard_common.metrics import MESSAGES_QUARANTINED, TASKS_FINISHED
from taskyard_common.retry import backoff_seconds, publish_delayed
from taskyard_common.store import StartOutcome, StartResult
from taskyard_common.task_errors import TaskErrorType, task_error
from taskyard_common.topology import work_target
from taskyard_worker.context import WorkerContext
from taskyard_worker.flights import Flight, Flights, Source, StopReason
from taskyard_worker.outcomes import Outcomes
from taskyard_worker.start_batch import StartBatcher

log = logging.getLogger(__name__)

# A quarantined message whose task another worker holds waits in place, polling the store this often.
LEASE_POLL_SECONDS = 1.0
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
        self._record = Outcomes(ctx)

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
        if source is Source.MAIN and incoming.redelivered and self._ctx.settings.quarantine:
            await self._quarantine(message)
            return
        if message.task_id in self.flights:
            # The same task is handled here already. Not dropped: the flight may be about to find its lease
            # lost (then this copy is the one the reaper published); it comes back once a lease could end.
            await self._defer(message, self._ctx.settings.lease_seconds, "it is in flight here already")
            return
        flight = Flight(message, incoming, source)
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

    async def _quarantine(self, message: WorkMessage) -> None:
        """A redelivery means its channel died with it unacked, maybe killed by it: run it alone, in the
        quarantine queue, where the delivery limit dead-letters a poison message without taking healthy
        ones with it. Publish (confirmed) first, then the helper acks: a crash in between duplicates."""
        await self._publish(self._ctx.topology.quarantine_exchange, message)
        MESSAGES_QUARANTINED.labels(self._ctx.specialist).inc()
        log.warning("task %s: redelivered; moved to the quarantine queue", message.task_id)
        self._ctx.count("quarantined")

    async def _deliver(self, flight: Flight) -> None:
        message = flight.message
        try:
            started = await self._start(flight)
        except StoreUnavailable:
            # Nothing started: send the message round again later rather than count a delivery.
            spec = self._ctx.spec
            delay = backoff_seconds(message.attempt, spec.backoff_base_seconds, spec.backoff_max_seconds)
            await self._defer(message, delay, "the store is unavailable")
            return
        if started is None:
            return  # handed back while waiting for another worker's lease
        outcome = started.outcome
        if outcome is StartOutcome.STARTED:
            assert started.record is not None
            flight.leased = True
            await self._record.run(flight, started.record)
        elif outcome is StartOutcome.LEASED:
            # Another worker runs it: come back once its lease may have run out. Not charged.
            await self._defer(message, started.lease_remaining_seconds + 1, "another worker holds its lease")
        elif outcome is StartOutcome.NOT_ROUTED:
            await self._defer(message, 1, "its routing is not committed yet")
        elif outcome is StartOutcome.EXPIRED:
            TASKS_FINISHED.labels(self._ctx.specialist, TaskStatus.FAILED.value).inc()
            log.info("task %s: its deadline passed before it started; failed as expired", message.task_id)
            self._ctx.count("expired")
        elif outcome is StartOutcome.CANCELLED:
            TASKS_FINISHED.labels(self._ctx.specialist, TaskStatus.CANCELLED.value).inc()
            log.info("task %s: cancelled before it started", message.task_id)
            self._ctx.count("cancelled")
        else:
            # FINISHED (a redelivery after a lost ack, a duplicate) or UNKNOWN: ack, run nothing.
            log.info("task %s: %s; acknowledging without running", message.task_id, outcome)
            self._ctx.count("duplicate" if outcome is StartOutcome.FINISHED else "unknown")

    async def _start(self, flight: Flight) -> StartResult | None:
        message = flight.message
        loop = asyncio.get_running_loop()
        waiting_since: float | None = None
        while True:
            result = await self._starts.start(message.task_id, message.attempt)
            if result.outcome is not StartOutcome.LEASED or flight.source is not Source.QUARANTINE:
                return result
            # In quarantine, a message whose task is leased waits here instead of going round again: only
            # this prefetch-1 consumer waits, and the broker keeps counting its deliveries (a poison message
            # that keeps killing workers must reach the delivery limit). A holder that keeps its lease that
            # long is alive and well, though: past settle_after_seconds (and before the broker's consumer
            # timeout) the message is deferred like one from the main queue.
            if waiting_since is None:
                log.info("task %s: leased by another worker; waiting in quarantine", message.task_id)
                self._ctx.count("waited_for_lease")
                waiting_since = loop.time()
            elif loop.time() - waiting_since > self._ctx.settings.settle_after_seconds:
                return result
            wait = min(result.lease_remaining_seconds + 0.05, LEASE_POLL_SECONDS)
            try:
                await asyncio.wait_for(self._stopping.wait(), wait)
            except TimeoutError:
                continue
            await self._publish(self._ctx.topology.quarantine_exchange, message)
            self._ctx.count("handed_back")
            return None

    async def _defer(self, message: WorkMessage, delay_seconds: float, why: str) -> None:
        """Send the same message (same attempt: not charged) through a delay tier, then ack."""
        try:
            tier = await publish_delayed(
                self._ctx.publisher,
                self._ctx.topology,
                work_target(self._ctx.specialist),
                message,
                delay_seconds,
            )
        except TaskyardError as exc:
            raise TransientError(f"could not defer task {message.task_id}: {exc}") from exc
        log.info("task %s: %s; trying again in %ds", message.task_id, why, tier)
        self._ctx.count("deferred")

    async def _publish(self, exchange: str, message: WorkMessage) -> None:
        try:
            await self._ctx.publisher.publish(exchange, self._ctx.specialist, message)
        except TaskyardError as exc:
            # Even "unroutable" is worth another delivery here, not a dead letter: the message is fine.
            raise TransientError(f"could not move task {message.task_id}: {exc}") from exc

    async def drain(self, grace_seconds: float) -> int:
        """Wait up to ``grace_seconds`` for the deliveries in flight; then stop the rest and hand them back
        (same message republished, lease released, original acked). Returns how many had to be stopped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        # A delivery that arrived just before the consumers were cancelled needs a turn of the loop to reach
        # the handler; the loop below also picks up any that register while it waits.
        await asyncio.sleep(0)
        while (pending := self.flights.in_flight()) and (remaining := deadline - loop.time()) > 0:
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

"""The deliveries a worker holds, and how their runs are stopped from outside.

A *flight* is one delivery of a work message being handled: registered before the store is asked to start
the task (so a cancel that races the start still finds it), dropped once its outcome is recorded. Its run
(the agent loop) is a separate asyncio task, so the heartbeat, a control message or the shutdown can cancel
the run and the flight still records why and settles its message.

``Flights`` is the one registry of them, shared by the work handler (which adds and removes), the heartbeat
(leases to renew), the control consumer (cancels) and the graceful stop (what to wait for, what to stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.messages import WorkMessage


class Source(StrEnum):
    """The queue a delivery came from: a redelivery is counted and re-run or quarantined (crashes.py) only
    from the main queue."""

    MAIN = "main"
    QUARANTINE = "quarantine"


class StopReason(StrEnum):
    SHUTDOWN = "shutdown"  # SIGTERM and the grace period is over: hand the task back, uncharged
    CANCELLED = "cancelled"  # the task's cancellation was requested: record it cancelled
    LOST_LEASE = "lost_lease"  # another worker or the reaper holds the task now: record nothing


@dataclass(eq=False)
class Flight:
    message: WorkMessage
    incoming: AbstractIncomingMessage
    source: Source
    # The crashes its message was in flight for (crashes.py); every re-publication of it carries the count.
    crashes: int = 0
    # True once the store started the task for this worker (this worker holds its lease).
    leased: bool = False
    # Everything done for the delivery after the quarantine check; owned by the worker, not by the
    # channel, so a channel that closes (a connection blip) does not kill the task's run with it.
    task: asyncio.Task[None] | None = None
    # The agent loop of the attempt, once started.
    run: asyncio.Task[Any] | None = None
    stop_reason: StopReason | None = None
    # Set when the worker stops: the run ends after its current step (recorded) and is handed back.
    stop_after_step: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def task_id(self) -> UUID:
        return self.message.task_id

    @property
    def settled(self) -> bool:
        """The message was acked already (early, for a long task): the outcome goes to the store only."""
        return self.incoming.processed

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.done()

    def stop(self, reason: StopReason) -> bool:
        """Cancel the run for ``reason``; the first reason wins. A stop before the run exists is kept and
        applied when the run would start. False when another reason came first."""
        if self.stop_reason is not None:
            return False
        self.stop_reason = reason
        if self.run is not None and not self.run.done():
            self.run.cancel()
        return True


class Flights:
    """Every delivery being handled (its asyncio task, which also settles the message) and the flight of
    each task id among them: one flight per task per process, so a duplicate never runs beside it.

    Also the worker's activity clock: job mode exits after a long enough spell with nothing in flight and
    nothing delivered.
    """

    def __init__(self) -> None:
        self._flights: dict[UUID, Flight] = {}
        self._deliveries: set[asyncio.Task[Any]] = set()
        # When a delivery last arrived or ended (monotonic).
        self._last_activity = time.monotonic()
        self._activity = asyncio.Event()

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._flights

    def __getitem__(self, task_id: UUID) -> Flight:
        return self._flights[task_id]

    def __len__(self) -> int:
        return len(self._flights)

    def get(self, task_id: UUID) -> Flight | None:
        return self._flights.get(task_id)

    def add(self, flight: Flight) -> None:
        if flight.task_id in self._flights:
            raise ValueError(f"task {flight.task_id} is in flight already")
        self._flights[flight.task_id] = flight

    def remove(self, flight: Flight) -> None:
        """Drop ``flight`` (not a later flight of the same task) and note the activity."""
        if self._flights.get(flight.task_id) is flight:
            del self._flights[flight.task_id]
        self.touch()

    def track_delivery(self, delivery: asyncio.Task[Any]) -> None:
        """Count ``delivery`` as in flight until it is done, i.e. until after the consume helper settled
        its message."""
        self.touch()
        self._deliveries.add(delivery)
        delivery.add_done_callback(self._deliveries.discard)
        delivery.add_done_callback(self.touch)

    def leased_ids(self) -> list[UUID]:
        """The tasks this worker holds a lease on: what the heartbeat renews."""
        return [task_id for task_id, flight in self._flights.items() if flight.leased]

    def stop_all(self, reason: StopReason) -> int:
        """Stop every flight's run for ``reason``; returns how many flights there were."""
        flights = list(self._flights.values())
        for flight in flights:
            flight.stop(reason)
        return len(flights)

    def stop_after_step(self) -> int:
        """Ask every run to end after its current step (a graceful stop); how many flights there are."""
        flights = list(self._flights.values())
        for flight in flights:
            flight.stop_after_step.set()
        return len(flights)

    def in_flight(self) -> set[asyncio.Task[Any]]:
        """Every delivery and flight not done yet: what a graceful stop waits for."""
        tasks = {f.task for f in self._flights.values() if f.task is not None and not f.task.done()}
        return self._deliveries | tasks

    def touch(self, *_: object) -> None:
        self._last_activity = time.monotonic()
        self._activity.set()

    async def until_idle(self, seconds: float) -> None:
        """Return once the worker has been idle for ``seconds`` (job mode's exit condition). Woken by every
        delivery's start and end, so it never waits longer than needed."""
        while True:
            self._activity.clear()
            busy = bool(self.in_flight())
            remaining = seconds if busy else seconds - (time.monotonic() - self._last_activity)
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._activity.wait(), timeout=remaining)

"""The deliveries a worker holds, and how their runs are stopped from outside.

A *flight* is one delivery of a work message being handled: registered before the store is asked to start
the task (so a cancel that races the start still finds it), dropped once its outcome is recorded. Its run
(the agent loop) is a separate asyncio task, so the heartbeat, a control message or the shutdown can cancel
the run and the flight still records why and settles its message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.messages import WorkMessage


class Source(StrEnum):
    """The queue a delivery came from: a redelivery is quarantined only from the main queue."""

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
    # True once the store started the task for this worker (this worker holds its lease).
    leased: bool = False
    # Everything done for the delivery after the quarantine check; owned by the worker, not by the
    # channel, so a channel that closes (a connection blip) does not kill the task's run with it.
    task: asyncio.Task[None] | None = None
    # The agent loop of the attempt, once started.
    run: asyncio.Task[Any] | None = None
    stop_reason: StopReason | None = None

    @property
    def settled(self) -> bool:
        """The message was acked already (early, for a long task): the outcome goes to the store only."""
        return self.incoming.processed

    def stop(self, reason: StopReason) -> bool:
        """Cancel the run for ``reason``; the first reason wins. A stop before the run exists is kept and
        applied when the run would start. False when another reason came first."""
        if self.stop_reason is not None:
            return False
        self.stop_reason = reason
        if self.run is not None and not self.run.done():
            self.run.cancel()
        return True

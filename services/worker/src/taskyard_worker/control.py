"""Control messages: every worker's own exclusive queue on the control fanout; "cancel" stops a run now.

The API records the request in the store first (``request_cancel``) and then publishes the message, so a
task that is not running anywhere is already cancelled in the store and the message is simply dropped by
every worker. The worker that runs the task stops it and records it cancelled; if the message is lost,
the heartbeat sees the request within a third of a lease.
"""

from __future__ import annotations

import logging

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.messages import ControlMessage
from taskyard_worker.context import WorkerContext
from taskyard_worker.flights import StopReason

log = logging.getLogger(__name__)


class ControlHandler:
    def __init__(self, ctx: WorkerContext) -> None:
        self._flights = ctx.flights

    async def __call__(self, message: ControlMessage, incoming: AbstractIncomingMessage) -> None:
        flight = self._flights.get(message.task_id)
        if flight is None:
            return  # not running here
        # Also before the run exists (its start is being committed): the stop is applied when it would run.
        if flight.stop(StopReason.CANCELLED):
            log.info("task %s: cancellation requested; stopping it", message.task_id)

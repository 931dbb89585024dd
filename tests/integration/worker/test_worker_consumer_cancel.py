"""A consumer cancelled by the broker (its queue deleted) is noticed, logged, and consumes again."""

from __future__ import annotations

import logging

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_the_worker_consumes_again_after_the_broker_cancels_its_consumer(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    queue = harness.bus.topology.specialist_queue("general")
    async with running_worker(harness.settings, "general"):
        # From another connection, as an operator (or a node failure) would: the broker sends basic.cancel.
        await harness.bus.channel.queue_delete(queue)

        def warned() -> bool:
            return any("the broker cancelled consumer" in r.getMessage() for r in caplog.records)

        async def recovered() -> bool:
            return warned() and bool(await harness.bus.consumers(queue))

        # The robust channel re-declares the queue with its bindings and consumes again.
        await eventually(recovered, timeout=15, what="the warning, then the queue consumed again")
        message = await harness.submit()
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None
    [warning] = [r for r in caplog.records if "the broker cancelled consumer" in r.getMessage()]
    assert warning.levelno == logging.WARNING and "main queue" in warning.getMessage()

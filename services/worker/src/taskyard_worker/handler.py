"""The work handler: one delivery of a ``WorkMessage`` → at most one run of the task, recorded in the store.

The consume helper acks when this returns, so the ack always follows the store's commit: a crash at any
point before leaves the message unacked, and the broker delivers it again. Redelivery is harmless because
every store transition is conditional: a task that already finished is not started again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.errors import PermanentError
from taskyard_common.messages import TaskStatus, Usage, WorkMessage
from taskyard_common.metrics import LLM_TOKENS, TASK_DURATION, TASKS_FINISHED
from taskyard_common.store import TaskStore
from taskyard_worker.runtime import Agent, RunTrace

log = logging.getLogger(__name__)


def error_record(exc: PermanentError) -> dict[str, Any]:
    """The ``error`` stored on a failed task: a stable type and a human message (never the input)."""
    return {"type": getattr(exc, "kind", "permanent_error"), "message": str(exc)}


def trace_summary(trace: RunTrace, started: float) -> str:
    """Duration, steps and tokens of an attempt: what a log line may say about a task (never its text)."""
    duration = time.monotonic() - started
    return f"{duration:.2f}s, steps={trace.steps}, tokens={trace.usage.total_tokens}"


class WorkHandler:
    """Runs deliveries for one specialist and keeps track of the ones in flight, for graceful shutdown."""

    def __init__(self, specialist: str, store: TaskStore, agent: Agent) -> None:
        self.specialist = specialist
        self._store = store
        self._agent = agent
        # The asyncio task of every delivery being handled. The consume helper runs each delivery as its
        # own task and settles the message in that same task, so waiting for these covers the ack too.
        self.in_flight: set[asyncio.Task[Any]] = set()
        # How deliveries ended since start (completed, failed, duplicate, ...): logged at shutdown.
        self.outcomes: Counter[str] = Counter()

    async def __call__(self, message: WorkMessage, incoming: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            # Tracked until the task is done, i.e. until after the consume helper settled the message.
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        await self._handle(message)

    async def _handle(self, message: WorkMessage) -> None:
        task_id = message.task_id
        if message.specialist != self.specialist:
            # A routing bug, not a poison message: fail the task visibly instead of running it here.
            error = {
                "type": "misrouted",
                "message": f"meant for {message.specialist!r}, not {self.specialist!r}",
            }
            await self._store.fail(task_id, error, Usage())
            self._outcome("misrouted")
            return
        record = await self._store.start(task_id)
        if record is None:
            # Already completed or failed (a redelivery after a lost ack), or unknown: ack, run nothing.
            log.info("task %s: already finished or unknown; acknowledging without running", task_id)
            self._outcome("duplicate")
            return
        log.info("task %s: started (attempt %d)", task_id, record.attempts)
        trace = RunTrace()
        started = time.monotonic()
        try:
            result = await self._agent.run(message.input, trace)
        except PermanentError as exc:
            status = TaskStatus.FAILED
            stored = await self._store.fail(task_id, error_record(exc), trace.usage)
        except BaseException as exc:
            # Transient (or shutdown): the consume helper requeues, and the store keeps the task running.
            summary = trace_summary(trace, started)
            log.info("task %s: ended by %s, handing it back (%s)", task_id, type(exc).__name__, summary)
            self._outcome("requeued")
            raise
        else:
            status = TaskStatus.COMPLETED
            output = {"output": result.output, "steps": result.steps, "tool_calls": result.tool_calls}
            stored = await self._store.complete(task_id, output, result.usage)
        finally:
            # Every attempt counts, whatever its end: the time and the tokens were spent all the same.
            TASK_DURATION.labels(self.specialist).observe(time.monotonic() - started)
            LLM_TOKENS.labels(self.specialist, "prompt").inc(trace.usage.prompt_tokens)
            LLM_TOKENS.labels(self.specialist, "completion").inc(trace.usage.completion_tokens)
        if not stored:
            # Another delivery of the same task finished it first: do not count it twice.
            log.info("task %s: %s, but another delivery had finished it already", task_id, status)
            self._outcome("duplicate")
            return
        TASKS_FINISHED.labels(self.specialist, status.value).inc()
        self._outcome(status.value)
        log.info("task %s: %s (%s)", task_id, status, trace_summary(trace, started))

    def _outcome(self, outcome: str) -> None:
        self.outcomes[outcome] += 1

    async def drain(self, grace_seconds: float) -> int:
        """Wait up to ``grace_seconds`` for the deliveries in flight, then cancel the rest.

        A cancelled delivery is rejected with requeue by the consume helper, so another worker takes it.
        Returns how many had to be cancelled.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        # A delivery that arrived just before the consumer was cancelled needs a turn of the loop to reach
        # the handler; the loop below also picks up any that register while it waits.
        await asyncio.sleep(0)
        while self.in_flight and (remaining := deadline - loop.time()) > 0:
            await asyncio.wait(set(self.in_flight), timeout=remaining)
        leftover = set(self.in_flight)
        for task in leftover:
            task.cancel()
        if leftover:
            # Let them settle (the requeue) before the channel closes under them.
            await asyncio.wait(leftover, timeout=5)
        return len(leftover)

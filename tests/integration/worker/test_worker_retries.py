"""Retries through the delay queues: charged transient failures, uncharged 429s, timeouts, giving up."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.metrics import TASK_RETRIES, TASKS_FINISHED
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, counter, wait_outcome
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

# The shortest backoff: every retry waits in the 1-second delay tier. No retries inside the step: here each
# scripted failure costs an attempt (test_agent_runtime covers the in-step retries).
FAST_RETRIES = {"backoff_base_seconds": 1, "backoff_max_seconds": 1, "llm_retries": 0}


@pytest.fixture
def fast_settings(
    make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> Callable[..., ServiceSettings]:
    def make(**general: object) -> ServiceSettings:
        return make_settings(catalog=write_catalog(**{**FAST_RETRIES, **general}))

    return make


async def test_transient_failures_are_retried_with_backoff_until_they_succeed(
    harness: Harness, fast_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"status": 500}, {"status": 500}, {"content": "third time lucky"}])
    retries = counter(TASK_RETRIES, "general", "transient")
    message = await harness.submit()
    async with running_worker(fast_settings(max_attempts=3), "general") as worker:
        # Between attempts the task says it is waiting, and until when.
        async def retrying() -> bool:
            record = await harness.store.get(message.task_id)
            return record is not None and record.status is TaskStatus.RETRYING

        await eventually(retrying, what="the task retrying")
        waiting = await harness.store.get(message.task_id)
        assert waiting is not None and waiting.next_attempt_at is not None and waiting.lease_owner is None
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        await wait_outcome(worker, "completed")
    assert record.result is not None and record.result["output"] == "third time lucky"
    assert record.attempts == 3 and record.next_attempt_at is None
    assert [(e["attempt"], e["charged"], e["delay_seconds"], e["reason"]) for e in record.attempt_log] == [
        (1, True, 1, "transient"),
        (2, True, 1, "transient"),
    ]
    assert all(e["error"] == "LLM answered HTTP 500" for e in record.attempt_log)
    assert worker.handler.outcomes["retry_scheduled"] == 2
    assert counter(TASK_RETRIES, "general", "transient") == retries + 2
    assert len(await harness.llm_requests()) == 3
    # Every message was settled: nothing requeued, nothing dead-lettered, nothing left waiting.
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.delayed() == 0
    assert await harness.bus.dead_letters() == 0


async def test_a_429_waits_its_retry_after_and_is_not_charged(
    harness: Harness, fast_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"status": 429, "headers": {"Retry-After": "2"}}, {"content": "after the wait"}])
    rate_limited = counter(TASK_RETRIES, "general", "rate_limited")
    message = await harness.submit()
    async with running_worker(fast_settings(max_attempts=1), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    # max_attempts=1 and still retried: a rate limit is not the task's failure.
    assert record.attempts == 1
    [entry] = record.attempt_log
    assert entry["attempt"] == 1 and entry["charged"] is False and entry["reason"] == "rate_limited"
    assert entry["delay_seconds"] >= 2
    assert counter(TASK_RETRIES, "general", "rate_limited") == rate_limited + 1
    first, second = await harness.llm_requests()
    assert first["messages"] == second["messages"]


async def test_retries_exhausted_fail_the_task_with_the_last_error(
    harness: Harness, fast_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"status": 500}], repeat_last=True)
    failed = counter(TASKS_FINISHED, "general", "failed")
    message = await harness.submit()
    async with running_worker(fast_settings(max_attempts=2), "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.error is not None
    assert record.error.model_dump(mode="json") == {
        "type": "retries_exhausted",
        "message": "2 attempts failed; the last: LLM answered HTTP 500",
    }
    assert record.attempts == 2 and len(record.attempt_log) == 1
    assert len(await harness.llm_requests()) == 2
    assert counter(TASKS_FINISHED, "general", "failed") == failed + 1
    # Failed is a settled outcome, not a poison message.
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.dead_letters() == 0


async def test_an_attempt_that_runs_out_of_time_is_retried(
    harness: Harness, fast_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"delay_seconds": 2, "content": "too late"}, {"content": "in time"}])
    message = await harness.submit(timeout_seconds=0.5)
    async with running_worker(fast_settings(), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "in time"
    [entry] = record.attempt_log
    assert entry["reason"] == "timeout" and entry["charged"] is True
    assert entry["error"] == "the attempt did not finish within 0.5 s"
    assert record.attempts == 2


async def test_a_task_past_its_deadline_fails_as_expired_without_running(harness: Harness) -> None:
    message = await harness.submit(deadline=datetime.now(UTC) - timedelta(seconds=1))
    async with running_worker(harness.settings, "general") as worker:
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
        await wait_outcome(worker, "expired")
    assert record.error is not None and record.error.type == "expired"
    assert await harness.llm_requests() == []
    assert await harness.bus.work_depth() == 0


async def test_duplicate_messages_of_a_retrying_task_neither_skip_its_backoff_nor_fork_a_second_chain(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    await harness.script([{"status": 500}], repeat_last=True)
    message = await harness.submit()
    backoff = {"backoff_base_seconds": 2, "backoff_max_seconds": 2}
    catalog = write_catalog(**{**FAST_RETRIES, **backoff, "max_attempts": 3})
    # A short lease: a copy that finds the task running comes back soon after (lease + 1 s).
    async with running_worker(make_settings(catalog=catalog, lease_seconds=2), "general") as worker:
        await harness.wait(message.task_id, TaskStatus.RETRYING)
        # While attempt 2 waits out its backoff: a copy of attempt 1's message (an ack lost after the retry
        # was scheduled) and an early copy of attempt 2's own message.
        await harness.bus.send_work(message)
        await harness.bus.send_work(message.model_copy(update={"attempt": 2}))
        await wait_outcome(worker, "stale")
        record = await harness.wait(message.task_id, TaskStatus.FAILED)

        async def settled() -> bool:
            return await harness.bus.delayed() == 0 and await harness.bus.work_depth() == 0

        await eventually(settled, what="every copy settled")
    # Three runs for three attempts: no copy ran early, none started a second retry chain.
    assert len(await harness.llm_requests()) == 3
    assert record.attempts == 3 and [e["attempt"] for e in record.attempt_log] == [1, 2]
    assert worker.handler.outcomes["retry_scheduled"] == 2

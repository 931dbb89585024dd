"""The worker while PostgreSQL is away: nothing is lost, and the delivery limit is spared."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store import Step
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, wait_outcome
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration


@pytest.fixture
async def db_proxy(db_settings: DbSettings) -> AsyncIterator[tuple[TcpProxy, DbSettings]]:
    """A proxy in front of PostgreSQL, and store settings that go through it."""
    url = urlsplit(db_settings.url.get_secret_value())
    user = url.netloc.rsplit("@", 1)[0] + "@" if "@" in url.netloc else ""
    async with TcpProxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        yield (
            proxy,
            DbSettings(
                url=urlunsplit(url._replace(netloc=f"{user}127.0.0.1:{proxy.port}")),
                db_schema=db_settings.db_schema,
                pool_max_size=db_settings.pool_max_size,
                command_timeout_seconds=2,
            ),
        )


async def test_a_store_outage_at_start_defers_the_message_until_the_store_is_back(
    harness: Harness, make_settings: Callable[..., ServiceSettings], db_proxy: tuple[TcpProxy, DbSettings]
) -> None:
    proxy, proxied = db_proxy
    async with running_worker(make_settings().model_copy(update={"db": proxied}), "general") as worker:
        await proxy.stop()  # the worker's database connections drop, new ones are refused
        message = await harness.submit()
        # Not rejected (that would count a delivery): sent round the delay queues until the store answers.
        await wait_outcome(worker, "deferred")
        await proxy.resume()
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.attempts == 1 and record.attempt_log == []
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.dead_letters() == 0


async def test_a_store_outage_at_completion_keeps_the_answer_without_another_llm_call(
    harness: Harness, make_settings: Callable[..., ServiceSettings], db_proxy: tuple[TcpProxy, DbSettings]
) -> None:
    proxy, proxied = db_proxy
    await harness.script([{"delay_seconds": 1.5, "content": "the answer"}])
    settings = make_settings(lease_seconds=2).model_copy(update={"db": proxied})
    async with running_worker(settings, "general") as worker:
        message = await harness.submit()
        await harness.wait_llm_calls(1)
        await proxy.stop()  # the answer arrives while the database is away
        # The answer is kept and its recording tried again (not thrown away with the attempt charged).
        await wait_outcome(worker, "complete_retried")
        await proxy.resume()
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "the answer"
    assert record.attempts == 1 and record.attempt_log == []
    assert len(await harness.llm_requests()) == 1, "no second LLM call"
    assert record.usage.total_tokens > 0
    assert await harness.bus.dead_letters() == 0


async def test_an_answer_checkpointed_by_an_earlier_attempt_completes_without_the_llm(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    # An earlier worker got the answer and recorded it, then could not complete the task (it died, or
    # the database went away for longer than it kept trying): the task is back in its queue.
    message = await harness.submit(publish=False)
    store = harness.store
    assert (await store.start(message.task_id, owner="gone", lease_seconds=30, attempt=1)).record
    answer = Step(
        task_id=message.task_id,
        step=1,
        message={"role": "assistant", "content": "recorded answer"},
        usage=Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7),
    )
    assert await store.record_steps([answer], owner="gone") == {message.task_id}
    assert await store.release(message.task_id, "gone")
    await harness.bus.send_work(message)
    async with running_worker(make_settings(), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "recorded answer"
    assert await harness.llm_requests() == []
    assert record.usage == Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7), "counted once"
    assert record.attempt_log[-1]["resumed_from_step"] == 1

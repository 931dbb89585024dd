"""The worker while PostgreSQL is away: nothing is lost, and the delivery limit is spared."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import DbSettings
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


async def test_an_outcome_the_store_could_not_record_is_retried_not_lost(
    harness: Harness, make_settings: Callable[..., ServiceSettings], db_proxy: tuple[TcpProxy, DbSettings]
) -> None:
    proxy, proxied = db_proxy
    await harness.script([{"delay_seconds": 1.5, "content": "not recorded"}, {"content": "recorded"}])
    settings = make_settings(lease_seconds=2).model_copy(update={"db": proxied})
    async with running_worker(settings, "general") as worker:
        message = await harness.submit()
        await harness.wait_llm_calls(1)
        await proxy.stop()
        # The answer cannot be committed: the attempt counts as failed transiently, its retry is published.
        await wait_outcome(worker, "retry_scheduled")
        await proxy.resume()
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "recorded"
    assert record.attempts == 2
    assert await harness.bus.dead_letters() == 0

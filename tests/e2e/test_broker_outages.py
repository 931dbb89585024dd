"""The broker going away and coming back, and a task that outlives the broker's consumer timeout.

Both change the broker itself (stopped, its consumer timeout shortened), so each runs its services against a
RabbitMQ node of its own (bench/chaos/nodes.py: own node name, ports and data directory, on loopback), never
the shared one that other tests use at the same time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from bench.chaos.nodes import RabbitNode, rabbit_node
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import count_with_status, submit, task, wait_for_status
from tests.support.polling import eventually
from tests.support.rabbitmq_admin import require_rabbitmqctl

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
async def node(tmp_path: Path, test_id: str) -> AsyncIterator[RabbitNode]:
    require_rabbitmqctl()
    async with rabbit_node(f"outage{test_id}", tmp_path / "rabbit") as started:
        yield started


@pytest.fixture
def cluster(
    node: RabbitNode,
    amqp_settings: AmqpSettings,
    db_settings: DbSettings,
    catalog_path: Path,
    devllm: DevLlm,
    tmp_path: Path,
) -> Iterator[Cluster]:
    private = amqp_settings.model_copy(update={"url": SecretStr(node.url)})
    made = Cluster(private, db_settings, catalog_path, devllm, tmp_path)
    try:
        yield made
    finally:
        unclean = made.stop_all()
        print(made.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"


async def test_broker_restart_during_a_run_loses_nothing(cluster: Cluster, node: RabbitNode, catalog):
    await cluster.start_api()
    await cluster.start_broker_agent()
    for name in catalog.names:
        await cluster.start_worker(name, TASKYARD_WORKER_LEASE_SECONDS="5")
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        names = catalog.names
        ids = []
        for i in range(100):
            body = {"input": f"task {i}", "specialist": names[i % len(names)]}
            ids.append((await submit(client, body))["id"])

        await node.ctl("stop_app")
        try:
            # While the broker is down the API refuses new work clearly: 503 + Retry-After, never 500 or a hang.
            async def refusing() -> bool:
                response = await client.post("/v1/tasks", json={"input": "while down"})
                assert response.status_code in (202, 503), response.text
                if response.status_code == 503:
                    assert response.headers["retry-after"]
                    assert response.headers["content-type"].startswith("application/problem+json")
                return response.status_code == 503

            await eventually(refusing, timeout=30, what="the API to answer 503 while RabbitMQ is down")
        finally:
            await node.ctl("start_app")

        for i in range(100, 200):
            body = {"input": f"task {i}", "specialist": names[i % len(names)]}
            ids.append((await submit(client, body, retry_503_for=60))["id"])

        async def all_done() -> bool:
            return await count_with_status(client, "completed") >= 200

        await eventually(all_done, timeout=180, what="200 tasks completed after the broker restart")
        for task_id in ids:
            assert (await task(client, task_id))["status"] == "completed"


async def test_task_longer_than_the_consumer_timeout_completes_once(
    cluster: Cluster, node: RabbitNode, devllm: DevLlm
):
    # The long task's one LLM call takes 8 s; the short ones answer at once.
    long_model = devllm.new_model()
    await devllm.script(long_model, [{"delay_seconds": 8, "content": "finally done"}])
    await cluster.start_api()
    await cluster.start_broker_agent()
    await node.ctl("eval", "application:set_env(rabbit, channel_tick_interval, 1000).")
    await node.ctl("eval", "application:set_env(rabbit, consumer_timeout, 3000).")
    # Channels opened from now on get the 3 s consumer timeout; the worker settles after 1 s.
    worker_env = {"TASKYARD_WORKER_SETTLE_AFTER_SECONDS": "1", "TASKYARD_WORKER_LEASE_SECONDS": "5"}
    await cluster.start_worker("general", TASKYARD_LLM_MODEL=long_model, **worker_env)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        long_task = await submit(client, {"input": "the long one", "specialist": "general"})
        await wait_for_status(client, long_task["id"], {"running"})
        short = [
            (await submit(client, {"input": f"short {i}", "specialist": "general"}))["id"] for i in range(10)
        ]
        document = await wait_for_status(
            client, long_task["id"], {"completed", "failed", "dead_lettered"}, timeout=60
        )
        assert document["status"] == "completed", document
        assert document["attempts"] == 1
        assert document["result"]["output"].startswith("finally done")
        for task_id in short:
            assert (await wait_for_status(client, task_id, {"completed", "failed"}))["status"] == "completed"
        # One LLM call for the long task: it was never redelivered and run again.
        requests = await devllm.requests(long_model)
        assert sum("the long one" in str(r["messages"]) for r in requests) == 1

"""The SDK against the real thing: the API, the broker agent and a worker as processes (the ``cluster``
fixture), RabbitMQ, PostgreSQL and the development model server.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from taskyard_client import AnswerText, AsyncClient, Client, Conflict, NotFound, RetryPolicy, TaskStatus
from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.catalogs import write_catalog
from tests.support.dead_letters import reject_work_messages
from tests.support.polling import eventually
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANSWER = "The SDK read this as it was written: " + " ".join(f"w{i}" for i in range(20)) + "."
# A resumed stream must never wait long: reconnect at once, a few times.
QUICK = RetryPolicy(max_attempts=8, base_delay=0.2, max_delay=2, max_total=30)


async def streaming_cluster(cluster: Cluster, catalog: Catalog, tmp_path: Path) -> None:
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker(
        "general", TASKYARD_CATALOG_PATH=str(write_catalog(catalog, tmp_path, stream=True))
    )


async def test_the_sdk_follows_a_task_to_its_answer(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog, tmp_path: Path
) -> None:
    await devllm.script(cluster.model, [{"content": ANSWER, "chunk_delay_seconds": 0.02}], repeat_last=True)
    await streaming_cluster(cluster, catalog, tmp_path)
    async with AsyncClient(cluster.api_url, retry=QUICK) as sdk:
        key = f"sdk-{uuid.uuid4()}"
        task = await sdk.submit(
            "Summarize: the SDK works.", specialist="general", metadata={"by": "sdk"}, idempotency_key=key
        )
        again = await sdk.submit(
            "Summarize: the SDK works.", specialist="general", metadata={"by": "sdk"}, idempotency_key=key
        )
        assert again.id == task.id, "the same key names the same task"

        answer = AnswerText()
        events = []
        async for event in sdk.events(task.id):
            events.append(event)
            answer.apply(event)
        kinds = [e.type for e in events]
        assert kinds[:3] == ["accepted", "routed", "attempt_started"] and kinds[-1] == "completed"
        assert "token" in kinds and [e.seq for e in events] == list(range(1, len(events) + 1))
        assert answer.text == ANSWER, "the streamed text is the answer"

        done = await sdk.wait(task.id, timeout=30)
        assert (
            done.status == TaskStatus.COMPLETED and done.output == ANSWER and done.metadata == {"by": "sdk"}
        )
        assert (await sdk.result(task.id)).output == ANSWER
        page = await sdk.event_page(task.id, after=0, limit=200)
        assert [e.seq for e in page.items] == [e.seq for e in events]

        # A task nobody runs (no summarizer worker): cancelled at once, and it will have no result.
        waiting = await sdk.submit({"text": "never runs"}, specialist="summarizer")
        cancelled = await sdk.cancel(waiting.id)
        assert cancelled.status == "cancelled" and cancelled.input == {"text": "never runs"}
        with pytest.raises(Conflict) as refused:
            await sdk.result(waiting.id)
        assert refused.value.problem.task_status == "cancelled"
        assert refused.value.problem.slug == "task-not-completed"
        with pytest.raises(NotFound) as missing:
            await sdk.get(uuid.uuid4())
        assert missing.value.problem.request_id

        listed = [t.id async for t in sdk.list(page_size=1)]
        assert listed == [waiting.id, task.id], "newest first, page after page"
        assert [t.id async for t in sdk.list(status="completed")] == [task.id]
        assert {s.name for s in await sdk.specialists()} == set(catalog.names)
        # The tenant's spend: the sum of its task documents (the dev model is not priced here: tokens).
        report = await sdk.usage(group_by="specialist")
        documents = [t async for t in sdk.list()]
        assert report.total.tasks == len(documents) == 2
        assert report.total.prompt_tokens > 0
        assert report.total.prompt_tokens == sum(t.usage.prompt_tokens for t in documents)
        assert report.total.cost == pytest.approx(sum(t.cost for t in documents))
        assert [(g.key, g.tasks) for g in report.groups] == [("general", 1), ("summarizer", 1)]

    # The synchronous client, the same way (in a thread: it blocks).
    def sync_flow() -> dict[str, Any]:
        with Client(cluster.api_url, retry=QUICK) as blocking:
            made = blocking.submit("Summarize: blocking works too.", specialist="general")
            finished = blocking.wait(made.id, timeout=30)
            streamed = [e.type for e in blocking.events(made.id)]
            spent = blocking.usage(group_by="day").total.tasks
            return {
                "status": finished.status,
                "output": blocking.result(made.id).output,
                "events": streamed,
                "tasks": spent,
            }

    outcome = await asyncio.to_thread(sync_flow)
    assert outcome["status"] == "completed" and outcome["output"] == ANSWER
    assert outcome["events"][-1] == "completed"
    assert outcome["tasks"] == 3


def slow_agent() -> list[dict[str, Any]]:
    """Four calculator steps of a second each, then the answer: the task runs while the stream is cut."""
    steps: list[dict[str, Any]] = [
        {
            "delay_seconds": 1.0,
            "tool_calls": [{"name": "calculator", "arguments": {"expression": f"{n} * 7"}}],
        }
        for n in range(1, 5)
    ]
    return [*steps, {"content": "done after four steps"}]


async def test_the_event_stream_resumes_after_the_connection_drops(cluster: Cluster, devllm: DevLlm) -> None:
    await devllm.script(cluster.model, slow_agent(), by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("general")
    host, port = cluster.api_url.removeprefix("http://").split(":")
    async with (
        TcpProxy(host, int(port)) as proxy,
        AsyncClient(f"http://127.0.0.1:{proxy.port}", retry=QUICK) as sdk,
    ):
        task = await sdk.submit("Work through four steps.", specialist="general")
        seen = []
        cuts = 0
        async for event in sdk.events(task.id):
            seen.append(event)
            if event.type in ("attempt_started", "tool_call") and cuts < 2:
                cuts += 1
                # Every proxied connection is aborted, as a network failure would; new ones work again.
                await proxy.stop()
                await proxy.resume()
        assert cuts == 2
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1)), "every event once, in order"
        assert seen[-1].type == "completed" and seen[-1].data["result"]["output"] == "done after four steps"
        stored = await sdk.event_page(task.id, limit=200)
        assert [e.seq for e in stored.items] == [e.seq for e in seen]


async def test_an_operator_replays_and_discards_dead_letters_with_the_sdk(
    cluster: Cluster, devllm: DevLlm, amqp_settings: AmqpSettings
) -> None:
    await devllm.script(cluster.model, [{"content": "replayed fine"}], repeat_last=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    async with AsyncClient(cluster.api_url, retry=QUICK) as sdk:
        tasks = [await sdk.submit(f"dead letter {n}", specialist="summarizer") for n in range(2)]
        await reject_work_messages(amqp_settings, "summarizer", 2)
        for task in tasks:
            assert (await sdk.wait(task.id, timeout=30)).status == "dead_lettered"
        letters = [letter async for letter in sdk.dead_letters(specialist="summarizer", page_size=1)]
        assert {letter.task_id for letter in letters} == {t.id for t in tasks}
        assert all(
            letter.reason == "rejected" and letter.task_status == "dead_lettered" for letter in letters
        )
        assert (await sdk.dead_letter(tasks[0].id)).queue.endswith(".work.summarizer")

        await cluster.start_worker("general")
        replayed = await sdk.replay(tasks[0].id, specialist="general")
        assert replayed.status in ("queued", "running", "completed")
        done = await sdk.wait(tasks[0].id, timeout=30)
        assert done.status == "completed" and done.output == "replayed fine" and done.specialist == "general"
        # Its stream tells the whole story, past the dead_lettered event.
        kinds = [event.type async for event in sdk.events(tasks[0].id)]
        assert kinds[kinds.index("dead_lettered") + 1] == "replayed" and kinds[-1] == "completed"

        await sdk.discard(tasks[1].id)
        assert [letter async for letter in sdk.dead_letters()] == []
        with pytest.raises(NotFound):
            await sdk.dead_letter(tasks[1].id)
        assert (await sdk.get(tasks[1].id)).status == "dead_lettered"


@pytest.mark.timeout(240)
async def test_a_group_with_a_reduce_step_and_its_cancel_through_the_sdk(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog, tmp_path: Path
) -> None:
    await devllm.script(cluster.model, [{"content": "one answer"}], repeat_last=True)
    await streaming_cluster(cluster, catalog, tmp_path)
    async with AsyncClient(cluster.api_url, retry=QUICK) as sdk:
        key = f"group-{uuid.uuid4()}"
        tasks = [{"input": f"Summarize item {n}.", "specialist": "general"} for n in range(3)]
        group = await sdk.submit_group(tasks, reduce={"specialist": "general"}, idempotency_key=key)
        assert group.status == "running" and group.total == 3 and len(group.child_ids) == 3
        again = await sdk.submit_group(tasks, reduce={"specialist": "general"}, idempotency_key=key)
        assert again.id == group.id, "the same key names the same group"

        async def finished() -> bool:
            return (await sdk.group(group.id)).status == "completed"

        await eventually(finished, timeout=60, what="the group to complete")
        done = await sdk.group(group.id)
        assert done.counts.get("completed") == 3 and done.reduce_task_id is not None
        reduced = await sdk.wait(done.reduce_task_id, timeout=30)
        assert reduced.status == TaskStatus.COMPLETED

        # Children nobody runs (no summarizer worker): the cancel reaches each of them.
        idle = await sdk.submit_group([{"input": f"never {n}", "specialist": "summarizer"} for n in range(2)])
        cancelled = await sdk.cancel_group(idle.id)
        assert cancelled.status == "cancelled"
        for child in cancelled.child_ids:
            assert (await sdk.get(child)).status == TaskStatus.CANCELLED
        with pytest.raises(NotFound):
            await sdk.group(uuid.uuid4())

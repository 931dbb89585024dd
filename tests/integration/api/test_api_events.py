"""A task's events: the JSON page and the Server-Sent Events stream, in-process and from a real API process
(live events, a client that leaves, a server that stops, idle streams that hold no database connection)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import aio_pika
import httpx
import pytest

from taskyard_common.event_bus import EventNotifier
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.settings import AmqpSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from taskyard_common.topology import Topology
from taskyard_devkit.cluster import CLEAN_EXITS, Cluster
from tests.integration.api.conftest import MakeSettings, assert_problem, serve
from tests.support.polling import eventually
from tests.support.scrape import metric_sum
from tests.support.sse import Frame, events_of, parse_frames, stream_frames

SSE = {"Accept": "text/event-stream"}
DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.5)
# A stream or request that should end does so well within this; far below a hang.
RETURNS_WITHIN = 30


async def submitted(client: httpx.AsyncClient, **headers: str) -> uuid.UUID:
    response = await client.post("/v1/tasks", json={"input": "watch me"}, headers=headers)
    assert response.status_code == 202, response.text
    return uuid.UUID(response.json()["id"])


async def run_to_completion(store: PostgresTaskStore, task_id: uuid.UUID) -> None:
    """routed, attempt_started, completed: events 2, 3 and 4 after accepted."""
    assert await store.route(task_id, DECISION)
    await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
    assert await store.complete(task_id, {"output": "done"}, Usage(total_tokens=3), owner="w")


async def test_the_json_page_reads_the_log_from_a_position(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    task_id = await submitted(client)
    await run_to_completion(store, task_id)

    page = await client.get(f"/v1/tasks/{task_id}/events")
    assert page.status_code == 200 and page.headers["content-type"] == "application/json"
    body = page.json()
    assert [e["type"] for e in body["items"]] == ["accepted", "routed", "attempt_started", "completed"]
    assert [e["seq"] for e in body["items"]] == [1, 2, 3, 4] and body["next_after"] == 4
    completed = body["items"][-1]
    assert completed["data"]["result"] == {"output": "done"} and completed["at"].endswith("Z")
    assert body["items"][1]["data"]["specialist"] == "general"

    page = (await client.get(f"/v1/tasks/{task_id}/events", params={"after": 1, "limit": 2})).json()
    assert [e["seq"] for e in page["items"]] == [2, 3] and page["next_after"] == 3
    page = (await client.get(f"/v1/tasks/{task_id}/events", params={"after": 4})).json()
    assert page == {"items": [], "next_after": 4}, "nothing new: the same position again"
    # Last-Event-ID (what a reconnecting EventSource sends) wins over after.
    page = (
        await client.get(f"/v1/tasks/{task_id}/events", params={"after": 0}, headers={"Last-Event-ID": "3"})
    ).json()
    assert [e["type"] for e in page["items"]] == ["completed"]

    for params, headers in (
        ({"after": -1}, {}),
        ({"after": 2**31}, {}),
        ({"limit": 0}, {}),
        ({"limit": 201}, {}),
        ({}, {"Last-Event-ID": "three"}),
        ({}, {"Last-Event-ID": "-1"}),
    ):
        refused = await client.get(f"/v1/tasks/{task_id}/events", params=params, headers=headers)
        assert_problem(refused, 422, "validation-error")
    assert_problem(await client.get(f"/v1/tasks/{uuid.uuid4()}/events"), 404, "not-found")
    assert_problem(await client.get("/v1/tasks/not-a-uuid/events", headers=SSE), 404, "not-found")


async def test_a_stream_resumes_after_last_event_id_and_ends_after_the_terminal_event(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    task_id = await submitted(client)
    await run_to_completion(store, task_id)
    # In-process, the whole stream arrives at once: it ended by itself after the terminal event.
    stream = await client.get(f"/v1/tasks/{task_id}/events", headers={**SSE, "Last-Event-ID": "2"})
    assert stream.status_code == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-cache"
    frames = parse_frames(stream.text)
    assert [(f.id, f.event) for f in frames] == [("3", "attempt_started"), ("4", "completed")]
    assert frames[1].json["seq"] == 4 and frames[1].json["data"]["result"] == {"output": "done"}
    # ?after= is the position of a first connection; a stream after the terminal event is empty.
    assert [
        f.id
        for f in parse_frames((await client.get(f"/v1/tasks/{task_id}/events?after=1", headers=SSE)).text)
    ] == ["2", "3", "4"]
    ended = await client.get(f"/v1/tasks/{task_id}/events", headers={**SSE, "Last-Event-ID": "4"})
    assert ended.status_code == 200 and ended.text == ""


async def test_another_tenants_events_are_not_found_and_a_reader_may_read(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    keys = KeyStore(store.pool)

    async def bearer(tenant: str, role: Role) -> dict[str, str]:
        _, key = await keys.create(tenant=tenant, role=role, name="test")
        return {"Authorization": f"Bearer {key}"}

    async with serve(make_settings(auth_enabled=True)) as api:
        ours, reader, theirs = (
            await bearer("acme", Role.SUBMITTER),
            await bearer("acme", Role.READER),
            await bearer("globex", Role.ADMIN),
        )
        task_id = await submitted(api, **ours)
        path = f"/v1/tasks/{task_id}/events"
        assert_problem(await api.get(path), 401, "unauthorized")
        assert_problem(await api.get(path, headers=theirs), 404, "not-found")
        assert_problem(await api.get(path, headers={**theirs, **SSE}), 404, "not-found")
        assert_problem(await api.get(f"/v1/tasks/{task_id}?wait=1", headers=theirs), 404, "not-found")
        page = await api.get(path, headers=reader)
        assert page.status_code == 200 and [e["type"] for e in page.json()["items"]] == ["accepted"]


# --- a real API process: live events, leaving clients, stopping servers ---------------------------------


@pytest.fixture
async def notifier(amqp_settings: AmqpSettings, test_id: str) -> AsyncIterator[EventNotifier]:
    """Wake-ups as a worker sends them (the API declared the exchange at its start)."""
    connection = await aio_pika.connect(
        amqp_settings.url.get_secret_value(), client_properties={"connection_name": f"notifier {test_id}"}
    )
    try:
        events_exchange = Topology(amqp_settings.prefix).events_exchange
        wake = await EventNotifier.open(await connection.channel(), events_exchange)
        yield wake
        await wake.close()
    finally:
        await connection.close()


async def next_event(events: AsyncIterator[Frame]) -> Frame:
    return await asyncio.wait_for(anext(events), RETURNS_WITHIN)


async def open_streams(cluster: Cluster) -> int:
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as client:
        metrics = (await client.get("/metrics")).text
    return int(metric_sum(metrics, "taskyard_event_streams_open"))


async def test_a_live_stream_gets_events_as_they_are_written_woken_through_rabbitmq(
    cluster: Cluster, store: PostgresTaskStore, notifier: EventNotifier
):
    # Polling once a minute: within this test, only wake-ups can deliver the events in time.
    await cluster.start_api(TASKYARD_API_WATCH_POLL_SECONDS="60")
    store.on_change = notifier.notify
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=RETURNS_WITHIN) as client:
        task_id = await submitted(client)
        async with client.stream("GET", f"/v1/tasks/{task_id}/events", headers=SSE) as stream:
            events = events_of(stream)
            assert (await next_event(events)).event == "accepted"
            assert await store.route(task_id, DECISION)
            assert (await next_event(events)).event == "routed"
            await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
            assert await store.append_events(
                task_id, "w", [("token", {"text": "4"}), ("token", {"text": "2"})]
            )
            assert [(await next_event(events)).seq for _ in range(3)] == [3, 4, 5]
            assert await store.complete(task_id, {"output": "42"}, Usage(), owner="w")
            last = await next_event(events)
            assert (last.seq, last.event) == (6, "completed")
            rest = await asyncio.wait_for(_drain(events), RETURNS_WITHIN)
            assert rest == [], "the stream ends after the terminal event"


async def _drain(events: AsyncIterator[Frame]) -> list[Frame]:
    return [frame async for frame in events]


async def test_a_client_that_leaves_and_a_server_that_stops_end_their_streams_cleanly(
    cluster: Cluster, store: PostgresTaskStore
):
    # A pool of two connections and more open streams than that: idle streams hold none.
    api = await cluster.start_api(TASKYARD_DB_POOL_MAX_SIZE="2", TASKYARD_API_SSE_HEARTBEAT_SECONDS="0.2")
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=RETURNS_WITHIN) as client:
        task_id = await submitted(client)
        leaving = client.stream("GET", f"/v1/tasks/{task_id}/events", headers=SSE)
        stream = await leaving.__aenter__()
        frames = events_of(stream)
        assert (await next_event(frames)).event == "accepted"
        await leaving.__aexit__(None, None, None)  # the client leaves

        async def none_open() -> bool:
            return await open_streams(cluster) == 0

        await eventually(none_open, timeout=RETURNS_WITHIN, what="the stream of a client gone to close")

        readers = [Reader() for _ in range(5)]
        async with asyncio.TaskGroup() as group:
            for reader in readers:
                group.create_task(reader.read_until_closed(client, task_id))

            async def all_heard() -> bool:
                return all(r.heartbeats and r.frames for r in readers) and await open_streams(cluster) == 5

            await eventually(
                all_heard, timeout=RETURNS_WITHIN, what="five open streams, each with a heartbeat"
            )
            reads = [await client.get(f"/v1/tasks/{task_id}") for _ in range(3)]
            assert [r.status_code for r in reads] == [200] * 3, "idle streams pin no database connection"
            # SIGTERM: the streams end (each body completes), then the process exits cleanly.
            assert await asyncio.to_thread(api.stop, RETURNS_WITHIN) in CLEAN_EXITS
        for reader in readers:
            assert [f.event for f in reader.frames] == ["accepted"] and reader.ended


class Reader:
    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.heartbeats = 0
        self.ended = False

    async def read_until_closed(self, client: httpx.AsyncClient, task_id: uuid.UUID) -> None:
        async with client.stream("GET", f"/v1/tasks/{task_id}/events", headers=SSE) as stream:
            async for frame in stream_frames(stream):
                if frame.comment is not None:
                    self.heartbeats += 1
                else:
                    self.frames.append(frame)
        self.ended = True

"""Following a task: the event stream resumed after a dropped connection (every event once, in order),
long-polls with the ETag, and lists read page after page; for Client and AsyncClient alike."""

from __future__ import annotations

import httpx
import pytest

from taskyard_client import StreamBroken, WaitTimeout
from taskyard_client.retry import RetryPolicy
from tests.unit.client.fakes import Handler, async_client, client, event_json, frames, sse, task_document

TASK = "0b7d9a0e-3d55-4bd4-9d0c-4a51c5a3c5a1"
EVENTS = [
    event_json(1, "accepted", specialist=None),
    event_json(2, "routed", specialist="general", method="rules", confidence=0.5),
    event_json(3, "attempt_started", attempt=1),
    event_json(4, "token", step=1, text="Hel"),
    event_json(5, "token", step=1, text="lo"),
    event_json(6, "completed", result={"output": "Hello"}),
]


def resuming_api(seen: list[str | None]) -> Handler:
    """Drops the first connection after three events, ends the second cleanly after the fourth (as a
    stopping API does), and sends the rest on the third; repeats the third event to check it is skipped."""

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept"] == "text/event-stream"
        seen.append(request.headers.get("last-event-id"))
        if len(seen) == 1:
            return sse(frames(*EVENTS[:3]), drop=True)
        if len(seen) == 2:
            return sse(frames(*EVENTS[2:4]))
        return sse(frames(*EVENTS[4:]))

    return handle


def test_a_dropped_stream_is_resumed_with_last_event_id():
    seen: list[str | None] = []
    with client(resuming_api(seen)) as sdk:
        events = list(sdk.events(TASK))
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert seen == ["0", "3", "4"]
    assert events[-1].terminal and events[-1].data["result"]["output"] == "Hello"


async def test_the_async_stream_resumes_the_same_way():
    seen: list[str | None] = []
    async with async_client(resuming_api(seen)) as sdk:
        events = [event async for event in sdk.events(TASK, after=0)]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6] and seen == ["0", "3", "4"]


def test_a_stream_of_a_task_that_ended_before_the_position_reads_the_rest_and_stops():
    def api(request: httpx.Request) -> httpx.Response:
        if request.headers.get("accept") == "text/event-stream":
            return sse(b": nothing after your position\n\n")
        if request.url.path.endswith("/events"):
            after = int(request.url.params["after"])
            return httpx.Response(
                200, json={"items": [e for e in EVENTS if e["seq"] > after], "next_after": 6}
            )
        return httpx.Response(200, json=task_document("completed", id=TASK))

    with client(api) as sdk:
        assert [e.seq for e in sdk.events(TASK, after=6)] == []
        assert [e.seq for e in sdk.events(TASK, after=4)] == [5, 6]


def test_a_stream_that_keeps_failing_gives_up_with_its_position():
    def api(request: httpx.Request) -> httpx.Response:
        if request.headers.get("last-event-id") == "0":
            return sse(frames(EVENTS[0]), drop=True)
        raise httpx.ConnectError("refused")

    with (
        client(api, retry=RetryPolicy(max_attempts=3, base_delay=0)) as sdk,
        pytest.raises(StreamBroken) as raised,
    ):
        list(sdk.events(TASK))
    assert raised.value.last_event_id == 1


def test_wait_long_polls_with_the_etag_until_the_end():
    requests: list[httpx.Request] = []

    def api(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if len(requests) == 1:
            return httpx.Response(200, json=task_document("queued", id=TASK), headers={"ETag": 'W/"2.1"'})
        if len(requests) == 2:
            return httpx.Response(304, headers={"ETag": 'W/"2.1"'})
        if len(requests) == 3:
            return httpx.Response(200, json=task_document("running", id=TASK), headers={"ETag": 'W/"3.2"'})
        return httpx.Response(200, json=task_document("completed", id=TASK), headers={"ETag": 'W/"9.3"'})

    with client(api) as sdk:
        assert sdk.wait(TASK, poll=20).status == "completed"
    polls = requests[1:]
    assert [r.headers.get("if-none-match") for r in polls] == ['W/"2.1"', 'W/"2.1"', 'W/"3.2"']
    assert all(r.url.params["wait"] == "20.000" for r in polls)


async def test_wait_gives_up_after_its_timeout_with_the_last_state():
    def api(request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            return httpx.Response(304, headers={"ETag": 'W/"1.1"'})
        return httpx.Response(200, json=task_document("queued", id=TASK), headers={"ETag": 'W/"1.1"'})

    async with async_client(api) as sdk:
        with pytest.raises(WaitTimeout) as raised:
            await sdk.wait(TASK, timeout=0.3, poll=0.1)
    assert raised.value.task.status == "queued"


def test_list_reads_every_page_and_stops_at_the_limit():
    cursors: list[str | None] = []

    def api(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        cursors.append(cursor)
        page = int(cursor or 0)
        items = [task_document("completed") for _ in range(2)]
        return httpx.Response(200, json={"items": items, "next_cursor": str(page + 1) if page < 2 else None})

    with client(api) as sdk:
        assert len(list(sdk.list(status="completed", page_size=2))) == 6
        assert cursors == [None, "1", "2"]
        cursors.clear()
        assert len(list(sdk.list(limit=3))) == 3
        assert cursors == [None, "1"]

"""Watching tasks without a broker or a database: ETags, content negotiation, the watcher's bookkeeping and
poll, event streams and long-polls over a fake store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from uuid import UUID, uuid4

from prometheus_client import REGISTRY

from taskyard_api.bus import BusLink
from taskyard_api.http.etag import client_has_current, task_etag
from taskyard_api.watching.long_poll import wait_for_change
from taskyard_api.watching.stream import HEARTBEAT, event_frame, event_stream, wants_event_stream
from taskyard_api.watching.watcher import Watcher
from taskyard_common.errors import StoreUnavailable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage
from taskyard_common.store import TaskRecord, TaskStore
from taskyard_common.store.events import TaskEvent
from tests.support.polling import eventually
from tests.support.sse import parse_frames

T0 = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)


def record(
    task_id: UUID, *, seq: int = 1, updated_at: datetime = T0, status=TaskStatus.PENDING
) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        status=status,
        input="x",
        metadata={},
        requested_specialist=None,
        specialist=None,
        routing=None,
        attempts=0,
        result=None,
        error=None,
        usage=Usage(),
        created_at=T0,
        published_at=None,
        routed_at=None,
        started_at=None,
        finished_at=None,
        updated_at=updated_at,
        event_seq=seq,
    )


class FakeStore:
    """One task's event log and row, changed by the test."""

    def __init__(self, task_id: UUID) -> None:
        self.task_id = task_id
        self.log: list[TaskEvent] = []
        self.row: TaskRecord | None = record(task_id, seq=0)
        self.away = False
        self.event_reads = 0

    def add(self, type_: str, **data: Any) -> None:
        self.log.append(TaskEvent(seq=len(self.log) + 1, type=type_, data=data, at="2030-05-01T12:00:00Z"))
        assert self.row is not None
        self.row = self.row.model_copy(
            update={"event_seq": len(self.log), "updated_at": self.row.updated_at + timedelta(seconds=1)}
        )

    async def events(self, task_id: UUID, *, after: int = 0, limit: int = 100) -> list[TaskEvent]:
        self.event_reads += 1
        if self.away:
            raise StoreUnavailable("away")
        return [e for e in self.log if e.seq > after][:limit]

    async def get(self, task_id: UUID) -> TaskRecord | None:
        return self.row

    async def versions(
        self, task_ids: Sequence[UUID], *, watch_seconds: float | None = None
    ) -> dict[UUID, tuple[int, datetime]]:
        if self.row is None or self.task_id not in task_ids:
            return {}
        return {self.task_id: (self.row.event_seq, self.row.updated_at)}


def make_watcher(store: FakeStore, poll_seconds: float = 60) -> Watcher:
    # No broker here: the watcher's background rounds are not started, the test drives them.
    return Watcher(cast(TaskStore, store), cast(BusLink, None), "p.events", poll_seconds=poll_seconds)


def gauge(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None
    return value


async def take(stream: AsyncGenerator[bytes, None], count: int) -> list[bytes]:
    return [await anext(stream) for _ in range(count)]


def test_the_etag_names_the_version_and_if_none_match_compares_weakly():
    task_id = uuid4()
    tag = task_etag(record(task_id, seq=3))
    assert tag.startswith('W/"') and tag.endswith('"')
    assert task_etag(record(task_id, seq=3)) == tag
    assert task_etag(record(task_id, seq=4)) != tag
    assert task_etag(record(task_id, seq=3, updated_at=T0 + timedelta(microseconds=1))) != tag
    assert client_has_current(tag, tag)
    assert client_has_current(tag.removeprefix("W/"), tag), "weak comparison: the W/ does not matter"
    assert client_has_current(f'"other", {tag}', tag)
    assert client_has_current("*", tag)
    assert not client_has_current(None, tag)
    assert not client_has_current('W/"1.2"', tag)
    assert not client_has_current("", tag)


def test_the_stream_is_chosen_by_the_accept_header():
    assert wants_event_stream("text/event-stream")
    assert wants_event_stream("application/json;q=0.5, Text/Event-Stream")
    assert wants_event_stream("text/event-stream; q=0.1")
    assert not wants_event_stream("text/event-stream;q=0")
    assert not wants_event_stream("text/event-stream;q=x")
    assert not wants_event_stream(None)
    assert not wants_event_stream("*/*")
    assert not wants_event_stream("application/json")


def test_a_frame_carries_id_type_and_the_event_as_one_line_of_json():
    event = TaskEvent(seq=7, type="token", data={"text": "two\nlines"}, at="2030-05-01T12:00:00Z")
    [frame] = parse_frames(event_frame(event).decode())
    assert (frame.id, frame.event) == ("7", "token")
    assert frame.json == {
        "seq": 7,
        "type": "token",
        "data": {"text": "two\nlines"},
        "at": "2030-05-01T12:00:00Z",
    }


async def test_a_task_is_watched_while_someone_watches_it():
    store = FakeStore(uuid4())
    watcher = make_watcher(store)
    with watcher.watch(store.task_id), watcher.watch(store.task_id):
        assert watcher.watched == 1
    assert watcher.watched == 0
    with watcher.watch(store.task_id) as watch:
        watcher.drain()
        assert watch.closing and await watch.wait(60)
    with watcher.watch(store.task_id) as late:
        assert late.closing, "after a drain, a new watch ends at once"


async def test_the_poll_wakes_the_waiters_behind_their_task_and_only_those():
    store = FakeStore(uuid4())
    store.add("accepted")
    watcher = make_watcher(store)
    assert store.row is not None
    with watcher.watch(store.task_id) as events, watcher.watch(store.task_id) as document:
        await watcher._check([store.task_id])
        assert await events.wait(0) and await document.wait(0), "they have seen nothing yet"
        events.rearm()
        document.rearm()
        events.saw(1)
        document.saw(1, store.row.updated_at)
        await watcher._check([store.task_id])
        assert not await events.wait(0) and not await document.wait(0), "nothing new: no one woken"
        store.row = store.row.model_copy(update={"updated_at": store.row.updated_at + timedelta(seconds=1)})
        await watcher._check([store.task_id])
        assert not await events.wait(0), "no new event"
        assert await document.wait(0), "the document changed"
        store.add("routed")
        await watcher._check([store.task_id])
        assert await events.wait(0)
        events.rearm()
        store.row = None
        await watcher._check([store.task_id])
        assert await events.wait(0) and events.gone


async def test_a_stream_sends_stored_then_live_events_and_ends_after_the_terminal_one():
    store = FakeStore(uuid4())
    watcher = make_watcher(store)
    for kind in ("accepted", "routed", "attempt_started"):
        store.add(kind)
    opened = gauge("taskyard_event_streams_open")
    stream = event_stream(
        cast(TaskStore, store), watcher, store.task_id, after=1, heartbeat_seconds=60, retry_seconds=1
    )
    frames = parse_frames(b"".join(await take(stream, 2)).decode())
    assert [f.id for f in frames] == ["2", "3"], "after the position, in order"
    assert gauge("taskyard_event_streams_open") == opened + 1
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    store.add("tool_call", name="calculator")
    store.add("completed")
    watcher._wake(store.task_id)
    frames = parse_frames((await waiting + await anext(stream)).decode())
    assert [(f.id, f.event) for f in frames] == [("4", "tool_call"), ("5", "completed")]
    assert [chunk async for chunk in stream] == [], "the stream ends after the terminal event"
    assert watcher.watched == 0 and gauge("taskyard_event_streams_open") == opened


async def test_an_idle_stream_sends_heartbeats_and_ends_when_the_api_stops():
    store = FakeStore(uuid4())
    store.add("accepted")
    watcher = make_watcher(store)
    stream = event_stream(
        cast(TaskStore, store), watcher, store.task_id, after=1, heartbeat_seconds=0.01, retry_seconds=1
    )
    assert await take(stream, 2) == [HEARTBEAT, HEARTBEAT]
    watcher.drain()
    assert [chunk async for chunk in stream if chunk != HEARTBEAT] == []
    assert watcher.watched == 0


async def test_a_stream_outlives_a_database_blip_and_a_client_that_leaves_frees_its_watch():
    store = FakeStore(uuid4())
    store.away = True
    watcher = make_watcher(store)
    opened = gauge("taskyard_event_streams_open")
    stream = event_stream(
        cast(TaskStore, store), watcher, store.task_id, after=0, heartbeat_seconds=60, retry_seconds=0.01
    )
    waiting = asyncio.ensure_future(anext(stream))

    async def retried() -> bool:
        return store.event_reads >= 3

    await eventually(retried, timeout=10, what="the stream to read the store again")
    store.away = False
    store.add("accepted")
    assert parse_frames((await waiting).decode())[0].event == "accepted", "read again after the retry delay"
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.01)
    waiting.cancel()  # the client left: the server cancels the stream where it waits
    await asyncio.gather(waiting, return_exceptions=True)
    await stream.aclose()
    assert watcher.watched == 0 and gauge("taskyard_event_streams_open") == opened


async def test_a_long_poll_answers_on_a_change_at_its_limit_or_when_the_api_stops():
    store = FakeStore(uuid4())
    store.add("accepted")
    watcher = make_watcher(store)
    assert store.row is not None
    tag = task_etag(store.row)
    polls = gauge("taskyard_long_polls_in_progress")
    waiting = asyncio.ensure_future(wait_for_change(cast(TaskStore, store), watcher, store.task_id, tag, 60))
    await asyncio.sleep(0.01)
    assert not waiting.done() and gauge("taskyard_long_polls_in_progress") == polls + 1
    watcher._wake(store.task_id)  # a wake-up without a change: it reads, and waits on
    await asyncio.sleep(0.01)
    assert not waiting.done()
    store.add("routed")
    watcher._wake(store.task_id)
    changed = await waiting
    assert changed is not None and changed.event_seq == 2
    assert gauge("taskyard_long_polls_in_progress") == polls and watcher.watched == 0

    tag = task_etag(changed)
    unchanged = await wait_for_change(cast(TaskStore, store), watcher, store.task_id, tag, 0.01)
    assert unchanged is not None and task_etag(unchanged) == tag
    waiting = asyncio.ensure_future(wait_for_change(cast(TaskStore, store), watcher, store.task_id, tag, 60))
    await asyncio.sleep(0.01)
    watcher.drain()
    assert await waiting == unchanged

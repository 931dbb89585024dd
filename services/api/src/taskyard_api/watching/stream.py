"""``GET /v1/tasks/{task_id}/events`` as Server-Sent Events: the stored events after a position, then the
live ones as they are written, until the task's terminal event.

Each event is one frame: ``id: <seq>``, ``event: <type>``, ``data: <{seq, type, data, at} as JSON>``, so a
client that reconnects sends the last ``id`` back as ``Last-Event-ID`` and gets every later event exactly
once (the log is numbered per task, in commit order). While idle the stream sends a comment line every
``TASKYARD_API_SSE_HEARTBEAT_SECONDS`` and holds no database connection: it only reads the store when its
watch wakes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from uuid import UUID

from starlette.responses import StreamingResponse
from starlette.types import Send

from taskyard_api.watching.watcher import Watcher
from taskyard_common.errors import StoreUnavailable
from taskyard_common.lifecycle import TERMINAL
from taskyard_common.metrics import EVENT_STREAMS_OPEN
from taskyard_common.store import TaskStore
from taskyard_common.store.events import TaskEvent

log = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
HEARTBEAT = b": heartbeat\n\n"
# The event types after which a task has nothing more to say (unless a dead letter is replayed).
TERMINAL_EVENTS = frozenset(status.value for status in TERMINAL)
# Events read at once; a longer backlog is sent in several reads.
_READ_SIZE = 200


def wants_event_stream(accept: str | None) -> bool:
    """Whether the ``Accept`` header asks for ``text/event-stream`` (and does not refuse it with q=0)."""
    for media_range in (accept or "").split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() != MEDIA_TYPE:
            continue
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def event_frame(event: TaskEvent) -> bytes:
    # The JSON is compact (one line), and the type one of the store's words: no line to split.
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()


async def event_stream(
    store: TaskStore,
    watcher: Watcher,
    task_id: UUID,
    *,
    after: int,
    heartbeat_seconds: float,
    retry_seconds: float,
) -> AsyncGenerator[bytes, None]:
    """The frames of the task's events numbered above ``after``, ending after a terminal event (the caller
    sends nothing when the task had finished by ``after``), when the task is gone or the API stops.

    Its cleanup is synchronous, so a cancelled stream (the client left) always leaves its watch."""
    loop = asyncio.get_running_loop()
    EVENT_STREAMS_OPEN.inc()
    try:
        with watcher.watch(task_id) as watch:
            beat_at = loop.time() + heartbeat_seconds
            last_type: str | None = None
            while not watch.closing:
                watch.rearm()
                healthy = True
                try:
                    events = await store.events(task_id, after=after, limit=_READ_SIZE)
                except StoreUnavailable as exc:
                    # Keep the stream: read again after the poll interval, heartbeats meanwhile.
                    log.debug("event stream of task %s: store unavailable (%s)", task_id, exc)
                    events, healthy = [], False
                for event in events:
                    yield event_frame(event)
                if events:
                    after, last_type = events[-1].seq, events[-1].type
                    if len(events) == _READ_SIZE:
                        continue
                if healthy:
                    watch.saw(after)
                if last_type in TERMINAL_EVENTS or watch.gone:
                    return
                while True:
                    now = loop.time()
                    if now >= beat_at:
                        yield HEARTBEAT
                        beat_at = now + heartbeat_seconds
                    timeout = beat_at - now if healthy else min(beat_at - now, retry_seconds)
                    if await watch.wait(timeout) or not healthy:
                        break
    finally:
        EVENT_STREAMS_OPEN.dec()


class EventStreamResponse(StreamingResponse):
    """``text/event-stream``, uncached and unbuffered by proxies; the stream is closed as soon as the
    response ends, whether it finished, the client left or the server stops."""

    media_type = MEDIA_TYPE

    def __init__(self, frames: AsyncGenerator[bytes, None] | None) -> None:
        super().__init__(
            frames if frames is not None else _nothing(),
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._frames = frames

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            if self._frames is not None:
                await self._frames.aclose()


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # an async generator that ends at once

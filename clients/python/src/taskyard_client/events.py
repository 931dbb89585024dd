"""Server-Sent Events: an incremental parser (the WHATWG rules), and the position of a task's event stream
that lets a dropped connection resume with ``Last-Event-ID`` and never yield an event twice."""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from taskyard_client.models import TaskEvent

MEDIA_TYPE = "text/event-stream"


@dataclass(frozen=True)
class ServerSentEvent:
    event: str  # "message" when the frame named none
    data: str
    id: str | None  # the stream's last event id when this one was dispatched
    retry: int | None  # the reconnection time (ms) the stream asked for, if any


class SseParser:
    """Feed it the bytes of a stream as they arrive; it returns the events completed so far.

    Lines end with CRLF, LF or CR (a CR at the end of a chunk waits for the next, which may start with LF);
    ``data`` lines are joined with newlines; comments (``: heartbeat``) and unknown fields are ignored; a
    frame without data dispatches nothing; ``id`` persists across frames, as in a browser.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self.last_id: str | None = None
        self.retry: int | None = None
        self._first = True

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        return self._feed_text(self._decoder.decode(chunk))

    def close(self) -> list[ServerSentEvent]:
        """The end of the stream: a line without its line end and an unfinished frame (no blank line after
        it) are dropped, as the specification says."""
        text = self._decoder.decode(b"", final=True)
        events = self._feed_text(text)
        if self._buffer:
            # Only a trailing CR can complete a line here (it was waiting for a possible LF).
            last = self._line(self._buffer.removesuffix("\r")) if self._buffer.endswith("\r") else None
            self._buffer = ""
            if last is not None:
                events.append(last)
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if self._first and text:
            text = text.removeprefix("\ufeff")  # a byte order mark at the very start is ignored
            self._first = False
        self._buffer += text
        events: list[ServerSentEvent] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return events
            end, after = cut
            line, self._buffer = self._buffer[:end], self._buffer[after:]
            dispatched = self._line(line)
            if dispatched is not None:
                events.append(dispatched)

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self.last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return ServerSentEvent(
            event=event or "message", data="\n".join(data), id=self.last_id, retry=self.retry
        )


def _line_end(buffer: str) -> tuple[int, int] | None:
    """Where the first line of ``buffer`` ends, and where the next begins; None while incomplete."""
    for index, char in enumerate(buffer):
        if char == "\n":
            return index, index + 1
        if char == "\r":
            if index + 1 == len(buffer):
                return None  # maybe the first half of CRLF
            return index, index + 2 if buffer[index + 1] == "\n" else index + 1
    return None


class EventCursor:
    """Where a task's event stream stands: the last event number seen, sent back as ``Last-Event-ID`` on
    every (re)connection, so the API resumes after it; an event at or below it (a repeat) is skipped.

    The stream is finished when the API ends it after a terminal event. Not at the terminal event itself:
    a dead letter that was replayed goes on (``dead_lettered``, ``replayed``, ... ``completed``), and the
    API sends what it has before it ends the stream."""

    def __init__(self, after: int = 0) -> None:
        self.last_seq = after
        self.last_terminal = False
        self.finished = False

    def headers(self) -> dict[str, str]:
        return {"Accept": MEDIA_TYPE, "Last-Event-ID": str(self.last_seq)}

    def take(self, sse: ServerSentEvent) -> TaskEvent | None:
        """The task event a frame carries, unless it is a repeat; a terminal one finishes the stream."""
        event = TaskEvent.model_validate_json(sse.data)
        return self.take_event(event)

    def take_event(self, event: TaskEvent) -> TaskEvent | None:
        if event.seq <= self.last_seq:
            return None
        self.last_seq = event.seq
        self.last_terminal = event.terminal
        return event

    def stream_ended(self) -> None:
        """The API ended the stream: finished if the last event was terminal (else it was stopping)."""
        self.finished = self.last_terminal

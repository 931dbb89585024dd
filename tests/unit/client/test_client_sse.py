"""The SSE parser (WHATWG rules, any chunking) and the stream position that makes resumption exact."""

from __future__ import annotations

import json

import pytest

from taskyard_client.events import EventCursor, ServerSentEvent, SseParser

STREAM = (
    b": heartbeat\n\n"
    b'id: 1\nevent: accepted\ndata: {"seq":1,"type":"accepted","data":{},"at":"2025-05-01T09:30:00Z"}\n\n'
    b'id: 2\r\nevent: token\r\ndata: {"seq":2,"type":"token",\r\ndata: "data":{"step":1,"text":"h\xc3\xa9"},"at":"2025-05-01T09:30:01Z"}\r\n\r\n'
    b'id: 3\revent: completed\rdata: {"seq":3,"type":"completed","data":{},"at":"2025-05-01T09:30:02Z"}\r\r'
)


def parse_in_chunks(stream: bytes, size: int) -> list[ServerSentEvent]:
    parser = SseParser()
    events = []
    for start in range(0, len(stream), size):
        events += parser.feed(stream[start : start + size])
    return events + parser.close()


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_frames_come_out_the_same_however_the_bytes_are_cut(size: int):
    events = parse_in_chunks(STREAM, size)
    assert [(e.id, e.event) for e in events] == [("1", "accepted"), ("2", "token"), ("3", "completed")]
    # Two data lines are joined with a newline; a UTF-8 character cut in two is put back together.
    token = events[1]
    assert token.data.split("\n")[1].startswith('"data":')
    assert json.loads(token.data.replace("\n", ""))["data"]["text"] == "hé"


def test_rules_of_the_format():
    parser = SseParser()
    events = parser.feed(
        "\ufeffdata\n\n".encode()  # a field without a colon has an empty value; a leading BOM is ignored
        + b"data:no space\nunknown: ignored\nretry: 1500\n\n"
        + b"id: 7\n\n"  # no data: nothing is dispatched, but the id sticks
        + b"data: after\n\n"
        + b"event: x\ndata: unfinished"
    )
    assert [(e.event, e.data, e.id) for e in events] == [
        ("message", "", None),
        ("message", "no space", None),
        ("message", "after", "7"),
    ]
    assert parser.retry == 1500
    assert parser.close() == [], "a frame without its blank line is dropped at the end"


def test_a_lone_cr_at_a_chunk_end_waits_for_what_follows():
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert [e.data for e in parser.feed(b"\n\r\n")] == ["a"]
    assert [e.data for e in parser.feed(b"data: b\r\r")] == []  # the second CR may start a CRLF
    assert [e.data for e in parser.close()] == ["b"]


def frame(seq: int, kind: str) -> ServerSentEvent:
    body = {"seq": seq, "type": kind, "data": {}, "at": "2025-05-01T09:30:00Z"}
    return ServerSentEvent(event=kind, data=json.dumps(body), id=str(seq), retry=None)


def test_the_cursor_skips_repeats_and_finishes_only_when_the_stream_ends_after_a_terminal_event():
    cursor = EventCursor(after=2)
    assert cursor.headers()["Last-Event-ID"] == "2"
    assert cursor.take(frame(2, "routed")) is None, "at or below the position: a repeat"
    assert cursor.take(frame(3, "dead_lettered")) is not None
    # A replayed dead letter goes on past its terminal event, in the same stream.
    assert not cursor.finished
    assert cursor.take(frame(4, "replayed")) is not None
    cursor.stream_ended()
    assert not cursor.finished, "the stream ended after a non-terminal event: the API was stopping"
    assert cursor.headers()["Last-Event-ID"] == "4"
    assert cursor.take(frame(5, "completed")) is not None
    cursor.stream_ended()
    assert cursor.finished

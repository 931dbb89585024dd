"""A streamed reply's chunks folded into the reply the whole-reply call returns, and its token events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid4

import pytest
from openai.types.chat import ChatCompletionChunk

from taskyard_common.model_specs import ModelSpec
from taskyard_worker.llm_calls import reply_of, usage_of
from taskyard_worker.streaming import ChunkAccumulator, accumulate
from taskyard_worker.tokens import TokenStream


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> ChatCompletionChunk:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return ChatCompletionChunk.model_validate(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": choices,
            **extra,
        }
    )


def call_delta(index: int, arguments: str, *, call_id: str | None = None, name: str | None = None) -> dict:
    part: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        part |= {"id": call_id, "type": "function"}
        part["function"]["name"] = name
    return {"tool_calls": [part]}


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def test_content_deltas_make_the_answer_and_the_last_chunk_its_usage():
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Queues"}),
        chunk({"content": " decouple"}),
        chunk({"content": " services."}),
        chunk({}, "stop"),
        chunk(usage=USAGE),
    ]
    accumulator = ChunkAccumulator()
    assert [accumulator.add(c) for c in chunks] == ["", "Queues", " decouple", " services.", "", ""]
    completion = accumulator.completion()
    assert reply_of(completion) == {"role": "assistant", "content": "Queues decouple services."}
    assert completion.choices[0].finish_reason == "stop"
    assert usage_of(completion, "m").model_dump() == USAGE | {"cost": 0.0, "model": "m"}
    priced = ModelSpec(name="m", input_price_per_mtok=1.0, output_price_per_mtok=4.0)
    assert usage_of(completion, "m", priced).cost == pytest.approx((12 * 1.0 + 3 * 4.0) / 1_000_000)
    assert (completion.id, completion.model, completion.object) == ("c1", "m", "chat.completion")


def test_tool_call_deltas_are_joined_by_index_even_interleaved():
    chunks = [
        chunk({"role": "assistant"}),
        chunk(call_delta(0, "", call_id="call_a", name="calculator")),
        chunk(call_delta(1, '{"expr', call_id="call_b", name="http_fetch")),
        chunk(call_delta(0, '{"expression": ')),
        chunk(call_delta(1, 'ession": "x"}')),
        chunk(call_delta(0, '"6 * 7"}')),
        chunk({}, "tool_calls"),
    ]
    accumulator = ChunkAccumulator()
    assert [accumulator.add(c) for c in chunks] == [""] * len(chunks)
    assert accumulator.has_tool_calls
    assert reply_of(accumulator.completion()) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "6 * 7"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "http_fetch", "arguments": '{"expression": "x"}'},
            },
        ],
    }


def test_text_before_a_tool_call_stays_the_reply_content_as_a_whole_reply_has_it():
    completion = accumulate(
        [
            chunk({"content": "Let me compute."}),
            chunk(call_delta(0, "{}", call_id="c", name="calculator")),
            chunk({}, "tool_calls"),
        ]
    )
    assert reply_of(completion)["content"] == "Let me compute."


def test_no_usage_chunk_counts_zero_tokens_and_a_refusal_is_the_answer():
    completion = accumulate([chunk({"refusal": "I can"}), chunk({"refusal": "not."}), chunk({}, "stop")])
    assert usage_of(completion, "m").total_tokens == 0
    assert reply_of(completion) == {"role": "assistant", "content": "I cannot."}


def test_an_unfinished_stream_has_no_finish_reason_and_an_odd_one_reads_as_stop():
    accumulator = ChunkAccumulator()
    accumulator.add(chunk({"content": "half"}))
    assert accumulator.finish_reason is None
    odd = chunk({}, "stop")
    odd.choices[0].finish_reason = "eos"  # type: ignore[assignment]  # the SDK builds chunks unvalidated
    accumulator.add(odd)
    assert accumulator.completion().choices[0].finish_reason == "stop"


# --- token events -----------------------------------------------------------------------------------------


class EventLog:
    def __init__(self, *, held: bool = True, error: Exception | None = None) -> None:
        self.appends: list[list[tuple[str, dict[str, Any]]]] = []
        self.held = held
        self.error = error

    async def append_events(
        self, task_id: UUID, owner: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> bool:
        self.appends.append(list(events))
        if self.error is not None:
            raise self.error
        return self.held


def stream(events: EventLog) -> TokenStream:
    # An interval far longer than any test: only a reply's end (finish) sends.
    return TokenStream(events, uuid4(), "owner", flush_seconds=3600)


async def test_a_replys_deltas_go_out_as_one_event_when_it_ends():
    events = EventLog()
    tokens = stream(events)
    tokens.begin(1)
    for piece in ["Queues", " decouple", " services."]:
        tokens.text(piece)
    assert events.appends == []
    await tokens.finish()
    assert events.appends == [[("token", {"step": 1, "text": "Queues decouple services."})]]
    await tokens.finish()
    assert len(events.appends) == 1, "nothing left, nothing sent"
    tokens.close()


async def test_a_flush_interval_of_zero_sends_on_the_next_turn():
    events = EventLog()
    tokens = TokenStream(events, uuid4(), "owner", flush_seconds=0)
    tokens.begin(1)
    tokens.text("a")
    tokens.text("b")
    for _ in range(10):  # a few turns of the event loop, no wall-clock wait
        await asyncio.sleep(0)
    assert events.appends == [[("token", {"step": 1, "text": "ab"})]]
    tokens.close()


async def test_a_retry_voids_the_text_sent_with_a_restart_marker_and_drops_the_rest():
    events = EventLog()
    tokens = stream(events)
    tokens.begin(2)
    tokens.text("first try")
    await tokens.finish()  # as the interval timer would, mid-stream
    tokens.text(" unsent")
    tokens.restart()
    tokens.text("second try")
    await tokens.finish()
    assert events.appends[1] == [
        ("token", {"step": 2, "restart": True}),
        ("token", {"step": 2, "text": "second try"}),
    ]
    # A failure with nothing sent since the marker adds no second marker.
    tokens.restart()
    tokens.restart()
    await tokens.finish()
    assert events.appends[2] == [("token", {"step": 2, "restart": True})] and len(events.appends) == 3
    tokens.close()


async def test_a_tool_call_reply_sends_no_text_and_voids_what_went_out():
    events = EventLog()
    tokens = stream(events)
    tokens.begin(1)
    tokens.text("unsent")
    tokens.mute()
    tokens.text("ignored")
    await tokens.finish()
    assert events.appends == []
    tokens.begin(2)  # the next call streams again
    tokens.text("sent")
    await tokens.finish()
    tokens.mute()
    await tokens.finish()
    assert events.appends == [
        [("token", {"step": 2, "text": "sent"})],
        [("token", {"step": 2, "restart": True})],
    ]
    tokens.close()


async def test_a_refused_append_stops_the_tokens_and_logs_once(caplog: pytest.LogCaptureFixture):
    events = EventLog(held=False)
    tokens = stream(events)
    with caplog.at_level(logging.WARNING, logger="taskyard_worker.tokens"):
        for step in (1, 2):
            tokens.begin(step)
            tokens.text("more")
            await tokens.finish()
    assert len(events.appends) == 1
    assert len([r for r in caplog.records if "refused" in r.message]) == 1
    tokens.close()


async def test_a_store_error_loses_the_batch_not_the_run(caplog: pytest.LogCaptureFixture):
    events = EventLog(error=ConnectionError("database away"))
    tokens = stream(events)
    with caplog.at_level(logging.WARNING, logger="taskyard_worker.tokens"):
        for step in (1, 2):
            tokens.begin(step)
            tokens.text("text")
            await tokens.finish()
    assert len(events.appends) == 2, "the next batch is tried"
    assert len([r for r in caplog.records if "not appended" in r.message]) == 1
    tokens.close()

"""Reading Server-Sent Events the way a client does: frames split on blank lines, fields by name."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Frame:
    id: str | None = None
    event: str | None = None
    data: str | None = None
    comment: str | None = None

    @property
    def seq(self) -> int:
        assert self.id is not None, self
        return int(self.id)

    @property
    def json(self) -> dict[str, Any]:
        assert self.data is not None, self
        parsed: dict[str, Any] = json.loads(self.data)
        return parsed


def parse_frame(block: str) -> Frame:
    fields: dict[str, str] = {}
    for line in block.split("\n"):
        if line.startswith(":"):
            fields["comment"] = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")
    return Frame(**fields)


def parse_frames(text: str) -> list[Frame]:
    """Every frame of a whole (finished) stream."""
    return [parse_frame(block) for block in text.split("\n\n") if block]


async def stream_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """The frames of a streaming response as they arrive."""
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            yield parse_frame(block)


async def events_of(response: httpx.Response) -> AsyncIterator[Frame]:
    """The event frames of a streaming response, heartbeats left out."""
    async for frame in stream_frames(response):
        if frame.comment is None:
            yield frame

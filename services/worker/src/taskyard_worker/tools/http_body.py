"""Read a response body up to a byte cap that holds *after* decompression, while streaming.

httpx decodes ``Content-Encoding`` chunk by chunk without an output bound: one 64 KiB gzip chunk can inflate
to tens of megabytes before any cap applied to the decoded chunks sees it (a gzip bomb peaked at 149 MB in
one fetch). So the raw bytes are read and inflated here with ``zlib``'s ``max_length``: the memory one fetch
holds is the cap plus one raw chunk, whatever the compression ratio.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

from taskyard_worker.tools.base import ToolError

# The only codings the tool asks for (its Accept-Encoding), so the only ones it has to inflate.
ACCEPT_ENCODING = "gzip, deflate"


class _Inflater:
    """One ``Content-Encoding`` (gzip, deflate or identity), inflating at most ``limit`` bytes per call."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._raw_deflate = False
        self._inflated = 0
        if coding in ("", "identity"):
            self._zlib = None
        elif coding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            # "deflate" is zlib-wrapped by the RFC, raw deflate from some servers: try the wrapper first.
            self._zlib = zlib.decompressobj()
        else:
            raise ToolError(f"the answer uses an unsupported content-encoding {coding!r}")

    def feed(self, raw: bytes, limit: int) -> bytes:
        if self._zlib is None:
            return raw[:limit]
        try:
            piece = self._zlib.decompress(raw, limit)
        except zlib.error:
            if self._coding == "deflate" and not self._raw_deflate and self._inflated == 0:
                self._raw_deflate = True
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(raw, limit)
            raise ToolError(f"the answer's {self._coding} body is corrupt") from None
        self._inflated += len(piece)
        return piece


async def read_capped(
    raw_chunks: AsyncIterator[bytes], content_encoding: str, max_bytes: int
) -> tuple[bytes, bool]:
    """(the first ``max_bytes`` decoded bytes, whether the body had more)."""
    coding = content_encoding.strip().lower()
    if "," in coding:
        raise ToolError(f"the answer uses stacked content-encodings {coding!r}")
    inflater = _Inflater(coding)
    body = bytearray()
    async for raw in raw_chunks:
        room = max_bytes - len(body)
        # One byte past the room: enough to know the body goes on, never more.
        piece = inflater.feed(raw, room + 1)
        if len(piece) > room:
            body += piece[:room]
            return bytes(body), True
        body += piece
    return bytes(body), False

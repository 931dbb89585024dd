"""Pages bounded in bytes: pure checks of ``bounded_page`` over rows in memory."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from taskyard_api.http import byte_pages
from taskyard_api.http.byte_pages import bounded_page, json_size
from taskyard_common.store.records import Cursor

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Doc(BaseModel):
    text: str


def _rows(sizes: list[int]) -> list[tuple[Cursor, str]]:
    """Newest first, as a list query returns them."""
    return [((T0 - timedelta(seconds=i), uuid.UUID(int=i + 1)), "x" * size) for i, size in enumerate(sizes)]


async def _page(rows, *, size: int, after: Cursor | None, max_bytes: int, fetched: list[int] | None = None):
    async def fetch(limit: int, position: Cursor | None):
        start = 0 if position is None else next(i for i, r in enumerate(rows) if r[0] == position) + 1
        if fetched is not None:
            fetched.append(limit)
        return rows[start : start + limit]

    return await bounded_page(
        fetch,
        lambda r: Doc(text=r[1]),
        lambda r: r[0],
        size=size,
        after=after,
        max_bytes=max_bytes,
        weigh=json_size,
    )


async def test_items_stop_at_the_byte_budget_but_never_below_one():
    rows = _rows([100, 100, 100, 5000, 100])
    page = await _page(rows, size=5, after=None, max_bytes=350)
    assert [len(d.text) for d in page.items] == [100, 100, 100] and page.more
    assert page.last == rows[2]
    # A single item over the budget still makes a page of one, so paging advances.
    page = await _page(rows, size=5, after=rows[2][0], max_bytes=350)
    assert [len(d.text) for d in page.items] == [5000] and page.more
    page = await _page(rows, size=5, after=rows[3][0], max_bytes=350)
    assert [len(d.text) for d in page.items] == [100] and not page.more


async def test_a_large_page_is_read_in_chunks_and_knows_when_it_is_the_last(monkeypatch):
    monkeypatch.setattr(byte_pages, "CHUNK_ROWS", 4)
    rows = _rows([1] * 10)
    fetched: list[int] = []
    page = await _page(rows, size=9, after=None, max_bytes=10**6, fetched=fetched)
    assert len(page.items) == 9 and page.more and fetched == [5, 5, 2]
    fetched.clear()
    page = await _page(rows, size=20, after=None, max_bytes=10**6, fetched=fetched)
    assert len(page.items) == 10 and not page.more and fetched == [5, 5, 5]

"""List pages bounded in bytes as well as in items.

A page of ``limit`` tasks is ``limit`` full documents: with inputs of up to 256 KiB and results beside them,
``GET /v1/tasks?limit=200`` built a response of tens of megabytes (one peaked at about 174 MB of process
memory). So a page is read in chunks and ends early, with a cursor, once its documents reach
``TASKYARD_API_MAX_PAGE_BYTES``: the memory a list holds is that budget plus one chunk of rows, whatever the
limit. A page holds at least one item, so paging always advances; the client follows ``next_cursor`` as for
any other page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from taskyard_common.store.records import Cursor

# Rows read per query: small enough that a chunk of large rows stays a few megabytes.
CHUNK_ROWS = 25

R = TypeVar("R")
D = TypeVar("D")


@dataclass(frozen=True)
class BoundedPage(Generic[R, D]):
    items: list[D]
    last: R | None  # the record of the last item, for the cursor
    more: bool  # another page exists
    truncated: bool = False  # ended early by the byte bound


def json_size(document: BaseModel) -> int:
    return len(document.model_dump_json())


async def bounded_page(
    fetch: Callable[[int, Cursor | None], Awaitable[list[R]]],
    render: Callable[[R], D],
    key: Callable[[R], Cursor],
    *,
    size: int,
    after: Cursor | None,
    max_bytes: int,
    weigh: Callable[[D], int],
) -> BoundedPage[R, D]:
    """Up to ``size`` items after ``after``, fewer when their JSON (``weigh``) would pass ``max_bytes``.

    ``fetch(limit, after)`` reads rows in page order; one row more than needed tells whether more exist.
    """
    items: list[D] = []
    used = 0
    last: R | None = None
    while len(items) < size:
        want = min(CHUNK_ROWS, size - len(items))
        rows = await fetch(want + 1, after)
        for row in rows[:want]:
            document = render(row)
            cost = weigh(document) + 1
            if items and used + cost > max_bytes:
                return BoundedPage(items, last, True, truncated=True)
            items.append(document)
            used += cost
            last, after = row, key(row)
        if len(rows) <= want:
            return BoundedPage(items, last, False)
    return BoundedPage(items, last, True)

"""Task ids: time-ordered UUIDv7 (RFC 9562, section 5.7), made in Python and, where a statement creates a
task, in SQL.

Why not uuid4: a random primary key puts each insert on a random leaf of the ``tasks`` primary-key btree,
so once that index outgrows PostgreSQL's shared buffers nearly every insert reads and dirties a page of its
own. A UUIDv7 starts with the Unix time in milliseconds, so new ids land on the right-most leaves, which
stay in cache however large the table grows; it also makes the id a time key (a range of ids is a range
of creation times). Ids stay ``uuid`` values: the uuid4 ids already stored keep working unchanged.

Layout (128 bits, big-endian): 48 bits of milliseconds since the epoch, 4 bits version (0111), 12 bits
``rand_a``, 2 bits variant (10), 62 bits ``rand_b``. Within one process the ids only increase (RFC 9562
section 6.2, method 2): an id made in the same millisecond as the one before (or after the clock stepped
back) takes the previous random bits plus a random step, so the order of creation is the order of ids.
The step is random (up to 2^32), not +1, so the next id cannot be guessed from the last.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from uuid import UUID

_RAND_BITS = 74  # rand_a (12) + rand_b (62)
_RAND_MAX = (1 << _RAND_BITS) - 1
_STEP_BITS = 32


def _layout(ms: int, rand: int) -> UUID:
    rand_a = rand >> 62
    rand_b = rand & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return UUID(int=value)


class Uuid7Source:
    """Makes increasing UUIDv7s; the process shares one (``uuid7``), tests make their own with a clock."""

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._last_ms = 0
        self._last_rand = 0

    def __call__(self) -> UUID:
        ms = self._clock_ms()
        with self._lock:
            if ms > self._last_ms:
                # A fresh millisecond: fresh random bits, the top one clear so that steps have room.
                rand = secrets.randbits(_RAND_BITS - 1)
            else:
                ms = self._last_ms
                rand = self._last_rand + 1 + secrets.randbits(_STEP_BITS)
                if rand > _RAND_MAX:  # the millisecond's space used up: borrow the next one
                    ms += 1
                    rand = secrets.randbits(_RAND_BITS - 1)
            self._last_ms, self._last_rand = ms, rand
        return _layout(ms, rand)


_source = Uuid7Source()


def uuid7() -> UUID:
    """A new UUIDv7, greater than every one this process made before."""
    return _source()


def uuid7_time_ms(value: UUID) -> int:
    """The Unix time in milliseconds a UUIDv7 was made at (meaningless for other versions)."""
    return value.int >> 80


def uuid7_floor(ms: int) -> UUID:
    """The smallest UUIDv7 of millisecond ``ms``: a bound for ranges of ids by creation time."""
    return UUID(int=(ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | 0b10 << 62)


def uuid7_sql(at: str = "clock_timestamp()") -> str:
    """The same layout made by PostgreSQL (15 has no ``uuidv7()``) from the timestamptz expression ``at``.

    A random uuid (version 4, variant 10) whose first 6 bytes become the time in milliseconds and whose
    version nibble becomes 7 (bits 52 and 53 set: 0100 -> 0111). Ordered by the millisecond only, not
    within one: what keeps inserts on the right of the index."""
    return (
        "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
        f" substring(int8send(floor(extract(epoch FROM {at}) * 1000)::bigint) FROM 3)"
        " FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid"
    )


# For statements that create a task now.
UUID7_SQL = uuid7_sql()

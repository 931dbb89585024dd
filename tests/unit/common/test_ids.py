"""Task ids: the UUIDv7 layout (RFC 9562 section 5.7) and the order within one process."""

from __future__ import annotations

import time
from uuid import UUID, uuid4

from taskyard_common.ids import Uuid7Source, uuid7, uuid7_floor, uuid7_time_ms


class FixedClock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def test_version_and_variant_bits() -> None:
    for _ in range(1000):
        value = uuid7()
        assert value.version == 7
        assert value.variant == "specified in RFC 4122"  # the 10 variant bits
        assert (value.int >> 76) & 0xF == 7
        assert (value.int >> 62) & 0b11 == 0b10


def test_the_first_48_bits_are_the_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= uuid7_time_ms(value) <= after + 1
    assert uuid7_time_ms(Uuid7Source(FixedClock(1_700_000_000_123))()) == 1_700_000_000_123


def test_ids_only_increase_within_a_process() -> None:
    made = [uuid7() for _ in range(20_000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)


def test_ids_of_one_millisecond_still_increase_and_sort_as_text() -> None:
    source = Uuid7Source(FixedClock(1_700_000_000_000))
    same = [source() for _ in range(1000)]
    assert same == sorted(same) and len(set(same)) == len(same)
    assert [str(v) for v in same] == sorted(str(v) for v in same)
    assert {uuid7_time_ms(v) for v in same} <= {1_700_000_000_000, 1_700_000_000_001}


def test_a_clock_that_steps_back_does_not_go_back() -> None:
    clock = FixedClock(1_700_000_100_000)
    source = Uuid7Source(clock)
    later = source()
    clock.ms = 1_700_000_000_000  # ten seconds back
    stepped_back = source()
    assert stepped_back > later
    assert stepped_back.version == 7


def test_floor_bounds_a_millisecond() -> None:
    ms = 1_700_000_000_500
    value = Uuid7Source(FixedClock(ms))()
    assert uuid7_floor(ms) <= value < uuid7_floor(ms + 1)
    assert uuid7_floor(ms).version == 7


def test_old_uuid4_ids_are_still_uuids() -> None:
    # Nothing changes for ids already stored: both kinds are plain UUID values of the same column.
    assert isinstance(uuid4(), UUID) and isinstance(uuid7(), UUID)

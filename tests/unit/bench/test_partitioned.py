"""The layout scenario's day partitions: contiguous UUIDv7 ranges, one per UTC day, each holding exactly
the ids made during its day."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from bench.partitioned import day_bounds, partition_ddl
from taskyard_common.ids import Uuid7Source


def test_one_contiguous_range_per_utc_day():
    bounds = day_bounds(datetime(2026, 11, 12, 16, 30, tzinfo=UTC), datetime(2026, 11, 14, 1, 0, tzinfo=UTC))
    assert [suffix for suffix, _, _ in bounds] == ["20261112", "20261113", "20261114"]
    assert all(bounds[i][2] == bounds[i + 1][1] for i in range(len(bounds) - 1))
    noon = int(datetime(2026, 11, 13, 12, tzinfo=UTC).timestamp() * 1000)
    made = Uuid7Source(lambda: noon)()
    _, lo, hi = bounds[1]
    assert UUID(lo) <= made < UUID(hi)
    assert not UUID(bounds[0][1]) <= made < UUID(bounds[0][2])


def test_the_ddl_partitions_by_the_key_with_a_default():
    statements = partition_ddl("src", "dst", "task_events", "task_id", [("20261112", "a", "b")])
    assert statements[0].endswith("PARTITION BY RANGE (task_id)")
    assert "FOR VALUES FROM ('a') TO ('b')" in statements[1]
    assert statements[-1].endswith("DEFAULT")

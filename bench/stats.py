"""Pure arithmetic of the harness: percentiles, rates, ideal times, peak concurrency. Unit-tested."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct`` percentile (0-100) by linear interpolation between closest ranks; None when empty."""
    if not values:
        return None
    if not 0 <= pct <= 100:
        raise ValueError("pct must be within 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low, high = math.floor(rank), math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def rate(count: int, seconds: float | None) -> float | None:
    """Events per second; None when no time was measured."""
    if not seconds or seconds <= 0:
        return None
    return count / seconds


def ideal_seconds(tasks: int, seconds_per_task: float, concurrency: int) -> float:
    """The shortest possible time for ``tasks`` jobs of ``seconds_per_task`` at ``concurrency`` in flight:
    full waves of ``concurrency`` tasks, the last one possibly partial."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    return math.ceil(tasks / concurrency) * seconds_per_task


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def peak_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The largest number of [start, end) intervals open at one instant (tasks in flight at once)."""
    events: list[tuple[float, int]] = []
    for start, end in intervals:
        events.append((start, 1))
        events.append((end, -1))
    # At equal times, ends sort before starts: a task finishing as another starts is not an overlap.
    events.sort(key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak

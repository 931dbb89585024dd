"""Reading a value out of a ``/metrics`` scrape (Prometheus text format), for tests that count what happened."""

from __future__ import annotations


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum a metric's samples whose labels include ``labels`` (Prometheus text format)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total

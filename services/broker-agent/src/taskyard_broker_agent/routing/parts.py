"""A request that holds distinct jobs (catalog ``multi_route``): the parts a router names, merged, and the
rules router's way of finding them.

Both routers end in ``merge_parts``: one part per specialist (two jobs for the same one are one task for it)
and none unless two specialists remain, so a "split" into one job is the usual single route.
"""

from __future__ import annotations

import re

from taskyard_common.messages import MAX_ROUTED_PARTS, RoutedPart

# RoutedPart.job's bound.
JOB_MAX_CHARS = 500

# Where the rules router cuts a request into candidate jobs: sentence ends followed by a space, and lines.
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def merge_parts(parts: list[tuple[str, str]]) -> tuple[RoutedPart, ...]:
    """``(specialist, job)`` pairs as one part per specialist, in first-mention order (the first
    ``MAX_ROUTED_PARTS`` specialists); none unless at least two specialists have a job."""
    jobs: dict[str, list[str]] = {}
    for specialist, job in parts:
        text = " ".join(job.split())
        if text and text not in jobs.setdefault(specialist, []):
            jobs[specialist].append(text)
    merged = [(name, "; ".join(texts)) for name, texts in jobs.items() if texts][:MAX_ROUTED_PARTS]
    if len(merged) < 2:
        return ()
    return tuple(RoutedPart(specialist=name, job=job[:JOB_MAX_CHARS]) for name, job in merged)


def sentences(text: str) -> list[str]:
    """The request's sentences (and lines), without the empty ones."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]

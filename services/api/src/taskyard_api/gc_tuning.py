"""The garbage collector of a serving API process, set for tail latency once the application has started.

A full collection walks every object the collector tracks, and stops the event loop meanwhile: every request
in flight waits. An API process holds about 80,000 such objects once started (modules, classes, pydantic's
validators, the catalog) and about 250 more per open event stream (the coroutines, closures and tasks of each
middleware layer); with 500 streams open, full collections paused the loop for 40 to 70 ms every second or
two under load, and the submit path's p99 doubled (docs/benchmarks.md). So, once started:

- what exists is frozen (``gc.freeze``): never walked again (it is not freed either, and need not be);
- a full collection waits for 100 collections of the middle generation instead of 10: objects that outlive
  a young collection are mostly those of requests in flight, which die soon after by reference counting,
  so full collections were frequent and found little. Young collections are unchanged and stay short.
"""

from __future__ import annotations

import gc

# Collections of the middle generation between two full collections (CPython's default: 10).
FULL_COLLECTION_EVERY = 100


def tune_for_serving() -> None:
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)

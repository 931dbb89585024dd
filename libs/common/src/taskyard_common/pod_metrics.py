"""Metrics of a pod whose work runs in several processes: the worker's supervisor and its children.

A worker child that runs tasks (the main one, a quarantine one) counts them in its own memory, but only the
main child serves the pod's metrics port, and a child killed by a poison task takes its counts with it. So a
supervisor switches prometheus_client to its multiprocess mode before it forks: every process then writes its
values to files of its own (named by pid) in one directory, the files of a dead child stay (its counters keep
counting in the pod's totals), and the main child's ``/metrics`` merges them all (``pod_registry``).

prometheus_client picks its value class from ``PROMETHEUS_MULTIPROC_DIR`` when it is imported, and
``taskyard_common.metrics`` defines every metric at import: long before the supervisor has read its settings.
``share_between_processes`` therefore switches the value class itself and gives the metrics already defined
values of the new class (``_reset_values``: prometheus_client's own fields, pinned by ``uv.lock`` and tested
in tests/unit/common/test_pod_metrics.py). A process that never calls it (the API, the broker agent, an
unsupervised worker, an in-process test worker) keeps the ordinary in-memory values and the default registry.

Gauges in a pod of processes need a ``multiprocess_mode`` (``metrics.py``): ``livesum`` for the tasks in flight,
whose dead child's share goes with it (``process_ended``).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from prometheus_client import REGISTRY, CollectorRegistry, values
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

# prometheus_client's variable: read by its value class each time a process opens its files (a forked child
# opens new ones, named by its pid).
DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def share_between_processes(prefix: str = "taskyard-metrics-") -> str:
    """Make every metric value of this process and of the processes it forks from now on a value in a
    per-process file of a new directory; the directory (``remove`` it when the last process is done).

    Call it before forking and before any metric was changed: the values recorded so far are dropped."""
    directory = tempfile.mkdtemp(prefix=prefix)
    os.environ[DIR_VARIABLE] = directory
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    _reset_values()
    return directory


def _reset_values() -> None:
    """New values (of the class now chosen) for every metric of the default registry: a labelled metric
    forgets its children (``labels()`` makes them again, so the label sets a child pre-initialises are its
    own), a metric without labels builds its value again."""
    for collector in list(REGISTRY._collector_to_names):  # prometheus_client has no public list of them
        if not isinstance(collector, MetricWrapperBase):
            continue  # the process and platform collectors: nothing stored in a value
        if collector._is_parent():  # type: ignore[no-untyped-call]
            with collector._lock:
                collector._metrics.clear()
        else:
            collector._metric_init()  # type: ignore[no-untyped-call]


def pod_registry(directory: str) -> CollectorRegistry:
    """What the pod's metrics endpoint serves: every process's values merged (counters and histograms
    summed, dead processes' included; gauges as their ``multiprocess_mode`` says)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    return registry


def process_ended(pid: int, directory: str) -> None:
    """A process of the pod died: its share of the live gauges (tasks in flight) leaves the totals; its
    counters stay."""
    mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def remove(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)

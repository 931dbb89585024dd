"""pod_metrics: the values of forked processes merged, a killed one's counters kept, its live gauges gone.

The switch changes prometheus_client's process-wide state, so each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal
    from prometheus_client import generate_latest
    from taskyard_common.metrics import TASK_EVENTS, TASKS_FINISHED, TASKS_IN_FLIGHT, init_worker_labels
    from taskyard_common import pod_metrics

    init_worker_labels("general")
    TASKS_FINISHED.labels("general", "completed").inc(5)  # before the switch: dropped
    directory = pod_metrics.share_between_processes()
    try:
        def child(completed, in_flight, die):
            pid = os.fork()
            if pid == 0:
                init_worker_labels("general")
                TASKS_FINISHED.labels("general", "completed").inc(completed)
                TASKS_IN_FLIGHT.labels("general").inc(in_flight)
                TASK_EVENTS.inc()
                if die:
                    os.kill(os.getpid(), signal.SIGKILL)
                os._exit(0)
            os.waitpid(pid, 0)
            return pid

        child(2, 1, die=False)  # a live child (its exit is not marked dead)
        dead = child(3, 4, die=True)  # a killed one: its counters stay, its tasks in flight go
        pod_metrics.process_ended(dead, directory)
        print(generate_latest(pod_metrics.pod_registry(directory)).decode())
    finally:
        pod_metrics.remove(directory)
    """
)


def _sample(text: str, prefix: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, text)
    return float(lines[0].rsplit(" ", 1)[1])


def test_forked_processes_counts_are_merged_and_a_killed_ones_gauges_leave() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    completed = 'taskyard_tasks_finished_total{specialist="general",status="completed"}'
    assert _sample(text, completed) == 5.0
    assert _sample(text, 'taskyard_tasks_finished_total{specialist="general",status="failed"}') == 0.0
    assert _sample(text, "taskyard_task_events_total ") == 2.0
    assert _sample(text, 'taskyard_tasks_in_flight{specialist="general"}') == 1.0

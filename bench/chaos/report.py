"""The chaos table, and docs/resilience.md around it."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence

from bench.chaos.harness import Outcome, fmt_s
from bench.infra import ROOT
from bench.machine import cpu_model, memory_gib, source_revision
from bench.report import format_table

HEADERS = ("scenario", "tasks", "lost", "duplicates", "time to recover / drain", "notes")


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def table(outcomes: Sequence[Outcome]) -> str:
    rows = []
    for out in outcomes:
        notes = list(out.notes)
        if out.failed:
            notes.insert(0, f"**FAILED: {out.failed}**")
        recover = f"{fmt_s(out.recover_s)} / {fmt_s(out.drain_s)}"
        rows.append(
            (
                out.scenario,
                _count(out.tasks),
                _count(out.lost),
                _count(out.duplicates),
                recover,
                "; ".join(notes),
            )
        )
    return format_table(HEADERS, rows)


METHOD = """\
## What each scenario does

Every scenario runs taskyard as real processes (`taskyard_devkit.cluster`: one API, one broker agent, the
workers of one specialist `general`, the development model server `taskyard-devllm`, not a real model) in
its own queue prefix and database schema, submits tasks over HTTP as a careful client does (a `503`/`429`
is retried after its `Retry-After`, at most 1 s), causes its fault, waits until every accepted task is
terminal, and then counts. Each task makes one model call; its input names it, so the model server's
per-conversation counters (`/_control/conversations/{model}`) say how often each task got a final answer.
Brokers and databases that a scenario stops are its own: a RabbitMQ node (or three) started with
`rabbitmq-server` under its own node name, ports and data directory, and a PostgreSQL cluster made with
`initdb` in a temporary directory on its own port; everything listens on 127.0.0.1 only. The shared local
RabbitMQ and PostgreSQL are never stopped.

- **lost**: accepted tasks (answered `202`) that did not end as they should (completed; dead-lettered for
  a poison task) once the run drained, or are missing from the store.
- **duplicates**: tasks whose history holds more than one `completed` event (what clients see), or whose
  stored result is not an answer the model gave that task.
- **time to recover / drain**: recover (2, 4): from the node or database being back to the API's first
  `202` after it; (3): the longest stretch between two accepted submissions with refusals between, after
  the leader's stop (0 when the API never refused). Drain: to every accepted task terminal, from the last
  kill (1), the node or database back (2, 4), the leader's stop (3), the last submission (5), the model
  back (6).
- A task that asked the model twice (its worker was killed between the answer and recording it) is work
  done twice, not a result seen twice: the notes count them.

1. **Workers SIGKILLed**: three worker processes (lease 3 s, concurrency 16 each, each model call 0.3 s);
   tasks submitted at a steady rate; every few seconds (and once the last replacement is ready) one random
   worker (its supervisor, and so every child with it) is SIGKILLed and a new one started.
2. **RabbitMQ stopped and started**: a private single node; a third of the way through, `rabbitmqctl stop`,
   a pause, `rabbitmq-server` again with the same data directory; the submitter keeps submitting through
   it, and every answer the API gives while the node is away is counted (`503` with `Retry-After`
   expected, never `500`).
3. **Quorum leader stopped**: three private nodes joined in a cluster; the services reach them through one
   loopback address that sends each new connection to the next node that accepts it (as a Kubernetes
   Service would); a third of the way through, the node leading the work queue is stopped for good.
4. **PostgreSQL restarted**: a private PostgreSQL; a third of the way through, `pg_ctl stop -m fast`, a
   pause, `pg_ctl start`; afterwards no task may be left non-terminal.
5. **Poison tasks** (on a RabbitMQ node of its own, like 2, so that a restart of the shared one by another
   test run cannot stop the replacement workers from starting): first a clean run of the healthy tasks
   alone (its throughput is the reference), then the same healthy tasks with one in twenty marked poison
   (three workers, concurrency 16 each; each healthy model call 1 s, `--poison-model-seconds`); whenever a poison task's model call arrives,
   the suite SIGKILLs the worker child process that made it (found by both ends of the call's TCP
   connection) and its worker's supervisor forks a new one (the suite starts none).
   Healthy throughput: healthy tasks completed / (first submission .. last healthy completion).
6. **Slow model, then an outage** (on a RabbitMQ node of its own): one worker (concurrency 32 in a full
   run); one model call in fifty takes 30 s (p99 30 s), the others 0.5 s; ten seconds in, the model answers only `503` for a while, then
   recovers. Back pressure: the most tasks running at once (sampled from the store every 0.5 s) against the
   worker's concurrency; memory: the largest sampled PSS of each service's processes together (a worker is a supervisor and its children).

`make chaos` runs every scenario at full size and writes this file; `make chaos CHAOS_ARGS=--quick` runs
smaller counts; the test suite runs the first scenario at a tiny size (`python -m bench.chaos --smoke --only
kill`, `tests/e2e/test_chaos_smoke.py`).
"""


def render(
    outcomes: Sequence[Outcome],
    *,
    mode: str,
    started: datetime.datetime,
    versions: dict[str, str],
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
) -> str:
    memory = memory_gib()
    machine = [
        f"- date: {started:%Y-%m-%d %H:%M} UTC ({mode})",
        f"- source: {source_revision(str(ROOT))}",
        f"- CPUs (`nproc`): {os.cpu_count()}, {cpu_model()}",
        f"- memory: {memory:.1f} GiB" if memory else "- memory: unknown",
        "- " + ", ".join(f"{k} {v}" for k, v in versions.items()) + " (the shared servers; the private"
        " RabbitMQ nodes and PostgreSQL run the same installed versions)",
        f"- 1-min load average {load[0][0]:.2f} before, {load[1][0]:.2f} after (the machine is shared)",
    ]
    verdict = (
        "0 lost and 0 duplicates in every row."
        if all(o.ok for o in outcomes)
        else "**Not every row is 0 lost / 0 duplicates, or a scenario did not finish: see the notes.**"
    )
    return "\n".join(
        [
            "# Resilience",
            "",
            "Generated by `make chaos` (`uv run python -m bench.chaos`): sustained faults, and how many accepted",
            "tasks were lost or completed twice. The failure modes one by one, each with the test that proves",
            "it, are in [reliability.md](reliability.md).",
            "",
            "## Results",
            "",
            table(outcomes),
            "",
            verdict,
            "",
            "## Machine",
            "",
            *machine,
            "",
            METHOD,
        ]
    )

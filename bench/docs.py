"""``docs/benchmarks.md``: machine, versions, date, load, the table and the targets, met or not."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence

from bench.findings import (
    DURABILITY_FINDINGS,
    FAIRNESS_FINDINGS,
    LAYOUT_FINDINGS,
    PIPELINE_FINDINGS,
    SPEND_FINDINGS,
    STORE_FINDINGS,
    SUBMIT_FINDINGS,
    WORKFLOW_FINDINGS,
)
from bench.infra import ROOT
from bench.machine import cpu_model, memory_gib, package_versions, source_revision
from bench.report import Row, evaluate, results_table, targets_table
from bench.runner import Scenario

METHOD = """\
## How each figure is measured

- **Services** run as real processes started by the dev launcher the tests share (`taskyard_devkit.cluster`):
  one API, one broker agent, one worker, the dev LLM server (`taskyard-devllm`, not a real model), with
  `TASKYARD_API_AUTH_ENABLED=false`, `TASKYARD_API_RATE_LIMIT_PER_SECOND=0` and
  `TASKYARD_API_READ_RATE_LIMIT_PER_SECOND=0`. Every scenario has its own
  queue prefix and database schema, removed afterwards, and a hard time limit; a measurement cut off by its
  limit is marked **TIMED OUT** and shows what it had done.
- **HTTP load** of the no-op scenario: the lean generator of the submit path (below) in a process of its
  own, 32 closed-loop keep-alive connections until the N tasks are accepted. The I/O-bound scenario submits
  everything before its window opens, from one pooled `httpx.AsyncClient` (its cost is outside the window).
- **Completion** is read from the task store (a count per 0.2 s), never by polling each task over HTTP;
  taskyard latency is each row's `created_at` to `finished_at`; throughput is completed tasks / (first
  POST .. last `finished_at`).
- **Broker limit**: aio-pika, one durable quorum queue, persistent messages, publisher confirms with 100
  unconfirmed at a time, a consumer on its own connection acking each message (prefetch 100).
- **Celery**: the same RabbitMQ, a quorum queue (`x-queue-type: quorum` in `task_queues`; Celery turns
  global QoS off itself), result backend **PostgreSQL** through SQLAlchemy + psycopg 3 (`db+postgresql+psycopg://`,
  the scenario's own schema), otherwise Celery's defaults (no publisher confirms, early ack, prefetch
  multiplier 4, log level WARNING, started `--without-gossip --without-mingle --without-heartbeat`).
  Tasks are enqueued one by one from one thread; time runs from the first enqueue to the last result row's
  `date_done`, latency per task from its enqueue to its `date_done`. Prefork runs with concurrency = CPU
  count; its 1-s run uses a reduced count (stated in the table), since 1,000 such tasks take 1,000 / CPUs s.
- **I/O-bound**: tasks are submitted and routed first with no worker running; then one worker (specialist
  concurrency from a bench catalog) drains them; the window is the first `started_at` to the last
  `finished_at`, against the ideal `ceil(tasks / concurrency) x 1 s`; peak memory is the largest sampled PSS of the worker's processes together (supervisor and children, `bench/memory.py`); p50/p99
  there are each task's run time (`started_at` .. `finished_at`, ideal 1 s). It runs twice: without LLM
  limits, then (`taskyard.io.limited`) with the model's fleet-wide `rpm` 10^6 and `tpm` 10^9 in the catalog,
  so every call reserves from the PostgreSQL buckets but none waits; the target compares the two windows.
- **Fleet-wide rpm** (scenario 6): the dev LLM server started with `--rpm 600` (429 above 600 requests a
  minute per model), the catalog's model entry with `rpm: 600`; 300 one-call tasks submitted and routed
  first, then three worker processes drain them. From the server's own counts: calls answered and refused,
  and the answered rate (answered calls over its first to last answer, the initial burst included); from
  the store: tasks with a charged attempt (more than one attempt, or a charged history entry).
- **Submit path**: only the API runs (nothing consumes the intake queue). The load comes from
  `bench/http_load.py` in a process of its own: bare keep-alive HTTP/1.1 connections (`asyncio.Protocol`,
  one pre-encoded request, only the status line and `Content-Length` parsed), whose CPU per request is
  given next to the API's in each row's notes (both from `/proc`, warm-up included). Closed loop: each
  client sends its next request when the previous answer arrived, 5 s per concurrency after 1 s of warm-up.
  Open loop: requests due at a fixed rate over 64 connections, latency counted from when each was due (so
  waiting for a connection counts); rates rise until one is not kept up with (p99 >= 50 ms, answers
  missing, refusals or a backlog), and the last rate kept is the sustainable one. Between the two, the
  32-client closed loop runs again while 500 Server-Sent Events streams are open on the same API process
  (`bench/sse_streams.py`, another process: it submits 500 tasks nobody consumes and opens one stream per
  task, so each stays open and idle, with its binding on the events exchange; measured 2 s after the last
  one opened, so the bindings are made; the row fails unless the API's `taskyard_event_streams_open` shows
  them all and none ended). Then the API restarts
  with authentication and the per-tenant rate limit on (a submitter key; a limit far above the load, so a
  token is taken on every request and none is refused): 32 closed-loop clients and the sustainable rate.
- **Group** (`group`): the no-op scenario's cluster (one API, broker agent, worker at concurrency 100, the dev
  LLM). First N = 1,000 single tasks with an explicit specialist, POSTed by 32 closed-loop clients of the
  lean generator, timed from the first POST to the last `finished_at`; then one `POST /v1/task-groups` of
  the same N inputs and a reduce step (same specialist), timed from that POST to the group's `finished_at`
  (its reduce task ended). p50/p99 are the tasks' `created_at` to `finished_at`. The group row's notes give
  its wall time as a ratio of the singles', how long the `202` took (every child stored and announced), and
  the reduce latency: the last child's `finished_at` to the group's.
- **Priorities** (issue 15): one worker (concurrency 4) whose one LLM call per task takes 0.2 s. Backlog:
  200 `low` tasks submitted through the API and queued, the worker started, and once it has started 10 of
  them 20 `high` tasks submitted; each task's wait is `created_at` .. `started_at`, and the row compares the
  p95 of the highs with the p95 of the lows (p50/p99 there: the highs' waits). Stream: 100 `low` tasks
  queued, then for 30 s a feeder keeps at least 20 `high` tasks not yet started; the row gives the lows'
  share of the starts in those 30 s, against their guaranteed share of one slot in ten (weights 6:3:1,
  normal idle). `--quick` uses 100 lows and 10 highs, and 40 lows for 10 s.
- **Large store** (issue 19): two schemas, an empty one and a full one: `bench/store_fill.py` adds 10 million
  finished tasks inside PostgreSQL (`generate_series`; UUIDv7 ids of their creation times, oldest first,
  created evenly over 40 days, 50 tenants, 95 % completed with a result, 5 % failed, two events each, an
  idempotency key for one in ten; the secondary indexes and the event keys dropped and built again after
  the load, then `VACUUM (ANALYZE)`), either in the run or beforehand (`python -m bench.store_fill --schema
  S`, then `--reuse-store S`: the schema is kept). Then rounds of empty, full (two in a full run: empty,
  full, empty, full, so the spread between rounds shows the machine's drift), each phase with its own API,
  broker agent (retention off) and worker on its schema: the submit path (32 closed-loop clients, 10 s
  after 2 s of warm-up) and the no-op end to end (5,000 tasks, explicit specialist). The targets compare
  the means of the rounds and show each round's ratio. Last, on a store filled in the run only, a second
  broker agent starts with retention on (a round every second, batches of 500, no cap on batches) and the
  submit path is measured once more while it removes the quarter of the generated tasks past 30 days (its
  `taskyard_store_rows_removed_total{table="tasks"}` before and after gives the rate). Completion is read
  through the `created_at` index (only the run's rows), never by scanning the table.
- **Store layout** (issue 19, `store_layout`): 2 million finished tasks filled as above (over 20 days) into
  a migrated scratch schema, and a copy of its `tasks` and `task_events` range-partitioned by task id, one
  partition per UTC day (`bench/partitioned.py`: bounds `uuid7_floor(midnight)`, a default partition, the
  same columns, checks, indexes and foreign key). On each layout, one connection, after an unmeasured tenth
  (warm cache, prepared statements): 2,000 look-ups by id, tenants' first list pages and pages from a cursor
  at a random time (50 rows); then 4,000 inserts of a task and its first event on 4 connections (plain also
  with uuid4 ids); last the retention of the oldest day and a bit: plain by `RetentionStore.expire_batch`
  (batches of 500) until none is left, partitioned by `DETACH PARTITION` and `DROP TABLE` of those days.
"""


# What py-spy showed in the broker agent and the worker (noop and io scenarios), and what changed. CPU
# figures are each process's user+system seconds from /proc, so they hold on a busy machine where wall
# times do not.
def render(
    *,
    rows: Sequence[Row],
    quick: bool,
    started: datetime.datetime,
    versions: dict[str, str],
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
    scenarios: Sequence[Scenario],
) -> str:
    memory = memory_gib()
    (before, after) = load
    packages = ", ".join(f"{k} {v}" for k, v in package_versions().items())
    # Only the load before the run says whether other work shared the machine: the one after includes the
    # benchmark's own services.
    loaded = before[0] >= 1.0
    load_text = f"1-min load average {before[0]:.2f} before the run ({after[0]:.2f} after it, the benchmark's own load included)"
    if quick:
        banner = (
            "> **This is a `--quick` smoke run**: small counts and short limits, meant to show the harness "
            "works, not to judge the targets; its figures are not comparable to the issue's targets. "
            + load_text
            + (": other work was running on the same cores." if loaded else ".")
            + " Rerun `make bench` on a quiet machine for real figures.\n"
        )
    else:
        banner = (
            "> Full run. "
            + load_text
            + (": the machine was not quiet, treat the figures with care." if loaded else ".")
            + "\n"
        )
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`uv run python -m bench`); see issues 6, 14 and 15 for the goals. Scenarios: "
        + "; ".join(f"`{s.name}` {s.describe}" for s in scenarios)
        + ".",
        "",
        banner,
        "## Machine and versions",
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC",
        f"- source: {source_revision(str(ROOT))}",
        f"- CPUs (`nproc`): {os.cpu_count()}, {cpu_model()}",
        f"- memory: {memory:.1f} GiB" if memory else "- memory: unknown",
        f"- {', '.join(f'{k} {v}' for k, v in versions.items())}",
        f"- packages: {packages}",
        "",
        "## Results",
        "",
        results_table(rows),
        "",
        "## Targets (issues 6, 15 and 19)",
        "",
        targets_table(evaluate(rows)),
        "",
        METHOD,
        "## Profile findings and changes",
        "",
        PIPELINE_FINDINGS,
        SUBMIT_FINDINGS,
        DURABILITY_FINDINGS,
        WORKFLOW_FINDINGS,
        FAIRNESS_FINDINGS,
        SPEND_FINDINGS,
        STORE_FINDINGS,
        LAYOUT_FINDINGS,
    ]
    return "\n".join(lines)

"""Every taskyard metric, defined once: ``taskyard_`` prefix, base units, bounded labels (never task ids).

Services pre-initialise the label sets they will use, so a dashboard shows zeros instead of gaps. A worker
under its supervisor runs in several processes and merges them in prometheus_client's multiprocess mode
(``pod_metrics.py``): a gauge a worker sets says there how its processes' values combine
(``multiprocess_mode``, ignored by a single process).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

from taskyard_common.messages import Priority

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_TASK_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

HTTP_REQUESTS = Counter(
    "taskyard_http_requests_total", "HTTP requests answered by the API", ["method", "route", "status"]
)
HTTP_DURATION = Histogram(
    "taskyard_http_request_duration_seconds",
    "HTTP request latency in the API",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
)
TASKS_SUBMITTED = Counter("taskyard_tasks_submitted_total", "Tasks accepted (202) by the API")
SUBMIT_REJECTED = Counter(
    "taskyard_submit_rejected_total",
    "Submissions refused because the broker was unavailable or full",
    ["reason"],
)
ROUTING_DECISIONS = Counter(
    "taskyard_routing_decisions_total", "Routing decisions of the broker agent", ["method", "specialist"]
)
# Tenant lanes (issue 15): routed tasks parked in the store instead of published, and parked tasks released.
TASKS_PARKED = Counter(
    "taskyard_tasks_parked_total",
    "Routed tasks the broker agent parked in the store (their tenant's lane for the specialist was full)",
    ["specialist"],
)
PARKED_RELEASED = Counter(
    "taskyard_parked_tasks_released_total",
    "Parked tasks the broker agent's feeder published into their tenant's lane",
    ["specialist"],
)
ROUTING_FALLBACKS = Counter(
    "taskyard_routing_fallbacks_total", "LLM routing attempts that fell back to the rules router", ["reason"]
)
ROUTING_GUARD = Counter(
    "taskyard_routing_guard_total",
    "Requests in which the directive guard found routing directives, by what followed "
    "(stripped: the rest was routed; overruled: the LLM chose what the directive asked and the rules decided)",
    ["outcome"],
)
ROUTING_CACHE = Counter(
    "taskyard_routing_cache_total", "Routing decision cache lookups of the broker agent", ["result"]
)
ROUTING_TOKENS = Counter(
    "taskyard_routing_llm_tokens_total", "LLM tokens used by routing decisions", ["kind"]
)
TASKS_FINISHED = Counter(
    "taskyard_tasks_finished_total",
    "Tasks that reached a terminal state in a worker",
    ["specialist", "status"],
)
TASK_DURATION = Histogram(
    "taskyard_task_duration_seconds", "Run time of one task attempt", ["specialist"], buckets=_TASK_BUCKETS
)
LLM_TOKENS = Counter("taskyard_llm_tokens_total", "LLM tokens used by workers", ["specialist", "kind"])
TASK_RETRIES = Counter(
    "taskyard_task_retries_total",
    "Task attempts that failed transiently and were sent through a delay queue to run again",
    ["specialist", "reason"],
)
MESSAGES_QUARANTINED = Counter(
    "taskyard_messages_quarantined_total",
    "Redelivered work messages a worker moved to its specialist's quarantine queue",
    ["specialist"],
)
MESSAGES_DEAD_LETTERED = Counter(
    "taskyard_messages_rejected_total", "Messages rejected without requeue (dead-lettered)", ["queue"]
)
DEAD_LETTERS = Counter(
    "taskyard_dead_letters_total",
    "Dead letters seen by the broker agent (dead-letter queue and expired leases), by reason",
    ["reason"],
)
DEAD_LETTERS_RETURNED = Counter(
    "taskyard_dead_letters_returned_total",
    "Work messages dead-lettered past the delivery limit with their task never started, sent back to the"
    " work queue by the broker agent (dead_letters/returns.py)",
)
INTAKE_RETRIES = Counter(
    "taskyard_intake_retries_total", "Intake messages sent through a delay queue after a transient failure"
)
INTAKE_DELAYED = Counter(
    "taskyard_intake_delayed_total",
    "Intake messages of tasks not due yet (not_before ahead) sent back through a delay queue, uncharged",
)
LEASES_RECLAIMED = Counter(
    "taskyard_leases_reclaimed_total",
    "Running tasks whose lease expired, reclaimed by the reaper",
    ["outcome"],
)

LLM_REQUESTS = Counter(
    "taskyard_llm_requests_total",
    "Chat completion calls to the LLM endpoint, by model and outcome",
    ["model", "outcome"],
)
# USD, from the catalog's prices (models without a price count 0). ``specialist`` is ROUTER for the broker
# agent's routing calls.
LLM_COST = Counter(
    "taskyard_llm_cost_total", "Cost of LLM calls in USD (the catalog's prices)", ["model", "specialist"]
)
ROUTER = "_router"
# ``model``: the one that failed; ``reason``: server_error, timeout, connection_error (past the in-step
# retries), rate_limited (a 429 asking for a long wait), fleet_limited (the fleet-wide limit's wait).
LLM_FAILOVERS = Counter(
    "taskyard_llm_failovers_total",
    "LLM calls sent on to the model's next fallback (the catalog's models)",
    ["model", "reason"],
)
FAILOVER_REASONS = ("server_error", "timeout", "connection_error", "rate_limited", "fleet_limited")
LLM_DURATION = Histogram(
    "taskyard_llm_request_duration_seconds",
    "Latency of one chat completion call",
    ["model"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
)
# Filled by the broker agent's queue collector (a passive declare per queue, every few seconds).
QUEUE_MESSAGES_READY = Gauge(
    "taskyard_queue_messages_ready", "Messages ready for delivery in a taskyard queue", ["queue"]
)
QUEUE_CONSUMERS = Gauge("taskyard_queue_consumers", "Consumers attached to a taskyard queue", ["queue"])
# Also the broker agent's collector, but from the task store: RabbitMQ does not tell a message's age over AMQP.
QUEUE_OLDEST_TASK_AGE = Gauge(
    "taskyard_queue_oldest_task_age_seconds",
    "Age of the oldest task waiting in a queue (intake: not routed yet; work queue: routed, not started)",
    ["queue"],
)
TASK_QUEUE_WAIT = Histogram(
    "taskyard_task_queue_wait_seconds",
    "Time a task attempt waited in its specialist's queue, from routing (or its retry's due time) to start",
    ["specialist", "priority"],
    buckets=_TASK_BUCKETS,
)
TASK_START_DEFERRALS = Counter(
    "taskyard_task_start_deferrals_total",
    "Deliveries a worker sent round a delay queue instead of starting their task, uncharged, by reason "
    "(tenant_max_running, fair_share, leased, not_routed, in_flight, store_unavailable)",
    ["specialist", "reason"],
)
# livesum: the pod's worker children together, a dead child's share gone with it.
TASKS_IN_FLIGHT = Gauge(
    "taskyard_tasks_in_flight",
    "Task attempts running in this worker",
    ["specialist"],
    multiprocess_mode="livesum",
)
ROUTING_DURATION = Histogram(
    "taskyard_routing_duration_seconds",
    "Time the broker agent took to decide where a task goes",
    ["method"],
    buckets=(*_LATENCY_BUCKETS, 30),
)
TASKS_DEAD_LETTERED = Counter(
    "taskyard_tasks_dead_lettered_total",
    "Tasks the broker agent recorded as dead-lettered, by specialist (unknown: not routed or not in the catalog)",
    ["specialist"],
)
# Durable agent runs: what an interruption cost, and what it did not.
TASK_HAND_BACKS = Counter(
    "taskyard_task_hand_backs_total",
    "Running tasks a stopping worker handed back to their queue, uncharged, to resume elsewhere",
    ["specialist"],
)
TASK_EARLY_SETTLES = Counter(
    "taskyard_task_early_settles_total",
    "Long task attempts whose message was acked early (from then on the lease and the reaper protect them)",
    ["specialist"],
)
TASK_RESUMES = Counter(
    "taskyard_task_resumes_total",
    "Task attempts that continued from a step checkpoint instead of starting over",
    ["specialist"],
)
LLM_STEP_RETRIES = Counter(
    "taskyard_llm_step_retries_total",
    "LLM calls retried inside an agent step (server error, timeout, connection error) without charging an attempt",
    ["specialist", "reason"],
)
TASKS_DELEGATED = Counter(
    "taskyard_tasks_delegated_total", "Child tasks a worker's agents delegated work to", ["specialist"]
)
# recovered: a tool call written as text was read and run; corrected: an unreadable one was answered with a
# correction message; failed: it was unreadable again after the correction (the attempt failed).
TEXT_TOOL_CALL_OUTCOMES = ("recovered", "corrected", "failed")
TEXT_TOOL_CALLS = Counter(
    "taskyard_text_tool_calls_total",
    "Replies whose content was a tool call written as text instead of a structured one, by outcome",
    ["specialist", "outcome"],
)
# A specialist with an ``output_schema``: its final answers, valid at once, valid after the one correction, or
# failed (the task fails ``invalid_output``).
OUTPUT_ANSWER_OUTCOMES = ("valid", "corrected", "failed")
OUTPUT_ANSWERS = Counter(
    "taskyard_output_answers_total",
    "Final answers of specialists with an output_schema, by whether they satisfied it",
    ["specialist", "outcome"],
)
ROUTING_PARTS = Histogram(
    "taskyard_routing_parts",
    "Parts a multi-routed request was split into (catalog multi_route), by the method that decided",
    ["method"],
    buckets=(2, 3, 4, 5),
)
# Workflows: gauges the broker agent samples from the task store (the truth: any process may start or end
# them), and the fan-in latency observed by whichever process settles a group.
WORKFLOWS_IN_PROGRESS = Gauge(
    "taskyard_workflows_in_progress",
    "Workflows not finished: group (task groups running, multi-routed tasks' groups included), chain (chains "
    "with a step not finished)",
    ["kind"],
)
WAITING_PARENTS = Gauge(
    "taskyard_waiting_parents",
    "Tasks in status waiting, holding no worker slot: delegation (for the tasks they delegated to), "
    "multi_route (for the parts of their request)",
    ["kind"],
)
GROUP_REDUCE_LATENCY = Histogram(
    "taskyard_group_reduce_latency_seconds",
    "From the last child of a group ending to the group ending (its reduce or combine step created, queued "
    "and run); groups without a reduce step are not counted",
    buckets=_TASK_BUCKETS,
)
TASK_EVENTS = Counter(
    "taskyard_task_events_total",
    "Events this process appended to task event logs (transitions, LLM and tool calls, streamed tokens)",
)
# Watching tasks in the API (no labels: nothing to pre-initialise, a gauge starts at 0).
EVENT_STREAMS_OPEN = Gauge(
    "taskyard_event_streams_open", "Server-Sent Events streams of task events this API process holds open"
)
LONG_POLLS_IN_PROGRESS = Gauge(
    "taskyard_long_polls_in_progress",
    "Long-polls (GET /v1/tasks/{task_id}?wait=) waiting in this API process",
)
# Webhooks: the broker agent's dispatcher counts every attempt and samples the outbox.
WEBHOOK_DELIVERIES = Counter(
    "taskyard_webhook_deliveries_total",
    "Webhook delivery attempts by outcome (delivered; failed_attempt: retried later; refused: the address "
    "is not allowed, retried later; gave_up: the last attempt failed and the retry window is over)",
    ["outcome"],
)
WEBHOOK_OUTBOX_OLDEST_AGE = Gauge(
    "taskyard_webhook_outbox_oldest_age_seconds",
    "Age of the oldest webhook delivery still pending (since it was created or redelivered); 0: none",
)
# Cron schedules: the broker agent's scheduler.
SCHEDULES_DUE = Counter(
    "taskyard_schedules_due_total",
    "Due schedule occurrences a scheduler handled (the missed occurrences an outage collapses into one count "
    "once, here, and under skipped reason missed)",
)
SCHEDULE_TASKS_CREATED = Counter(
    "taskyard_schedule_tasks_created_total", "Tasks created by schedule occurrences"
)
SCHEDULE_OCCURRENCES_SKIPPED = Counter(
    "taskyard_schedule_occurrences_skipped_total",
    "Schedule occurrences that created no task: overlap (the previous task had not finished), missed "
    "(collapsed into a later one after an outage), existing (its key named a task already), failed",
    ["reason"],
)
SCHEDULER_LAG = Gauge(
    "taskyard_scheduler_lag_seconds",
    "How late this scheduler's last round handled its most overdue occurrence (0: none was due)",
)

STORE_ROWS_REMOVED = Counter(
    "taskyard_store_rows_removed_total",
    "Rows removed from the task store by retention or deletion, by table",
    ["table"],
)
STORE_OLDEST_ROW_AGE = Gauge(
    "taskyard_store_oldest_row_age_seconds",
    "Age of the oldest row per table (tasks: the oldest finished task; NaN: none)",
    ["table"],
)
RETENTION_OVERDUE = Gauge(
    "taskyard_retention_overdue_seconds",
    "How long past its retention the oldest finished task still stored is (0: retention keeps up)",
)
RETENTION_ROUNDS = Counter("taskyard_retention_rounds_total", "Retention rounds, by outcome", ["outcome"])

ROUTING_METHODS = ("llm", "rules", "explicit")
ROUTING_FALLBACK_REASONS = (
    "llm_error",
    "invalid_answer",
    "no_llm",
    "guard",
    "rate_limited",
    "no_evidence",
    "outweighed",
)
ROUTING_GUARD_OUTCOMES = ("stripped", "overruled")
ROUTING_CACHE_RESULTS = ("hit", "miss")
# The specialist label of a dead-lettered task that names none, or one outside the catalog (keeps it bounded).
UNKNOWN_SPECIALIST = "unknown"
# Normalised x-death reasons (RabbitMQ 3.10 to 4.x), plus "unknown" for anything else.
DEAD_LETTER_REASONS = ("delivery_limit", "rejected", "expired", "maxlen", "unknown")
LEASE_OUTCOMES = ("requeued", "dead_lettered")
WEBHOOK_OUTCOMES = ("delivered", "failed_attempt", "refused", "gave_up")
SCHEDULE_SKIP_REASONS = ("overlap", "missed", "existing", "failed")
WORKFLOW_KINDS = ("group", "chain")
WAITING_KINDS = ("delegation", "multi_route")

# fleet_limited: not sent, the model's fleet-wide rpm/tpm needed a longer wait than one in place.
LLM_OUTCOMES = (
    "ok",
    "rate_limited",
    "server_error",
    "client_error",
    "timeout",
    "connection_error",
    "error",
    "fleet_limited",
)

# Terminal statuses a worker records, and why a worker schedules a task again.
WORKER_FINISHED_STATUSES = ("completed", "failed", "cancelled")
RETRY_REASONS = ("transient", "rate_limited", "llm_rate_limited", "timeout", "store_unavailable")
STEP_RETRY_REASONS = ("server_error", "timeout", "connection_error")
START_DEFERRAL_REASONS = (
    "tenant_max_running",
    "fair_share",
    "leased",
    "not_routed",
    "not_due",
    "in_flight",
    "no_slot",
    "store_unavailable",
    "crashed",
)


def init_worker_labels(specialist: str) -> None:
    for status in WORKER_FINISHED_STATUSES:
        TASKS_FINISHED.labels(specialist, status)
    for reason in RETRY_REASONS:
        TASK_RETRIES.labels(specialist, reason)
    MESSAGES_QUARANTINED.labels(specialist)
    for counter in (TASK_HAND_BACKS, TASK_EARLY_SETTLES, TASK_RESUMES, TASKS_DELEGATED):
        counter.labels(specialist)
    for reason in STEP_RETRY_REASONS:
        LLM_STEP_RETRIES.labels(specialist, reason)
    for outcome in TEXT_TOOL_CALL_OUTCOMES:
        TEXT_TOOL_CALLS.labels(specialist, outcome)
    for outcome in OUTPUT_ANSWER_OUTCOMES:
        OUTPUT_ANSWERS.labels(specialist, outcome)
    for reason in START_DEFERRAL_REASONS:
        TASK_START_DEFERRALS.labels(specialist, reason)
    for kind in ("prompt", "completion"):
        LLM_TOKENS.labels(specialist, kind)
    TASK_DURATION.labels(specialist)
    for priority in Priority:
        TASK_QUEUE_WAIT.labels(specialist, priority.value)
    TASKS_IN_FLIGHT.labels(specialist)


RETENTION_OUTCOMES = ("caught_up", "backlog")


def init_store_labels(tables: Iterable[str], *, gauges: Iterable[str] = ()) -> None:
    """The removal counter's tables, and the oldest-age gauge's (only where a process sets it)."""
    for table in tables:
        STORE_ROWS_REMOVED.labels(table)
    for table in gauges:
        STORE_OLDEST_ROW_AGE.labels(table).set(float("nan"))


def count_removed(rows: dict[str, int]) -> None:
    for table, count in rows.items():
        if count:
            STORE_ROWS_REMOVED.labels(table).inc(count)


def init_broker_labels(specialists: Iterable[str]) -> None:
    for specialist in specialists:
        TASKS_DEAD_LETTERED.labels(specialist)
        TASKS_PARKED.labels(specialist)
        PARKED_RELEASED.labels(specialist)
        for method in ROUTING_METHODS:
            ROUTING_DECISIONS.labels(method, specialist)
    TASKS_DEAD_LETTERED.labels(UNKNOWN_SPECIALIST)
    for method in ROUTING_METHODS:
        ROUTING_DURATION.labels(method)
    for reason in ROUTING_FALLBACK_REASONS:
        ROUTING_FALLBACKS.labels(reason)
    for outcome in ROUTING_GUARD_OUTCOMES:
        ROUTING_GUARD.labels(outcome)
    for result in ROUTING_CACHE_RESULTS:
        ROUTING_CACHE.labels(result)
    for kind in ("prompt", "completion"):
        ROUTING_TOKENS.labels(kind)
    for reason in DEAD_LETTER_REASONS:
        DEAD_LETTERS.labels(reason)
    for outcome in LEASE_OUTCOMES:
        LEASES_RECLAIMED.labels(outcome)
    for outcome in WEBHOOK_OUTCOMES:
        WEBHOOK_DELIVERIES.labels(outcome)
    for reason in SCHEDULE_SKIP_REASONS:
        SCHEDULE_OCCURRENCES_SKIPPED.labels(reason)
    for method in ROUTING_METHODS:
        ROUTING_PARTS.labels(method)
    for kind in WORKFLOW_KINDS:
        WORKFLOWS_IN_PROGRESS.labels(kind)
    for kind in WAITING_KINDS:
        WAITING_PARENTS.labels(kind)


def count_dead_lettered(specialist: str | None, known: Collection[str]) -> None:
    """One more dead-lettered task; a specialist outside ``known`` (the catalog) counts as unknown."""
    label = specialist if specialist is not None and specialist in known else UNKNOWN_SPECIALIST
    TASKS_DEAD_LETTERED.labels(label).inc()


def init_llm_labels(model: str, specialist: str = ROUTER) -> None:
    for outcome in LLM_OUTCOMES:
        LLM_REQUESTS.labels(model, outcome)
    LLM_DURATION.labels(model)
    LLM_COST.labels(model, specialist)


def init_failover_labels(model: str) -> None:
    for reason in FAILOVER_REASONS:
        LLM_FAILOVERS.labels(model, reason)


def llm_outcome(exc: BaseException | None) -> str:
    """A bounded label for how an LLM call ended (duck-typed on the ``openai`` exceptions' attributes)."""
    if exc is None:
        return "ok"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            return "rate_limited"
        return "server_error" if status >= 500 else "client_error"
    name = type(exc).__name__
    if isinstance(exc, TimeoutError) or "Timeout" in name:
        return "timeout"
    if "Connection" in name:
        return "connection_error"
    return "error"


@contextmanager
def track_llm_request(model: str) -> Iterator[None]:
    """Count and time one LLM call; the exception, if any, goes on unchanged."""
    start = time.perf_counter()
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        LLM_DURATION.labels(model).observe(time.perf_counter() - start)
        LLM_REQUESTS.labels(model, llm_outcome(error)).inc()

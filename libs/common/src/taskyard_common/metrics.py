"""Every taskyard metric, defined once: ``taskyard_`` prefix, base units, bounded labels (never task ids).

One process per pod, so no multiprocess mode. Services pre-initialise the label sets they will use, so a
dashboard shows zeros instead of gaps.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram

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
ROUTING_FALLBACKS = Counter(
    "taskyard_routing_fallbacks_total", "LLM routing attempts that fell back to the rules router", ["reason"]
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
MESSAGES_DEAD_LETTERED = Counter(
    "taskyard_messages_rejected_total", "Messages rejected without requeue (dead-lettered)", ["queue"]
)

ROUTING_FALLBACK_REASONS = ("llm_error", "invalid_answer", "no_llm")


def init_worker_labels(specialist: str) -> None:
    for status in ("completed", "failed"):
        TASKS_FINISHED.labels(specialist, status)
    for kind in ("prompt", "completion"):
        LLM_TOKENS.labels(specialist, kind)
    TASK_DURATION.labels(specialist)


def init_broker_labels(specialists: Iterable[str]) -> None:
    for specialist in specialists:
        for method in ("llm", "rules", "explicit"):
            ROUTING_DECISIONS.labels(method, specialist)
    for reason in ROUTING_FALLBACK_REASONS:
        ROUTING_FALLBACKS.labels(reason)

"""When to send a request again, and after how long: a pure decision the clients carry out.

Only what is safe to repeat is retried: reads, cancels, and submissions, which carry an ``Idempotency-Key``
generated once, so however often one is sent the API creates one task. A dead-letter replay or discard is
never retried (a replay that answered 503 may already stand). Retried answers:

- ``429`` and ``503``: after ``Retry-After`` (the API always sends one), at most ``max_delay`` seconds; a
  longer ``Retry-After`` is not waited for: the error is raised at once, since waiting less would only be
  refused again;
- ``409 idempotency-key-in-use``: the same submission is still in flight (``Retry-After: 1``);
- connection failures and timeouts: after ``base_delay`` doubling, at most ``max_delay``.

Everything is bounded: ``max_attempts`` sends in all, and no more than ``max_total`` seconds of waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRIED_STATUSES = frozenset({429, 503})
IDEMPOTENCY_KEY_IN_USE = "idempotency-key-in-use"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5  # sends in all, the first included (1: never retry)
    base_delay: float = 0.5  # first wait after a connection failure, or an answer without Retry-After
    max_delay: float = 30.0  # the longest single wait
    max_total: float = 120.0  # the longest waiting in all, per call

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if min(self.base_delay, self.max_delay, self.max_total) < 0:
            raise ValueError("delays must not be negative")


NO_RETRY = RetryPolicy(max_attempts=1)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (RFC 9110, 10.2.3); None when absent or
    unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _backoff(policy: RetryPolicy, attempt: int) -> float:
    return float(min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1)))


def _within_budget(policy: RetryPolicy, attempt: int, waited: float, delay: float) -> float | None:
    if attempt >= policy.max_attempts or waited + delay > policy.max_total:
        return None
    return delay


def after_answer(
    policy: RetryPolicy,
    *,
    status: int,
    problem_type: str | None,
    retry_after: str | None,
    attempt: int,
    waited: float,
    conflict_retried: bool = False,
) -> float | None:
    """The wait before sending again after an error answer to send number ``attempt`` (from 1), having
    already waited ``waited`` seconds; None: give up and raise. ``conflict_retried``: this call may retry
    ``409 idempotency-key-in-use`` (a submission)."""
    in_use = status == 409 and conflict_retried and (problem_type or "").endswith(IDEMPOTENCY_KEY_IN_USE)
    if status not in RETRIED_STATUSES and not in_use:
        return None
    asked = parse_retry_after(retry_after)
    if asked is None:
        delay = _backoff(policy, attempt)
    elif asked > policy.max_delay:
        return None
    else:
        delay = asked
    return _within_budget(policy, attempt, waited, delay)


def after_failure(policy: RetryPolicy, *, attempt: int, waited: float) -> float | None:
    """The wait before sending again after send number ``attempt`` got no answer (a connection refused or
    dropped, a timeout); None: give up."""
    return _within_budget(policy, attempt, waited, _backoff(policy, attempt))

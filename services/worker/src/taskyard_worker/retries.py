"""The retry policy of a failed attempt: retry or give up, charged or not, after how long, and why.

Pure functions over the error, the attempt number, the specialist's policy and the task's attempt log, so
every rule is unit-tested without a broker. The handler carries the plan out (publish to a delay tier, then
record it in the store, then ack).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import openai

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.errors import StoreUnavailable
from taskyard_common.retry import backoff_seconds
from taskyard_worker.llm_calls import AttemptTimeout, FleetRateLimited, LlmRateLimited

# A 429 (or a store that cannot record the outcome) is not the task's fault, so it is not charged as an
# attempt; but a task must not circle for ever: after this many free deferrals it is charged like any error.
MAX_FREE_DEFERRALS = 20


@dataclass(frozen=True)
class RetryPlan:
    # transient | rate_limited (a 429) | llm_rate_limited (the fleet-wide limit) | timeout | store_unavailable:
    # taskyard_task_retries_total's label
    reason: str
    charged: bool  # does the next message carry attempt + 1?
    next_attempt: int
    delay_seconds: float  # the wait asked for; the delay tier rounds it up


def retry_reason(exc: BaseException) -> str:
    if isinstance(exc, FleetRateLimited):
        return "llm_rate_limited"
    if isinstance(exc, LlmRateLimited):
        return "rate_limited"
    if isinstance(exc, StoreUnavailable):
        return "store_unavailable"
    if isinstance(exc, AttemptTimeout | TimeoutError) or isinstance(exc.__cause__, openai.APITimeoutError):
        return "timeout"
    return "transient"


def free_deferrals(attempt_log: Iterable[Mapping[str, Any]]) -> int:
    """How often the task was already sent back without charging an attempt."""
    return sum(1 for entry in attempt_log if entry.get("charged") is False)


def plan_retry(
    exc: BaseException,
    attempt: int,
    spec: SpecialistSpec,
    attempt_log: Iterable[Mapping[str, Any]] = (),
    rng: random.Random | None = None,
) -> RetryPlan | None:
    """What to do after ``exc`` ended attempt number ``attempt`` (1-based); None: retries are exhausted."""
    reason = retry_reason(exc)
    base, cap = spec.backoff_base_seconds, spec.backoff_max_seconds
    if isinstance(exc, StoreUnavailable) and free_deferrals(attempt_log) < MAX_FREE_DEFERRALS:
        # The task's outcome could not be recorded: not its fault. Its steps (the answer included) are
        # checkpointed, so the next attempt picks up where this one stopped.
        deferred = free_deferrals(attempt_log)
        return RetryPlan(
            reason,
            charged=False,
            next_attempt=attempt,
            delay_seconds=backoff_seconds(deferred + 1, base, cap, rng),
        )
    if isinstance(exc, LlmRateLimited):
        deferred = free_deferrals(attempt_log)
        if deferred < MAX_FREE_DEFERRALS:
            # The provider's own wait when it named one, else a backoff that grows with each deferral.
            wait = (
                exc.retry_after
                if exc.retry_after is not None
                else backoff_seconds(deferred + 1, base, cap, rng)
            )
            return RetryPlan(reason, charged=False, next_attempt=attempt, delay_seconds=wait)
    if attempt >= spec.max_attempts:
        return None
    return RetryPlan(
        reason, charged=True, next_attempt=attempt + 1, delay_seconds=backoff_seconds(attempt, base, cap, rng)
    )

"""The retry policy: charged or not, how long, why, and when to give up."""

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import openai
import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.errors import StoreUnavailable, TransientError
from taskyard_worker.llm_calls import AttemptTimeout, FleetRateLimited, LlmRateLimited, retry_after_seconds
from taskyard_worker.retries import MAX_FREE_DEFERRALS, plan_retry, retry_reason


def spec(**overrides: Any) -> SpecialistSpec:
    fields: dict[str, Any] = {
        "name": "general",
        "description": "test",
        "instructions": "test",
        "max_attempts": 3,
        "backoff_base_seconds": 2,
        "backoff_max_seconds": 10,
        **overrides,
    }
    return SpecialistSpec(**fields)


def llm_timeout() -> TransientError:
    error = TransientError("LLM unreachable: APITimeoutError")
    error.__cause__ = openai.APITimeoutError(request=None)  # type: ignore[arg-type]
    return error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (TransientError("LLM answered HTTP 500"), "transient"),
        (StoreUnavailable("database unavailable"), "store_unavailable"),
        (LlmRateLimited("LLM answered HTTP 429", 2), "rate_limited"),
        (FleetRateLimited("the fleet-wide requests limit needs a 30.0 s wait", 30), "llm_rate_limited"),
        (AttemptTimeout("the attempt did not finish within 1 s"), "timeout"),
        (llm_timeout(), "timeout"),
        (RuntimeError("a bug"), "transient"),
    ],
)
def test_reasons(error: Exception, reason: str) -> None:
    assert retry_reason(error) == reason


def test_a_transient_error_is_charged_with_exponential_jittered_backoff() -> None:
    rng = random.Random(7)
    delays = []
    for attempt in (1, 2):
        plan = plan_retry(TransientError("boom"), attempt, spec(), rng=rng)
        assert plan is not None and plan.charged and plan.next_attempt == attempt + 1
        delays.append(plan.delay_seconds)
    # Equal jitter: between half and all of base * 2**(attempt - 1).
    assert 1 <= delays[0] <= 2 and 2 <= delays[1] <= 4


def test_the_backoff_is_capped() -> None:
    plan = plan_retry(TransientError("boom"), 9, spec(max_attempts=10, backoff_max_seconds=10))
    assert plan is not None and 5 <= plan.delay_seconds <= 10


def test_retries_are_exhausted_at_max_attempts() -> None:
    assert plan_retry(TransientError("boom"), 3, spec(max_attempts=3)) is None
    assert plan_retry(AttemptTimeout("slow"), 1, spec(max_attempts=1)) is None


def test_a_429_waits_what_it_asks_and_is_not_charged() -> None:
    plan = plan_retry(LlmRateLimited("HTTP 429", 42), 3, spec(max_attempts=3))
    assert plan is not None
    assert (plan.charged, plan.next_attempt, plan.delay_seconds, plan.reason) == (
        False,
        3,
        42,
        "rate_limited",
    )


def test_the_fleet_wide_limit_defers_for_its_wait_uncharged() -> None:
    plan = plan_retry(FleetRateLimited("fleet-wide limit", 30.5), 2, spec(max_attempts=2))
    assert plan is not None
    assert (plan.reason, plan.charged, plan.next_attempt, plan.delay_seconds) == (
        "llm_rate_limited",
        False,
        2,
        30.5,
    )


def test_a_429_without_retry_after_backs_off_by_its_deferrals() -> None:
    log = [{"charged": False}] * 3 + [{"charged": True}]
    plan = plan_retry(LlmRateLimited("HTTP 429", None), 1, spec(), log)
    assert plan is not None and not plan.charged
    assert 5 <= plan.delay_seconds <= 10  # the 4th deferral: min(10, 2 * 2**3) with equal jitter


def test_a_429_is_charged_once_the_free_deferrals_are_used_up() -> None:
    log = [{"charged": False}] * MAX_FREE_DEFERRALS
    plan = plan_retry(LlmRateLimited("HTTP 429", 1), 1, spec(), log)
    assert plan is not None and plan.charged and plan.next_attempt == 2
    assert plan_retry(LlmRateLimited("HTTP 429", 1), 3, spec(), log) is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "2500", "retry-after": "9"}, 2.5),
        ({"retry-after": "-3"}, 0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_in_seconds(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"retry-after": header}, now=now) == 30
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"retry-after": past}, now=now) == 0


def test_an_outcome_the_store_could_not_record_is_deferred_uncharged_within_a_bound() -> None:
    # Not the task's fault, and its steps (its answer too) are checkpointed: the next attempt resumes.
    plan = plan_retry(StoreUnavailable("database unavailable"), 3, spec(max_attempts=3))
    assert plan is not None and not plan.charged and plan.next_attempt == 3
    assert plan.reason == "store_unavailable"
    deferrals = [{"charged": False}] * MAX_FREE_DEFERRALS
    assert plan_retry(StoreUnavailable("again"), 3, spec(max_attempts=3), deferrals) is None

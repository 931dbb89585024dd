"""The retry policy as a pure decision, and carried out by the clients: submissions keep their
Idempotency-Key across retries, 429/503 wait for Retry-After, a replay is never repeated."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from taskyard_client import RateLimited, RetryPolicy, ServiceUnavailable, TransportError
from taskyard_client.errors import Conflict
from taskyard_client.retry import after_answer, after_failure, parse_retry_after
from tests.unit.client.fakes import async_client, client, problem, task_document

POLICY = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=10, max_total=12)


def answer(status: int, retry_after: str | None = None, *, attempt: int = 1, waited: float = 0, **kw: object):
    return after_answer(
        POLICY,
        status=status,
        problem_type=kw.get("problem_type"),  # type: ignore[arg-type]
        retry_after=retry_after,
        attempt=attempt,
        waited=waited,
        conflict_retried=bool(kw.get("conflict_retried")),
    )


def test_retry_after_in_seconds_or_as_a_date():
    now = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Thu, 01 May 2025 09:30:05 GMT", now=now) == 5.0
    assert parse_retry_after("Thu, 01 May 2025 09:29:00 GMT", now=now) == 0.0
    assert (
        parse_retry_after(None) is None
        and parse_retry_after("soon") is None
        and parse_retry_after("-1") is None
    )


def test_which_answers_are_retried_and_after_how_long():
    assert answer(429, "2") == 2.0
    assert answer(503, "0") == 0.0
    assert answer(503, None, attempt=3) == 2.0, "no Retry-After: doubling from base_delay"
    assert answer(503, "11") is None, "longer than max_delay: raise rather than be refused again"
    for status in (400, 401, 403, 404, 409, 422, 500):
        assert answer(status, "1") is None
    in_use = "https://taskyard.dev/problems/idempotency-key-in-use"
    assert answer(409, "1", problem_type=in_use, conflict_retried=True) == 1.0
    assert answer(409, "1", problem_type=in_use) is None, "only a submission may retry it"


def test_the_bounds():
    assert answer(503, "1", attempt=4) is None, "max_attempts sends in all"
    assert answer(503, "5", waited=8) is None, "max_total seconds of waiting"
    assert after_failure(POLICY, attempt=1, waited=0) == 0.5
    assert after_failure(POLICY, attempt=10, waited=0) is None
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_a_submission_is_retried_with_the_same_idempotency_key():
    keys: list[str] = []
    answers = iter(
        [
            problem(503, "queue-full", headers={"Retry-After": "0"}),
            problem(429, "rate-limited", headers={"Retry-After": "0"}),
            problem(409, "idempotency-key-in-use", headers={"Retry-After": "0"}),
        ]
    )

    def api(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["idempotency-key"])
        assert request.headers["authorization"] == "Bearer tyk_test_key"
        return next(answers, httpx.Response(202, json=task_document()))

    with client(api) as sdk:
        assert sdk.submit("hello", specialist="general").status == "pending"
    assert len(keys) == 4 and len(set(keys)) == 1, keys


def test_lost_connections_are_retried_too_for_a_submission():
    calls = 0

    def api(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise httpx.ConnectError("refused")
        return httpx.Response(202, json=task_document())

    with client(api) as sdk:
        sdk.submit("hello", idempotency_key="mine")
    assert calls == 3


def test_giving_up_raises_the_last_problem():
    def api(request: httpx.Request) -> httpx.Response:
        return problem(429, "rate-limited", "Slow down.", headers={"Retry-After": "0"})

    with client(api) as sdk, pytest.raises(RateLimited) as raised:
        sdk.submit("hello")
    assert raised.value.problem.detail == "Slow down." and raised.value.retry_after == 0.0

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with client(down) as sdk, pytest.raises(TransportError):
        sdk.get("0b7d9a0e-3d55-4bd4-9d0c-4a51c5a3c5a1")


async def test_a_replay_is_sent_once_whatever_the_answer():
    calls = 0

    def api(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return problem(503, "broker-unavailable", headers={"Retry-After": "0"}, task_status="queued")

    async with async_client(api) as sdk:
        with pytest.raises(ServiceUnavailable) as raised:
            await sdk.replay("0b7d9a0e-3d55-4bd4-9d0c-4a51c5a3c5a1")
    assert calls == 1
    assert raised.value.problem.task_status == "queued", "the replay stands: the problem says so"


def test_a_409_that_is_not_about_the_key_is_raised_at_once():
    calls = 0

    def api(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return problem(409, "task-not-completed", task_status="running")

    with client(api) as sdk, pytest.raises(Conflict) as raised:
        sdk.result("0b7d9a0e-3d55-4bd4-9d0c-4a51c5a3c5a1")
    assert calls == 1 and raised.value.problem.task_status == "running"

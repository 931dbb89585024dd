"""Which dead letters go back to their work queue (dead_letters/returns.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from taskyard_broker_agent.dead_letters.returns import (
    MAX_RETURNS,
    RETURNS_HEADER,
    carried_headers,
    may_return,
    may_return_some,
    returns_of,
)
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store.records import LEASE_ENDED_BY_SUPERVISOR

RAN_OUT = datetime(2026, 1, 1, tzinfo=UTC)


def test_only_a_delivery_limit_death_of_a_task_not_started_goes_back() -> None:
    assert may_return("delivery_limit", TaskStatus.QUEUED, 0)
    assert may_return("delivery_limit", TaskStatus.QUEUED, MAX_RETURNS - 1)
    assert not may_return(
        "delivery_limit", TaskStatus.QUEUED, MAX_RETURNS
    )  # bounded: a pre-start poison ends
    assert not may_return(
        "delivery_limit", TaskStatus.RUNNING, 0
    )  # started: a poison that kills once running
    assert not may_return("rejected", TaskStatus.QUEUED, 0)  # a worker's verdict
    assert not may_return("expired", TaskStatus.QUEUED, 0)
    assert not may_return("delivery_limit", None, 0)
    assert may_return("delivery_limit", TaskStatus.RETRYING, 0)  # its next attempt never started


def test_a_task_started_by_a_worker_child_seen_dead_goes_back_too() -> None:
    assert may_return("delivery_limit", TaskStatus.RUNNING, 0, LEASE_ENDED_BY_SUPERVISOR)
    assert not may_return("delivery_limit", TaskStatus.RUNNING, MAX_RETURNS, LEASE_ENDED_BY_SUPERVISOR)
    assert not may_return("delivery_limit", TaskStatus.RUNNING, 0, RAN_OUT)  # nobody saw its worker die
    assert not may_return("rejected", TaskStatus.RUNNING, 0, LEASE_ENDED_BY_SUPERVISOR)
    assert not may_return("delivery_limit", TaskStatus.COMPLETED, 0, LEASE_ENDED_BY_SUPERVISOR)


def test_only_a_delivery_limit_letter_below_the_returns_cap_is_looked_up() -> None:
    assert may_return_some("delivery_limit", 0)
    assert not may_return_some("delivery_limit", MAX_RETURNS)
    assert not may_return_some("rejected", 0)


def test_a_return_carries_the_workers_counts_and_counts_itself() -> None:
    headers = {"taskyard-crashes": 1, "taskyard-unstarted-returns": 2, "x-delivery-count": 3, "other": "x"}
    assert carried_headers(headers) == {
        "taskyard-crashes": 1,
        "taskyard-unstarted-returns": 2,
        RETURNS_HEADER: 1,
    }
    assert carried_headers({RETURNS_HEADER: 2})[RETURNS_HEADER] == 3
    assert (
        returns_of({RETURNS_HEADER: True}) == 0
        and returns_of({RETURNS_HEADER: -1}) == 0
        and returns_of(None) == 0
    )

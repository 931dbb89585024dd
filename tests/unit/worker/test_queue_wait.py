"""The queue wait a worker observes per started attempt (taskyard_task_queue_wait_seconds)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage, WorkMessage
from taskyard_common.store import TaskRecord
from taskyard_worker.attempts import queue_wait_seconds

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
DECISION = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1)


def record(**kwargs) -> TaskRecord:
    fields = {
        "id": uuid.uuid4(),
        "status": TaskStatus.RUNNING,
        "input": "x",
        "metadata": {},
        "requested_specialist": None,
        "specialist": "general",
        "routing": DECISION,
        "attempts": 1,
        "result": None,
        "error": None,
        "usage": Usage(),
        "created_at": T0,
        "published_at": T0,
        "routed_at": T0 + timedelta(seconds=1),
        "started_at": T0 + timedelta(seconds=11),
        "finished_at": None,
        "updated_at": T0,
    }
    return TaskRecord(**{**fields, **kwargs})


def message(sent_at: datetime = T0) -> WorkMessage:
    return WorkMessage(
        task_id=uuid.uuid4(), specialist="general", input="x", routing=DECISION, sent_at=sent_at
    )


def test_first_attempt_waits_from_routing_to_start():
    assert queue_wait_seconds(record(), message()) == 10


def test_without_a_routing_time_the_message_sent_at_counts():
    assert queue_wait_seconds(record(routed_at=None), message(T0 + timedelta(seconds=5))) == 6


def test_a_retry_waits_from_its_due_time_not_from_the_first_routing():
    entry = {"attempt": 1, "error": "e", "reason": "transient", "delay_seconds": 5,
             "charged": True, "at": (T0 + timedelta(seconds=100)).isoformat()}  # fmt: skip
    started = T0 + timedelta(seconds=108)
    assert queue_wait_seconds(record(attempt_log=[entry], started_at=started), message()) == 3


def test_never_negative():
    assert queue_wait_seconds(record(started_at=T0), message()) == 0


def test_refused_starts_are_part_of_the_wait():
    retry = {"attempt": 1, "error": "e", "reason": "transient", "delay_seconds": 5,
             "charged": True, "at": (T0 + timedelta(seconds=100)).isoformat()}  # fmt: skip
    refused = {"event": "start_deferred", "reason": "fair_share", "attempt": 2, "count": 3,
               "first_at": (T0 + timedelta(seconds=106)).isoformat(),
               "last_at": (T0 + timedelta(seconds=110)).isoformat()}  # fmt: skip
    started = T0 + timedelta(seconds=115)
    assert queue_wait_seconds(record(attempt_log=[retry, refused], started_at=started), message()) == 10
    assert queue_wait_seconds(record(attempt_log=[refused]), message()) == 10

"""The one announce path: the message a stored task's status calls for, built from its record."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.announce import announcement, destination
from taskyard_common.errors import NotAnnounceable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage, RoutingDecision, RoutingMethod, Usage, WorkMessage
from taskyard_common.store import TaskRecord
from taskyard_common.topology import INTAKE_ROUTING_KEY, Topology


def _record(**fields) -> TaskRecord:
    now = datetime.now(UTC)
    base = {
        "id": uuid.uuid4(),
        "status": TaskStatus.QUEUED,
        "input": {"q": 1},
        "metadata": {"k": "v"},
        "requested_specialist": None,
        "specialist": "general",
        "routing": RoutingDecision(
            method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.7
        ),
        "attempts": 0,
        "result": None,
        "error": None,
        "usage": Usage(),
        "created_at": now,
        "published_at": None,
        "routed_at": now,
        "started_at": None,
        "finished_at": None,
        "updated_at": now,
        "deadline": now + timedelta(hours=1),
        "timeout_seconds": 12.5,
    }
    return TaskRecord.model_validate({**base, **fields})


def test_announced_messages_carry_the_task_limits():
    queued = _record(attempts=2)
    work = WorkMessage.from_record(queued)
    assert (work.specialist, work.attempt, work.routing) == ("general", 2, queued.routing)
    assert (work.deadline, work.timeout_seconds, work.metadata) == (queued.deadline, 12.5, {"k": "v"})
    assert WorkMessage.from_record(_record()).attempt == 1, "a replay starts again at attempt 1"
    pending = _record(status=TaskStatus.PENDING, specialist=None, routing=None)
    intake = IntakeMessage.from_record(pending)
    assert (intake.deadline, intake.timeout_seconds, intake.input) == (pending.deadline, 12.5, {"q": 1})
    with pytest.raises(NotAnnounceable):
        WorkMessage.from_record(_record(routing=None))


def test_the_status_picks_the_message_and_its_destination():
    topology = Topology("p")
    pending = announcement(_record(status=TaskStatus.PENDING, specialist=None, routing=None))
    assert isinstance(pending, IntakeMessage)
    assert destination(topology, pending) == (topology.intake_exchange, INTAKE_ROUTING_KEY)
    queued = announcement(_record())
    assert isinstance(queued, WorkMessage)
    assert destination(topology, queued) == (topology.tasks_exchange, "general")
    # A scheduled task goes to the broker agent too, which sends it through the delay queues until it is due.
    scheduled = announcement(_record(status=TaskStatus.SCHEDULED, specialist=None, routing=None))
    assert isinstance(scheduled, IntakeMessage)
    assert destination(topology, scheduled) == (topology.intake_exchange, INTAKE_ROUTING_KEY)
    for status in set(TaskStatus) - {TaskStatus.PENDING, TaskStatus.QUEUED, TaskStatus.SCHEDULED}:
        with pytest.raises(NotAnnounceable):
            announcement(_record(status=status))

"""Which queue a task's priority sends it to, on RabbitMQ 3.x (a queue per level) and on ≥ 4.0 (quorum-queue
priorities: high and normal share the normal queue, told apart by the AMQP priority property)."""

import uuid
from types import SimpleNamespace

import pytest

from taskyard_common.amqp import Publisher, outgoing
from taskyard_common.announce import destination
from taskyard_common.broker_version import server_version
from taskyard_common.messages import IntakeMessage, Priority, RoutingDecision, RoutingMethod, WorkMessage
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import (
    Topology,
    intake_target,
    level_queues_pattern,
    native_priorities,
    queue_level,
    work_target,
)

H, N, L = Priority.HIGH, Priority.NORMAL, Priority.LOW
TOPOLOGY = Topology("p")


def _work(priority: Priority) -> WorkMessage:
    routing = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=1.0)
    return WorkMessage(
        task_id=uuid.uuid4(), input="x", specialist="general", routing=routing, priority=priority
    )


def _intake(priority: Priority) -> IntakeMessage:
    return IntakeMessage(task_id=uuid.uuid4(), input="x", priority=priority)


def _broker(version: bytes) -> SimpleNamespace:
    """What ``server_version`` reads of a connection: its transport's server properties."""
    return SimpleNamespace(
        transport=SimpleNamespace(connection=SimpleNamespace(server_properties={"version": version}))
    )


def test_each_level_has_its_own_queue_and_normal_keeps_the_unsuffixed_names():
    assert TOPOLOGY.specialist_queues("general") == [
        "p.work.general.high",
        "p.work.general",
        "p.work.general.low",
    ]
    assert TOPOLOGY.intake_queues() == ["p.intake.high", "p.intake", "p.intake.low"]
    assert (work_target("general", H), work_target("general"), intake_target(L)) == (
        "work.general.high",
        "work.general",
        "intake.low",
    )


def test_on_3x_a_message_goes_to_its_own_levels_queue():
    for priority in Priority:
        assert queue_level(priority, native=False) is priority
    assert destination(TOPOLOGY, _work(H)) == ("p.tasks", "general.high")
    assert destination(TOPOLOGY, _work(N)) == ("p.tasks", "general")
    assert destination(TOPOLOGY, _work(L)) == ("p.tasks", "general.low")
    assert destination(TOPOLOGY, _intake(H)) == ("p.intake", "task.high")
    assert destination(TOPOLOGY, _intake(L)) == ("p.intake", "task.low")


@pytest.mark.parametrize(
    ("version", "native"),
    [(b"3.10.8", False), (b"3.13.7", False), (b"4.0.0", True), (b"4.1.4+2-g1", True), (b"4.3.0", True)],
)
def test_the_version_switch_reads_the_brokers_version(version: bytes, native: bool):
    connection = _broker(version)
    assert native_priorities(server_version(connection)) is native  # type: ignore[arg-type]
    publisher = Publisher(channel=None, settings=AmqpSettings(), connection=connection)  # type: ignore[arg-type]
    assert publisher.native_priorities is native
    assert publisher.level(H) is (N if native else H)
    assert publisher.level(L) is L, "4.0's two levels cannot hold low: it keeps its own queue"


def test_on_4x_high_and_normal_share_the_normal_queue_and_differ_by_amqp_priority():
    assert destination(TOPOLOGY, _work(H), native=True) == ("p.tasks", "general")
    assert destination(TOPOLOGY, _work(N), native=True) == ("p.tasks", "general")
    assert destination(TOPOLOGY, _work(L), native=True) == ("p.tasks", "general.low")
    assert destination(TOPOLOGY, _intake(H), native=True) == ("p.intake", "task")
    # A 4.x quorum queue treats a priority above 4 as high, 0-4 as normal.
    assert outgoing(_work(H)).priority == 8
    assert outgoing(_work(N)).priority == 4
    assert outgoing(_work(L)).priority == 0


def test_a_publisher_without_a_connection_routes_as_on_3x():
    publisher = Publisher(channel=None, settings=AmqpSettings())  # type: ignore[arg-type]
    assert publisher.native_priorities is False


def test_the_scaler_pattern_matches_exactly_a_work_queues_levels():
    import re

    pattern = re.compile(level_queues_pattern("p.work.general"))
    assert {q for q in TOPOLOGY.specialist_queues("general") if pattern.search(q)} == set(
        TOPOLOGY.specialist_queues("general")
    )
    for other in ("p.work.general-2", "p.work.general.highest", "pxwork.general", "p.work.generalx.low"):
        assert not pattern.search(other)

from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology, dead_letter_queue_arguments, work_queue_arguments


def test_names_derive_from_the_prefix():
    topology = Topology("acme")
    assert topology.intake_exchange == "acme.intake"
    assert topology.intake_queue == "acme.intake"
    assert topology.tasks_exchange == "acme.tasks"
    assert topology.specialist_queue("summarizer") == "acme.work.summarizer"
    assert topology.dead_letter_exchange == "acme.dlx"
    assert topology.dead_letter_queue == "acme.dead-letters"
    assert topology.work_queue_names(["a", "b"]) == [
        *("acme.intake.high", "acme.intake", "acme.intake.low"),
        *("acme.work.a.high", "acme.work.a", "acme.work.a.low"),
        *("acme.work.b.high", "acme.work.b", "acme.work.b.low"),
    ]


def test_two_prefixes_share_no_name():
    one, two = Topology("one"), Topology("two")
    names_one = {*one.work_queue_names(["x"]), one.dead_letter_queue, one.dead_letter_exchange}
    names_two = {*two.work_queue_names(["x"]), two.dead_letter_queue, two.dead_letter_exchange}
    assert not names_one & names_two


def test_work_queue_arguments_are_safe_quorum_defaults():
    settings = AmqpSettings(delivery_limit=7, max_length=123)
    args = work_queue_arguments(Topology("p"), settings)
    assert args == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 7,
        "x-dead-letter-exchange": "p.dlx",
        # at-least-once dead-lettering is only honoured together with reject-publish.
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-max-length": 123,
    }


def test_dead_letter_queue_does_not_dead_letter_itself():
    assert dead_letter_queue_arguments((3, 10, 8)) == {"x-queue-type": "quorum"}


def test_dead_letter_queue_never_drops_on_rabbitmq_4():
    """4.0 gives a quorum queue without a limit a default of 20: requeues while PostgreSQL is down would
    drop dead letters. -1 is "unlimited" there (on 3.x it would drop at the first requeue)."""
    for version in ((4, 0, 0), (4, 1, 2), (4, 3)):
        assert dead_letter_queue_arguments(version) == {"x-queue-type": "quorum", "x-delivery-limit": -1}
    assert "x-delivery-limit" not in dead_letter_queue_arguments((3, 13, 7))


def test_delay_tiers_round_up_and_cap():
    from taskyard_common.topology import DELAY_TIERS, delay_tier

    assert delay_tier(0) == 1
    assert delay_tier(1) == 1
    assert delay_tier(1.01) == 2
    assert delay_tier(45) == 60
    assert delay_tier(10**6) == DELAY_TIERS[-1]


def test_backoff_grows_with_jitter_within_bounds():
    import random

    from taskyard_common.retry import backoff_seconds

    rng = random.Random(7)
    for attempt, ceiling in ((1, 2), (2, 4), (3, 8), (10, 60)):
        for _ in range(50):
            value = backoff_seconds(attempt, base=2, cap=60, rng=rng)
            assert ceiling / 2 <= value <= ceiling


def test_a_hop_towards_a_moment_never_overshoots_it_but_by_the_shortest_tier():
    from taskyard_common.retry import hop_tier
    from taskyard_common.topology import DELAY_TIERS

    assert hop_tier(0) == hop_tier(-5) == hop_tier(0.5) == DELAY_TIERS[0]
    assert hop_tier(5) == 5
    assert hop_tier(9.99) == 5
    assert hop_tier(45) == 30
    assert hop_tier(10**6) == DELAY_TIERS[-1]
    for seconds in (1, 3, 17, 299, 301, 3599, 7200):
        assert hop_tier(seconds) <= seconds

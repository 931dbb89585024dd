"""How the broker agent paces retries: intake backoff through delay tiers, dead-letter pauses, deadlines."""

import random
from datetime import UTC, datetime, timedelta

from taskyard_broker_agent.dead_letters.consumer import retry_pause
from taskyard_broker_agent.intake.decisions import deadline_passed
from taskyard_broker_agent.intake.handler import describe_error
from taskyard_common.errors import PublishRejected
from taskyard_common.retry import backoff_seconds
from taskyard_common.topology import DELAY_TIERS, delay_tier


def test_intake_backoff_grows_per_attempt_and_lands_on_a_tier():
    rng = random.Random(3)
    for attempt in range(1, 12):
        ceiling = min(30.0, 1.0 * 2 ** (attempt - 1))
        for _ in range(20):
            delay = backoff_seconds(attempt, 1.0, 30.0, rng)
            assert ceiling / 2 <= delay <= ceiling
            tier = delay_tier(delay)
            assert tier in DELAY_TIERS and tier >= delay
    # The default cap keeps every intake retry in the 30 s tier or below.
    assert delay_tier(backoff_seconds(50, 1.0, 30.0, rng)) <= 30


def test_dead_letter_pause_doubles_per_redelivery_up_to_the_cap():
    assert [retry_pause(n, 1.0, 30.0) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert retry_pause(10_000, 0.5, 60.0) == 60.0


def test_deadline_passed():
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert not deadline_passed(None, now)
    assert deadline_passed(now - timedelta(seconds=1), now)
    assert deadline_passed(now, now)
    assert not deadline_passed(now + timedelta(seconds=1), now)
    # A naive timestamp means UTC.
    assert deadline_passed(datetime(2029, 12, 31, 23, 59), now)


def test_stored_errors_name_taskyard_errors_and_only_the_type_of_others():
    assert describe_error(PublishRejected("queue full")) == "PublishRejected: queue full"
    assert describe_error(KeyError("secret input")) == "KeyError"

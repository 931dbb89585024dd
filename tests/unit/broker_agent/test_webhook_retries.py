"""What follows a webhook attempt: delivered, retried with backoff, or given up after the window."""

import random
from datetime import UTC, datetime, timedelta

from taskyard_broker_agent.webhooks.retries import Next, backoff_seconds, decide
from taskyard_common.webhooks import WebhookSettings

SETTINGS = WebhookSettings(backoff_base_seconds=5, backoff_max_seconds=3600, retry_hours=24)
START = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_2xx_is_delivered():
    assert decide(ok=True, attempt=9, window_start=START, now=START, settings=SETTINGS).next is Next.DELIVERED


def test_backoff_doubles_with_equal_jitter_up_to_the_cap():
    rand = random.Random(7)
    for attempt, ceiling in [(1, 5), (2, 10), (3, 20), (4, 40), (10, 2560), (11, 3600), (50, 3600)]:
        for _ in range(20):
            assert ceiling / 2 <= backoff_seconds(attempt, SETTINGS, rand) <= ceiling


def test_a_failure_is_retried_after_the_backoff():
    now = START + timedelta(minutes=3)
    decision = decide(ok=False, attempt=1, window_start=START, now=now, settings=SETTINGS)
    assert decision.next is Next.RETRY and decision.at is not None
    assert now + timedelta(seconds=2.5) <= decision.at <= now + timedelta(seconds=5)


def test_the_last_retry_is_due_at_the_end_of_the_window_then_it_gives_up():
    end = START + timedelta(hours=24)
    late = decide(
        ok=False, attempt=30, window_start=START, now=end - timedelta(seconds=10), settings=SETTINGS
    )
    assert late.next is Next.RETRY and late.at == end
    assert decide(ok=False, attempt=31, window_start=START, now=end, settings=SETTINGS).next is Next.GIVE_UP


def test_a_redelivery_opens_a_new_window():
    redelivered = START + timedelta(days=3)
    decision = decide(
        ok=False,
        attempt=40,
        window_start=redelivered,
        now=redelivered + timedelta(seconds=1),
        settings=SETTINGS,
    )
    assert decision.next is Next.RETRY

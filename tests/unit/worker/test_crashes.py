"""A crashed message runs again among the others after its first crash and alone only once it was in flight
for two (crashes.py): a poison message is isolated within two deliveries, its innocent neighbours almost
never."""

import random

import pytest

from taskyard_worker.crashes import (
    CRASHES_HEADER,
    SPREAD_MAX_SECONDS,
    SUSPECT_AFTER_CRASHES,
    Isolate,
    RunAgain,
    after_crash,
    crash_headers,
    crashed_too_often,
    crashes_of,
)


def test_a_first_redelivery_counts_one_crash_and_a_republished_message_carries_its_count():
    assert crashes_of(None, redelivered=False) == 0
    assert crashes_of({"schema_version": 1}, redelivered=True) == 1
    assert crashes_of({CRASHES_HEADER: 1}, redelivered=False) == 1
    assert crashes_of({CRASHES_HEADER: 1}, redelivered=True) == 2


@pytest.mark.parametrize("junk", ["2", -1, True, 1.5, None, [1]])
def test_a_header_that_is_not_a_count_counts_as_none(junk):
    assert crashes_of({CRASHES_HEADER: junk}, redelivered=True) == 1


def test_the_count_travels_in_a_header_only_once_there_is_one():
    assert crash_headers(0) is None
    assert crash_headers(1) == {CRASHES_HEADER: 1}


@pytest.mark.parametrize(("lease", "spread"), [(30, SPREAD_MAX_SECONDS), (3, 3)])
def test_after_one_crash_the_message_runs_again_among_the_others_once_the_dead_workers_lease_is_over(
    lease, spread
):
    rng = random.Random(18)
    holds = []
    for _ in range(200):
        decision = after_crash(1, lease_seconds=lease, rng=rng)
        assert isinstance(decision, RunAgain)
        # Never back before the dead worker's lease can have run out.
        assert decision.delay_seconds == lease
        holds.append(decision.hold_seconds)
    # Held for different times before the same delay tier, so one crash's messages do not come back together.
    assert 0 <= min(holds) < spread / 10 and spread * 0.9 < max(holds) <= spread


def test_a_message_in_flight_for_two_crashes_is_a_suspect_and_runs_alone_once_the_lease_is_over():
    assert SUSPECT_AFTER_CRASHES == 2
    # Held for the dead worker's lease first: in quarantine it then runs at once instead of waiting there.
    assert after_crash(2, lease_seconds=30) == Isolate(hold_seconds=30)
    assert after_crash(5, lease_seconds=3) == Isolate(hold_seconds=3)


@pytest.mark.parametrize("limit", [1, 2, 5, 20])
def test_a_task_crashes_at_most_the_delivery_limit_plus_two_workers(limit):
    # As many as before crash counting: one crash from the main queue, then limit + 1 in quarantine.
    crashes = 0
    while not crashed_too_often(crashes, limit):
        crashes = crashes_of(crash_headers(crashes), redelivered=True)  # it ran, and its worker died
    assert crashes == limit + 2
    # A suspect on its way to quarantine is below the budget, whatever the limit.
    assert not crashed_too_often(SUSPECT_AFTER_CRASHES, limit)


def test_a_poison_message_is_isolated_by_its_second_crash_a_bystander_only_if_caught_twice():
    # The poison crashes every delivery: its second redelivery isolates it.
    crashes = 0
    for _ in range(2):
        crashes = crashes_of(crash_headers(crashes), redelivered=True)
    assert isinstance(after_crash(crashes, lease_seconds=3), Isolate)
    # A neighbour caught once, then completing elsewhere, never reaches the quarantine.
    once = crashes_of(None, redelivered=True)
    assert isinstance(after_crash(once, lease_seconds=3), RunAgain)

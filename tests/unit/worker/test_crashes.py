"""A crashed message runs again among the others after its first crash and alone only once it was in flight
for two (crashes.py): a poison message is isolated within two deliveries, its innocent neighbours almost
never."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store.records import LEASE_ENDED_BY_SUPERVISOR
from taskyard_worker.crashes import (
    CRASHES_HEADER,
    SPREAD_TIERS,
    SUSPECT_AFTER_CRASHES,
    UNSTARTED_HEADER,
    Isolate,
    RunAgain,
    after_crash,
    crash_budget,
    crash_headers,
    crashed_too_often,
    crashes_of,
    lease_left,
    lease_wait,
    proven_poison,
    quarantine_isolated,
    quarantine_wait,
    started_before,
    suspect_after,
    unstarted_returns,
    unstarted_too_often,
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
    assert crash_headers(0, 2) == {UNSTARTED_HEADER: 2}
    assert unstarted_returns(crash_headers(1, 2)) == 2 and unstarted_returns(None) == 0


@pytest.mark.parametrize("status", list(TaskStatus))
def test_only_a_task_that_was_running_counts_a_crash(status):
    # A message that only waited in the dead worker's prefetch (its task still queued) caused nothing.
    assert started_before(status) is (status is TaskStatus.RUNNING)
    assert not started_before(None)


def test_a_message_that_keeps_coming_back_unstarted_is_a_suspect_past_the_delivery_limit():
    # What the broker would do with the same copy: a message that kills its worker before it starts
    # cannot loop for ever.
    assert not unstarted_too_often(2, delivery_limit=2)
    assert unstarted_too_often(3, delivery_limit=2)


@pytest.mark.parametrize(("lease", "tiers"), [(3, {5, 10}), (30, {30, 60}), (1, {1, 2})])
def test_after_one_crash_the_message_runs_again_among_the_others_once_the_dead_workers_lease_is_over(
    lease, tiers
):
    rng = random.Random(18)
    delays = set()
    for _ in range(50):
        decision = after_crash(1, lease_seconds=lease, rng=rng)
        assert isinstance(decision, RunAgain)
        delays.add(decision.delay_seconds)
    # Never back before the dead worker's lease can have run out; over two delay tiers, so that one crash's
    # messages do not all come back at the same moment.
    assert delays == tiers
    assert SPREAD_TIERS == 2


def test_a_message_in_flight_for_two_crashes_is_a_suspect_and_runs_alone():
    assert SUSPECT_AFTER_CRASHES == 2
    assert isinstance(after_crash(2, lease_seconds=30), Isolate)
    assert isinstance(after_crash(5, lease_seconds=3), Isolate)


@pytest.mark.parametrize("limit", [1, 2, 5, 20])
def test_a_task_crashes_at_most_two_workers_plus_the_quarantine_queues_limit(limit):
    # Where the quarantine queue dead-letters it on RabbitMQ 3.x and 4.0-4.2 (they count a dead channel's
    # returns): the budget only matters where a broker does not.
    crashes = 0
    while not crashed_too_often(crashes, limit):
        crashes = crashes_of(crash_headers(crashes), redelivered=True)  # it ran, and its worker died
    assert crashes == crash_budget(limit) == SUSPECT_AFTER_CRASHES + limit + 1
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


def test_a_lease_ended_by_the_supervisor_lets_the_crashed_message_run_again_at_once():
    # The supervisor ended the dead child's lease (supervisor.py): nothing to wait for.
    now = datetime(2026, 12, 2, tzinfo=UTC)
    over = lease_left(now - timedelta(milliseconds=5), now)
    assert over is not None and over <= 0
    assert after_crash(1, lease_seconds=30, lease_left=over) == RunAgain(0)
    # A suspect goes to quarantine at once too, rather than round a lease's delay tier.
    assert after_crash(2, lease_seconds=30, lease_left=over) == Isolate(0)


def test_under_a_supervisor_every_task_in_flight_at_a_crash_goes_to_quarantine_at_once():
    # Its quarantine child runs nothing healthy beside a suspect; a lease the supervisor has not ended yet
    # (the redelivery raced its statement) is waited for in quarantine, in place, for a moment.
    assert suspect_after(supervised=True) == 1 and suspect_after(supervised=False) == SUSPECT_AFTER_CRASHES
    left = lease_left(datetime(2026, 12, 2, 0, 0, 29, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
    assert left == 29
    assert after_crash(1, lease_seconds=30, lease_left=left, supervised=True) == Isolate(0)
    assert after_crash(1, lease_seconds=30, lease_left=-1, supervised=True) == Isolate(0)
    # The budget counts one crash before quarantine instead of two.
    assert crash_budget(2, supervised=True) == crash_budget(2) - 1 == 4
    assert crashed_too_often(4, 2, supervised=True) and not crashed_too_often(4, 2)


def test_a_supervised_lease_still_running_waits_the_shortest_tier_not_a_lease():
    # A re-run racing the supervisor's statement comes back in a moment (the start defers it if the lease
    # still holds then), not after a whole lease.
    assert lease_wait(29, 30, supervised=True) == 1
    assert lease_wait(-0.5, 30, supervised=True) == 0


def test_without_a_supervisor_a_running_lease_is_waited_out_as_before():
    assert lease_wait(29, 30, supervised=False) is None
    assert lease_wait(None, 30, supervised=False) is None
    assert lease_left(None, datetime(2026, 12, 2, tzinfo=UTC)) is None
    assert after_crash(2, lease_seconds=30, lease_left=29) == Isolate(30)
    decision = after_crash(1, lease_seconds=30, lease_left=29, rng=random.Random(1))
    assert isinstance(decision, RunAgain) and decision.delay_seconds in (30, 60)


def test_a_message_that_crashed_alone_in_quarantine_waits_longer_each_time_under_a_supervisor():
    # Its first run in quarantine is its second crash (one before quarantine under a supervisor).
    assert [quarantine_wait(c, 3, supervised=True) for c in (2, 3, 4)] == [6, 12, 24]
    # Without a supervisor a lease, for the dead worker's lease to run out.
    assert quarantine_wait(3, 30, supervised=False) == 30


def test_a_quarantine_crash_proves_poison_only_with_isolated_children_and_the_lease_ended() -> None:
    assert quarantine_isolated(supervised=True, quarantine_children=2, job_mode=False)
    assert not quarantine_isolated(supervised=True, quarantine_children=0, job_mode=False)
    assert not quarantine_isolated(supervised=True, quarantine_children=2, job_mode=True)
    assert not quarantine_isolated(supervised=False, quarantine_children=2, job_mode=False)
    assert proven_poison(isolated=True, lease_expires_at=LEASE_ENDED_BY_SUPERVISOR)
    # Ran out (a whole pod died, nobody ended it: its short lease can run out while the redelivery looks),
    # still held (the consumer lives) or none: no proof.
    now = datetime.now(UTC)
    assert not proven_poison(isolated=True, lease_expires_at=now - timedelta(seconds=1))
    assert not proven_poison(isolated=True, lease_expires_at=now + timedelta(seconds=5))
    assert not proven_poison(isolated=True, lease_expires_at=None)
    assert not proven_poison(isolated=False, lease_expires_at=LEASE_ENDED_BY_SUPERVISOR)

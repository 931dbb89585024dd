"""The supervisor's decisions when a worker child ends (supervision.py): a crash is forked again at once, a
crash loop before consuming backs off, an exit of the child's own ends the supervisor with its code."""

import signal

import pytest

from taskyard_common.service import EXIT_CONFIG, EXIT_OK, EXIT_UNAVAILABLE
from taskyard_worker.supervision import (
    BACKOFF_MAX_SECONDS,
    FREE_RESTARTS,
    Exit,
    Restart,
    Role,
    after_child_exit,
    child_roles,
    main_share,
    restart_delay,
    stop_code,
    unready_streak,
)

KILLED = -signal.SIGKILL


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGTERM])
def test_a_child_killed_by_a_signal_after_it_consumed_is_forked_again_at_once(sig):
    # A poison task, a segfault, the OOM killer: the next child should consume within a connection's time.
    assert after_child_exit(-sig, stopping=False, unready_crashes=0) == Restart(0)


@pytest.mark.parametrize("code", [EXIT_OK, EXIT_UNAVAILABLE, EXIT_CONFIG])
def test_an_exit_code_of_the_childs_own_ends_the_supervisor_with_it(code):
    # Job mode's idle exit, an unreachable broker (the orchestrator restarts with back-off), a bad config.
    assert after_child_exit(code, stopping=False, unready_crashes=0) == Exit(code)


def test_while_stopping_nothing_restarts():
    assert after_child_exit(KILLED, stopping=True, unready_crashes=0) == Exit(0)
    assert after_child_exit(EXIT_UNAVAILABLE, stopping=True, unready_crashes=0) == Exit(EXIT_UNAVAILABLE)


def test_a_crash_loop_before_consuming_backs_off_and_is_bounded():
    delays = []
    streak = 0
    for _ in range(20):
        streak = unready_streak(streak, was_ready=False)
        decision = after_child_exit(KILLED, stopping=False, unready_crashes=streak)
        assert isinstance(decision, Restart)
        delays.append(decision.delay_seconds)
    assert delays[:FREE_RESTARTS] == [0.0] * FREE_RESTARTS
    assert delays[FREE_RESTARTS : FREE_RESTARTS + 3] == [0.5, 1.0, 2.0]
    assert delays == sorted(delays) and delays[-1] == BACKOFF_MAX_SECONDS
    assert restart_delay(1000) == BACKOFF_MAX_SECONDS


def test_a_child_that_consumed_resets_the_streak():
    assert unready_streak(7, was_ready=True) == 0
    assert unready_streak(0, was_ready=False) == 1


def test_a_job_stays_one_process_a_service_splits_off_the_quarantine():
    assert child_roles(job_mode=True) == (Role.ALL,)
    assert child_roles(job_mode=False) == (Role.MAIN, Role.QUARANTINE)
    assert child_roles(job_mode=False, quarantine_children=2) == (Role.MAIN, Role.QUARANTINE, Role.QUARANTINE)
    assert child_roles(job_mode=True, quarantine_children=2) == (Role.ALL,)
    assert child_roles(job_mode=False, quarantine_children=0) == (Role.ALL,)


def test_more_main_children_share_the_main_queues_and_only_the_first_serves_health():
    roles = child_roles(job_mode=False, quarantine_children=2, main_children=3)
    assert roles == (Role.MAIN, Role.MAIN_MORE, Role.MAIN_MORE, Role.QUARANTINE, Role.QUARANTINE)
    assert [r.main_queues for r in roles] == [True, True, True, False, False]
    assert [r.quarantine_queue for r in roles] == [False, False, False, True, True]
    assert [r.serves_health for r in roles] == [True, False, False, False, False]
    # Without quarantine children the first consumes the quarantine queue too; a job stays one process.
    assert child_roles(job_mode=False, quarantine_children=0, main_children=2) == (Role.ALL, Role.MAIN_MORE)
    assert child_roles(job_mode=True, main_children=4) == (Role.ALL,)
    assert Role.ALL.main_queues and Role.ALL.quarantine_queue and Role.ALL.serves_health


@pytest.mark.parametrize(
    ("concurrency", "children", "share"),
    [(16, 1, 16), (16, 4, 4), (16, 16, 1), (10, 4, 3), (2, 4, 1), (1, 1, 1)],
)
def test_main_children_split_the_concurrency_rounding_up(concurrency: int, children: int, share: int):
    assert main_share(concurrency, children) == share


def test_the_supervisors_exit_code_is_the_first_failure():
    assert stop_code([]) == 0
    assert stop_code([0, 0]) == 0
    assert stop_code([0, EXIT_CONFIG, EXIT_UNAVAILABLE]) == EXIT_CONFIG

"""The supervisor's adaptive split of the main queues (main_split.py): pure state, no processes."""

from __future__ import annotations

from taskyard_worker.main_split import MainSplit
from taskyard_worker.supervision import Role


def test_a_main_crash_splits_the_main_queues_and_a_calm_period_merges_them():
    split = MainSplit(base=1, after_crash=4, calm_seconds=300)
    assert split.current == 1 and split.share_of(Role.MAIN) == 1
    assert split.next_deadline() is None and not split.merge_due(10_000)

    assert split.crashed(100.0), "the first main crash splits"
    assert split.current == 4
    assert [split.share_of(r) for r in (Role.MAIN, Role.MAIN_MORE, Role.QUARANTINE)] == [4, 4, 1]
    assert split.next_deadline() == 400.0
    # Another crash while split forks nothing more and puts the merge off.
    assert not split.crashed(250.0)
    assert split.current == 4 and split.next_deadline() == 550.0
    assert not split.merge_due(549.9) and split.merge_due(550.0)

    assert not split.merging({11, 12, 13, 14})
    assert not split.merge_due(10_000) and split.next_deadline() is None, "once, while they drain"
    assert split.share_of(Role.MAIN_MORE) == 4, "the retiring children keep their share"
    assert not split.retired(11) and not split.retired(12) and not split.retired(13)
    assert split.retired(14), "the last one: fork one main child again"
    assert split.current == 1 and split.share_of(Role.MAIN) == 1 and not split.retiring
    # The next crash splits again.
    assert split.crashed(1_000.0) and split.current == 4


def test_no_split_when_turned_off_or_when_the_pod_runs_several_main_children_at_rest():
    off = MainSplit(base=1, after_crash=1)
    assert not off.crashed(1.0) and off.current == 1 and off.next_deadline() is None
    static = MainSplit(base=3, after_crash=4)
    assert static.current == 3 and static.share_of(Role.MAIN_MORE) == 3
    assert not static.crashed(1.0) and static.current == 3
    assert not static.merge_due(1e9) and static.next_deadline() is None


def test_a_merge_with_no_main_child_alive_is_over_at_once():
    split = MainSplit(base=1, after_crash=2, calm_seconds=5)
    assert split.crashed(0.0)
    assert split.merging(set()) and split.current == 1 and not split.retiring


def test_while_split_the_quarantine_runs_in_at_least_as_many_children_as_the_main_queues():
    split = MainSplit(base=1, after_crash=4, calm_seconds=5, quarantine_base=2)
    assert split.quarantine_children() == 2
    assert split.crashed(0.0) and split.quarantine_children() == 4
    assert not split.merging({1, 2, 3, 4}) and split.quarantine_children() == 4, "until the merge is over"
    for pid in (1, 2, 3):
        split.retired(pid)
    assert split.retired(4) and split.quarantine_children() == 2
    wide = MainSplit(base=1, after_crash=2, quarantine_base=3)
    assert wide.crashed(0.0) and wide.quarantine_children() == 3, "never fewer than at rest"
    assert MainSplit(base=1, after_crash=4, quarantine_base=0).quarantine_children() == 0

"""The fair share of a worker's slots (``within_share``) and its bookkeeping (``FairShare``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from taskyard_common.errors import StoreUnavailable
from taskyard_common.store.tenant_limits import TenantWaiting
from taskyard_worker.fair_share import FairShare, within_share


def waiting(**tenants: int | tuple[int, int]) -> dict[str, TenantWaiting]:
    """tenant=waiting, or tenant=(waiting, room under its cap)."""
    return {
        t: TenantWaiting(*w) if isinstance(w, tuple) else TenantWaiting(waiting=w) for t, w in tenants.items()
    }


def test_alone_a_tenant_takes_every_slot():
    assert within_share("a", slots=4, held={"a": 3}, waiting=waiting(a=2000))
    assert within_share("a", slots=4, held={"a": 3}, waiting={})


def test_a_tenant_below_its_share_starts():
    # Two competing tenants on 10 slots: 5 each.
    assert within_share("b", slots=10, held={"a": 9}, waiting=waiting(a=1990, b=20))
    assert within_share("a", slots=10, held={"a": 4}, waiting=waiting(a=1990, b=20))


def test_at_its_share_a_tenant_waits_while_the_others_are_owed_free_slots():
    # a holds 9 of 10 slots, b holds none and waits: the last free slot is b's.
    assert not within_share("a", slots=10, held={"a": 9}, waiting=waiting(a=1990, b=20))
    assert not within_share("a", slots=10, held={"a": 5}, waiting=waiting(a=1990, b=20))
    # b has its share: a takes what b is not owed.
    assert within_share("a", slots=10, held={"a": 5, "b": 5}, waiting=waiting(a=1990, b=20)) is False
    assert within_share("a", slots=10, held={"a": 4, "b": 5}, waiting=waiting(a=1990, b=20))


def test_free_slots_nobody_else_can_use_are_taken():
    # b waits for 2 tasks only: of a's 5-slot share, b is owed 2; a may take the other 3.
    assert within_share("a", slots=10, held={"a": 7}, waiting=waiting(a=1990, b=2))
    assert not within_share("a", slots=10, held={"a": 8}, waiting=waiting(a=1990, b=2))
    # b is at its max_running (no room): it competes for nothing, a is alone.
    assert within_share("a", slots=10, held={"a": 9}, waiting=waiting(a=1990, b=(20, 0)))
    # b has room for one more under its cap: one slot is kept for it.
    assert not within_share("a", slots=10, held={"a": 9}, waiting=waiting(a=1990, b=(20, 1)))
    assert within_share("a", slots=10, held={"a": 8}, waiting=waiting(a=1990, b=(20, 1)))


def test_more_tenants_than_slots_share_one_slot_each():
    many = waiting(a=10, b=10, c=10, d=10, e=10)
    assert within_share("a", slots=4, held={"b": 1, "c": 1}, waiting=many)
    assert not within_share("a", slots=4, held={"a": 1, "b": 1, "c": 1}, waiting=many)


def test_the_tenant_asking_competes_even_when_the_snapshot_has_not_seen_it():
    # b's work arrived after the snapshot: still 2 competing tenants, 2 slots each.
    assert within_share("b", slots=4, held={"a": 3}, waiting=waiting(a=100))
    assert not within_share("a", slots=4, held={"a": 2}, waiting=waiting(b=5))


def test_slots_without_a_tenant_count_as_taken():
    # 4 slots: a quarantined delivery ("") holds one; of the 3 free, b (share 2) is owed 2.
    assert within_share("a", slots=4, held={"": 1}, waiting=waiting(a=9, b=9))
    assert not within_share("a", slots=4, held={"": 1, "a": 2}, waiting=waiting(a=9, b=9))


class LoadStore:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.reads = 0

    async def tenant_load(self, specialist: str) -> dict[str, TenantWaiting]:
        self.reads += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_admitted_slots_count_until_released():
    store = LoadStore(waiting(a=100, b=100))
    fair = FairShare(store, specialist="general", slots=4)  # type: ignore[arg-type]
    await fair.refresh()
    assert [fair.admit("a") for _ in range(4)] == [True, True, False, False]
    assert fair.admit("b") and fair.admit("b") and not fair.admit("b")
    fair.release("a")
    assert fair.admit("a")
    assert fair.admit(None), "a delivery without a tenant is never refused"
    await fair.refresh()
    assert store.reads == 1, "a fresh snapshot is not read again"


async def test_a_store_that_cannot_answer_leaves_every_tenant_free_then_the_last_snapshot():
    store = LoadStore(StoreUnavailable("down"), waiting(a=100, b=100), StoreUnavailable("down"))
    now = [0.0]
    fair = FairShare(store, specialist="general", slots=2, clock=lambda: now[0])  # type: ignore[arg-type]
    await fair.refresh()
    assert fair.admit("a") and fair.admit("a")  # no snapshot: nobody else is known to wait
    fair.release("a")
    fair.release("a")
    now[0] = 0.5
    await fair.refresh()
    assert store.reads == 1, "read again only once stale"
    now[0] = 1.5
    await fair.refresh()
    await asyncio.sleep(0)  # a stale snapshot is read in a task of its own
    assert fair.admit("a") and not fair.admit("a")
    now[0] = 3.0
    await fair.refresh()
    await asyncio.sleep(0)
    assert store.reads == 3 and not fair.admit("a"), "the last snapshot stays in force"


@pytest.mark.parametrize("deferrals", [1, 2, 3, 10])
def test_cap_deferrals_back_off_to_five_seconds(deferrals: int):
    from taskyard_worker.starts import cap_deferral_seconds

    assert cap_deferral_seconds(deferrals) == {1: 1, 2: 2, 3: 4, 10: 5}[deferrals]


def test_a_long_backlog_stays_away_longer_and_comes_back_spread_out():
    import random

    from taskyard_worker.fair_share import spread_seconds

    rng = random.Random(3)
    assert [spread_seconds(n, rng) for n in (0, 10, 49)] == [0, 0, 0]
    waits = [spread_seconds(500, rng) for _ in range(1000)]  # about 10 s on average
    assert set(waits) == {1, 2, 5, 10}
    assert 5 <= sum(waits) / len(waits) <= 10
    huge = [spread_seconds(100_000, rng) for _ in range(1000)]
    assert max(huge) == 30 and {1, 2, 5, 10, 30} == set(huge), "never past MAX_SPREAD_SECONDS (60)"


def test_a_refusal_waits_for_the_longer_of_its_backoff_and_its_spread():
    import random

    from taskyard_common.store import DeferralReason
    from taskyard_worker.starts import defer_refused

    assert defer_refused(DeferralReason.FAIR_SHARE, 7).delay_seconds == 1
    rng = random.Random(1)
    assert {defer_refused(DeferralReason.FAIR_SHARE, 1, 2000, rng).delay_seconds for _ in range(200)} == {
        1,
        2,
        5,
        10,
        30,
    }
    capped = defer_refused(DeferralReason.TENANT_MAX_RUNNING, 3, backlog=10)
    assert (capped.delay_seconds, capped.label) == (4, "tenant_max_running")

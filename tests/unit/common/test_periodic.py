"""The background loop every service uses: rounds on schedule, a failed round logged and survived."""

import asyncio
import logging

import pytest

from taskyard_common.errors import BrokerUnavailable
from taskyard_common.periodic import PeriodicTask


async def test_rounds_repeat_and_a_failed_round_does_not_stop_the_loop(caplog):
    caplog.set_level(logging.WARNING)
    rounds: list[int] = []
    enough = asyncio.Event()

    async def round() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 2:
            raise BrokerUnavailable("away")
        if len(rounds) == 3:
            raise ValueError("a bug")
        if len(rounds) >= 4:
            enough.set()

    loop = PeriodicTask("test loop", 0.001, round, first_after=0)
    loop.start()
    await asyncio.wait_for(enough.wait(), 5)
    await loop.stop()
    assert not loop.running
    messages = [r for r in caplog.records if "round failed" in r.getMessage()]
    assert [bool(m.exc_info) for m in messages] == [False, True], "own errors one line, bugs traced"
    assert "BrokerUnavailable: away" in messages[0].getMessage()


async def test_stop_lets_the_round_in_progress_finish_within_the_grace():
    started, finished = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(0.05)
        finished.set()

    loop = PeriodicTask("slow", 3600, slow, first_after=0)
    loop.start()
    await started.wait()
    await loop.stop(grace_seconds=5)
    assert finished.is_set()


async def test_stop_cancels_a_round_past_the_grace_and_nudge_runs_one_now():
    calls = 0
    block = asyncio.Event()

    async def round() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            await block.wait()  # never set

    loop = PeriodicTask("nudged", 3600, round)
    loop.start()
    await asyncio.sleep(0)
    assert calls == 0, "the first round waits one interval"
    loop.nudge()
    for _ in range(100):
        if calls == 1:
            break
        await asyncio.sleep(0.001)
    assert calls == 1
    loop.nudge()
    for _ in range(100):
        if calls == 2:
            break
        await asyncio.sleep(0.001)
    await loop.stop(grace_seconds=0.01)
    assert calls == 2 and not loop.running
    await loop.stop()  # idempotent


@pytest.mark.parametrize("first_after", [0, 0.001])
async def test_a_stopped_loop_runs_no_more_rounds(first_after):
    calls = 0

    async def round() -> None:
        nonlocal calls
        calls += 1

    loop = PeriodicTask("brief", 3600, round, first_after=first_after)
    loop.start()
    await asyncio.sleep(0.01)
    await loop.stop()
    assert calls == 1

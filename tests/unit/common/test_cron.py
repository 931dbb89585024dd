"""Cron expressions of schedules: validation, occurrences in a time zone (daylight saving changes
included), the latest missed one, and each occurrence's idempotency key."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from taskyard_common.cron import (
    InvalidCron,
    check,
    count_between,
    latest_until,
    next_after,
    occurrence_key,
    occurrence_text,
    zone,
)

BERLIN = ZoneInfo("Europe/Berlin")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def berlin(*args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=BERLIN, fold=fold)


@pytest.mark.parametrize(
    "expression", ["*/5 * * * *", "0 9 * * MON-FRI", "0 0 L * *", "30 2 * * *", "0 0 1 1 *", "0 0 * * 5L"]
)
def test_five_field_expressions_are_accepted(expression: str):
    check(expression, "UTC")
    check(expression, "Europe/Berlin")


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("* * * *", "5 fields"),
        ("*/15 * * * * *", "5 fields"),  # cronsim's seconds field: not for schedules
        ("61 * * * *", "invalid"),
        ("* * 31 2 *", "invalid"),  # the 31st of February
        ("* * */20 * 1L", "no occurrence"),  # the 1st or 21st that is also a month's last Monday
        ("", "5 fields"),
        ("@daily", "5 fields"),
        ("* " * 200, "at most"),
    ],
)
def test_other_expressions_are_refused_with_a_reason(expression: str, why: str):
    with pytest.raises(InvalidCron, match=why):
        check(expression, "UTC")


@pytest.mark.parametrize("name", ["Mars/Olympus", "", " UTC", "../etc/passwd", "Europe/", "x" * 100, "a\x00"])
def test_unknown_time_zones_are_refused(name: str):
    with pytest.raises(InvalidCron, match="time zone"):
        zone(name)
    with pytest.raises(InvalidCron):
        check("* * * * *", name)


def test_occurrences_are_strictly_after_and_in_utc():
    assert next_after("*/5 * * * *", "UTC", utc(2030, 1, 1, 12, 0)) == utc(2030, 1, 1, 12, 5)
    assert next_after("*/5 * * * *", "UTC", utc(2030, 1, 1, 12, 3, 59)) == utc(2030, 1, 1, 12, 5)
    # 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
    assert next_after("0 9 * * *", "Europe/Berlin", utc(2030, 1, 1)) == utc(2030, 1, 1, 8)
    assert next_after("0 9 * * *", "Europe/Berlin", utc(2030, 7, 1)) == utc(2030, 7, 1, 7)
    assert next_after("0 0 31 12 *", "UTC", utc(2030, 12, 31)) == utc(2031, 12, 31)


def test_the_latest_occurrence_includes_the_moment_itself():
    assert latest_until("*/5 * * * *", "UTC", utc(2030, 1, 1, 12, 5)) == utc(2030, 1, 1, 12, 5)
    assert latest_until("*/5 * * * *", "UTC", utc(2030, 1, 1, 12, 9, 59)) == utc(2030, 1, 1, 12, 5)
    assert latest_until("0 9 * * *", "Europe/Berlin", utc(2030, 1, 2, 7)) == utc(2030, 1, 1, 8)


def test_missed_occurrences_are_counted_between_two_moments():
    start, end = utc(2030, 1, 1, 12, 0), utc(2030, 1, 1, 12, 4)
    assert count_between("* * * * *", "UTC", start, end) == 3  # 12:01, 12:02, 12:03
    assert count_between("* * * * *", "UTC", start, start) == 0
    assert count_between("* * * * *", "UTC", start, start + timedelta(days=30)) == 1_000  # capped


def test_spring_forward_runs_a_missing_local_time_once_when_the_gap_ends():
    # 2030-03-31: Berlin goes from 02:00 CET straight to 03:00 CEST. A daily 02:30 runs at 03:00 CEST.
    day_before = next_after("30 2 * * *", "Europe/Berlin", berlin(2030, 3, 30, 12))
    assert day_before == berlin(2030, 3, 31, 3, 0).astimezone(UTC) == utc(2030, 3, 31, 1, 0)
    following = next_after("30 2 * * *", "Europe/Berlin", day_before)
    assert following == berlin(2030, 4, 1, 2, 30).astimezone(UTC) == utc(2030, 4, 1, 0, 30)
    # Every half hour runs by the clock: nothing at the missing 02:00 and 02:30.
    halves = []
    moment = berlin(2030, 3, 31, 1, 0)
    for _ in range(3):
        moment = next_after("*/30 * * * *", "Europe/Berlin", moment)
        halves.append(moment)
    assert halves == [utc(2030, 3, 31, 0, 30), utc(2030, 3, 31, 1, 0), utc(2030, 3, 31, 1, 30)]


def test_fall_back_runs_a_repeated_local_time_once():
    # 2030-10-27: Berlin's 02:00-03:00 happens twice (CEST, then CET). A daily 02:30 runs once, at the first.
    first = next_after("30 2 * * *", "Europe/Berlin", berlin(2030, 10, 26, 12))
    assert first == berlin(2030, 10, 27, 2, 30, fold=0).astimezone(UTC) == utc(2030, 10, 27, 0, 30)
    assert next_after("30 2 * * *", "Europe/Berlin", first) == utc(2030, 10, 28, 1, 30)
    # An hourly-or-finer schedule runs in both: four half hours between 02:00 CEST and 03:00 CET.
    moment, halves = utc(2030, 10, 26, 23, 45), []
    for _ in range(5):
        moment = next_after("*/30 * * * *", "Europe/Berlin", moment)
        halves.append(moment)
    assert halves == [
        utc(2030, 10, 27, 0, 0),  # 02:00 CEST
        utc(2030, 10, 27, 0, 30),  # 02:30 CEST
        utc(2030, 10, 27, 1, 0),  # 02:00 CET
        utc(2030, 10, 27, 1, 30),  # 02:30 CET
        utc(2030, 10, 27, 2, 0),  # 03:00 CET
    ]
    # Every occurrence is a distinct instant, so each one's key is distinct.
    sid = uuid.uuid4()
    assert len({occurrence_key(sid, m) for m in halves}) == 5


def test_an_occurrence_key_names_the_schedule_and_the_instant_in_utc():
    sid = uuid.UUID("00000000-0000-0000-0000-000000000001")
    moment = berlin(2030, 5, 1, 11, 0)
    assert occurrence_text(moment) == "2030-05-01T09:00:00Z"
    assert occurrence_key(sid, moment) == f"schedule:{sid}:2030-05-01T09:00:00Z"
    assert occurrence_key(sid, moment) == occurrence_key(sid, moment.astimezone(UTC))

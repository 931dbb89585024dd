"""Cron expressions of schedules: when their occurrences fall, in their time zone, as UTC instants.

Five fields (minute, hour, day of month, month, day of week), evaluated by ``cronsim`` in an IANA time zone
(``zoneinfo``). cronsim follows Debian's cron at daylight saving time changes: an occurrence whose local time
does not exist (a spring-forward gap) runs when the gap ends, one whose local time happens twice (fall-back)
runs once, at the first; expressions that run more often than hourly run by the clock, so an every-30-minutes
schedule runs twice in the repeated hour. cronsim also accepts a sixth (seconds) field; schedules refuse it:
a minute is their finest step.

Every function answers in UTC, the form the store keeps and compares.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

FIELDS = 5
MAX_CRON_LENGTH = 200
# Occurrences counted one by one at most this far (an every-minute schedule after 16 hours away): beyond
# it the count says "at least".
_COUNT_CAP = 1_000
# cronsim's reverse search starts strictly before its start: one microsecond later includes an occurrence
# that falls exactly on the moment.
_TICK = timedelta(microseconds=1)


class InvalidCron(ValueError):
    """An expression or time zone a schedule cannot use; the message says why, for a 422."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``UTC``, ``Europe/Berlin``, ...)."""
    if not name or len(name) > 64 or name != name.strip() or "\x00" in name:
        raise InvalidCron(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: a path-like or malformed key; OSError: a key naming something that is not a zone file.
        raise InvalidCron(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from None


def check(expression: str, timezone: str, now: datetime | None = None) -> None:
    """Raise ``InvalidCron`` unless ``expression`` is a five-field cron expression with an occurrence in the
    next 50 years (cronsim's horizon) in ``timezone``."""
    tz = zone(timezone)
    if len(expression) > MAX_CRON_LENGTH:
        raise InvalidCron(f"a cron expression may be at most {MAX_CRON_LENGTH} characters")
    fields = expression.split()
    if len(fields) != FIELDS:
        raise InvalidCron(
            f"a cron expression has {FIELDS} fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields)}"
        )
    try:
        it = CronSim(expression, (now or datetime.now(UTC)).astimezone(tz))
        next(it)
    except CronSimError as exc:
        raise InvalidCron(f"invalid cron expression: {exc}") from None
    except StopIteration:
        raise InvalidCron("the cron expression has no occurrence in the next 50 years") from None


# The functions below take a stored schedule's expression, checked when it was stored; one that no longer
# parses (a time zone gone from the system's database) raises ``InvalidCron`` too.


def _sim(expression: str, timezone: str, start: datetime, *, reverse: bool = False) -> CronSim:
    try:
        return CronSim(expression, start.astimezone(zone(timezone)), reverse=reverse)
    except CronSimError as exc:
        raise InvalidCron(f"invalid cron expression: {exc}") from None


def next_after(expression: str, timezone: str, moment: datetime) -> datetime | None:
    """The first occurrence strictly after ``moment``; None when there is none within cronsim's horizon."""
    try:
        return next(_sim(expression, timezone, moment)).astimezone(UTC)
    except StopIteration:
        return None


def latest_until(expression: str, timezone: str, moment: datetime) -> datetime | None:
    """The last occurrence at or before ``moment``; None when there is none within cronsim's horizon."""
    try:
        return next(_sim(expression, timezone, moment + _TICK, reverse=True)).astimezone(UTC)
    except StopIteration:
        return None


def count_between(expression: str, timezone: str, after: datetime, until: datetime) -> int:
    """How many occurrences fall in ``(after, until)``, both excluded (at most ``_COUNT_CAP``)."""
    count = 0
    for occurrence in _sim(expression, timezone, after):
        if occurrence.astimezone(UTC) >= until or count >= _COUNT_CAP:
            break
        count += 1
    return count


def occurrence_key(schedule_id: UUID, occurrence: datetime) -> str:
    """The idempotency key of one occurrence's task: the same for every scheduler that handles it, so the
    store lets exactly one task through (``schedule:<id>:<occurrence in UTC, RFC 3339>``)."""
    return f"schedule:{schedule_id}:{occurrence_text(occurrence)}"


def occurrence_text(occurrence: datetime) -> str:
    """An occurrence as its tasks name it: RFC 3339 in UTC, to the second (``2030-05-01T09:00:00Z``)."""
    return occurrence.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

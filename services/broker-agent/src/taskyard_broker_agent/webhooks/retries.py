"""What follows an attempt, decided without I/O: delivered, retried at a time, or given up.

A failed attempt is retried after an exponential backoff with equal jitter (base, 2 x base, 4 x base, ...,
at most the maximum), until the retry window (``TASKYARD_WEBHOOK_RETRY_HOURS`` from the delivery's creation,
or from its redelivery) is over: the last retry is due at the window's end, and a failure then gives up.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from taskyard_common.webhooks import WebhookSettings


class Next(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class Decision:
    next: Next
    # For RETRY: when the next attempt is due.
    at: datetime | None = None


def backoff_seconds(attempt: int, settings: WebhookSettings, rand: random.Random | None = None) -> float:
    """The pause after failed attempt number ``attempt`` (1 for the first): half fixed, half random."""
    ceiling = min(settings.backoff_max_seconds, settings.backoff_base_seconds * 2.0 ** min(attempt - 1, 62))
    return ceiling / 2 + (rand or random).uniform(0, ceiling / 2)


def decide(
    *,
    ok: bool,
    attempt: int,
    window_start: datetime,
    now: datetime,
    settings: WebhookSettings,
    rand: random.Random | None = None,
) -> Decision:
    """After attempt number ``attempt`` of a delivery whose retry window opened at ``window_start``."""
    if ok:
        return Decision(Next.DELIVERED)
    window_end = window_start + timedelta(hours=settings.retry_hours)
    if now >= window_end:
        return Decision(Next.GIVE_UP)
    due = now + timedelta(seconds=backoff_seconds(attempt, settings, rand))
    return Decision(Next.RETRY, min(due, window_end))

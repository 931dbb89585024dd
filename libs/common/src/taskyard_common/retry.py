"""Delayed retries without blocking a consumer: publish to a TTL tier queue that dead-letters back.

A message for ``target`` (``intake`` or ``work.<specialist>``) goes to the delay exchange with routing key
``<tier>.<target>``; the tier queue holds it for ``tier`` seconds, then dead-letters it to the retry
exchange, whose bindings ``*.<target>`` route it back to the target queue. The message arrives there as a
new message, so waiting never counts toward the target queue's delivery limit.
"""

from __future__ import annotations

import random

from taskyard_common.amqp import Publisher
from taskyard_common.messages import Envelope
from taskyard_common.topology import DELAY_TIERS, Topology, delay_tier


def backoff_seconds(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with equal jitter for the ``attempt``-th failure (1-based): between half and
    all of ``min(cap, base * 2**(attempt-1))``, so retries of many tasks spread instead of marching."""
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    return (rng or random).uniform(ceiling / 2, ceiling)


def hop_tier(seconds: float) -> int:
    """The delay of one hop towards a moment ``seconds`` ahead: the longest tier that does not overshoot it
    (the shortest tier when even that one does), so a wait longer than the longest tier takes several hops
    and a message never comes back much later than asked."""
    fitting = [tier for tier in DELAY_TIERS if tier <= seconds]
    return fitting[-1] if fitting else DELAY_TIERS[0]


async def publish_delayed(
    publisher: Publisher,
    topology: Topology,
    target: str,
    message: Envelope,
    delay_seconds: float,
    *,
    headers: dict[str, int] | None = None,
) -> int:
    """Publish ``message`` to come back to ``target`` after at least ``delay_seconds`` (rounded up to a
    tier); returns the delay actually applied. ``headers`` travel with it (dead-lettering keeps them)."""
    tier = delay_tier(delay_seconds)
    await publisher.publish(topology.delay_exchange, f"{tier}.{target}", message, headers=headers)
    return tier


async def publish_now(
    publisher: Publisher,
    topology: Topology,
    target: str,
    message: Envelope,
    *,
    headers: dict[str, int] | None = None,
) -> None:
    """Publish ``message`` back to ``target`` at once, the way a delayed one comes back (the retry exchange
    routes ``<tier>.<target>``; tier 0 here), so that it reaches the same queue as ``publish_delayed``'s."""
    await publisher.publish(topology.retry_exchange, f"0.{target}", message, headers=headers)

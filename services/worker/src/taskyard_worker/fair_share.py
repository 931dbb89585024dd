"""The fair share of a worker's slots among the tenants with work waiting for its specialist.

A specialist's queue is first in, first out: a tenant that submits 2,000 tasks ahead of another's 20 would
hold every slot until its backlog is gone. So before a delivery from the main queue asks the store to start
its task, the worker checks the task's tenant against its share (``within_share``, a pure function):

* the **competing** tenants are the task's own and every tenant with work waiting for this specialist
  (queued, or retrying and due) that is not at its ``max_running`` cap, as of a snapshot of the store
  (``tenant_load``) at most ``REFRESH_SECONDS`` old;
* alone, a tenant may take every slot. Otherwise its **share** is ``max(1, slots // competing)`` of this
  worker's slots (the specialist's ``concurrency``);
* a tenant holding fewer slots than its share starts;
* a tenant at or over its share starts only if, once it has, the free slots still cover what the other
  competing tenants lack to reach their share (each at most its waiting tasks and its room under its cap):
  slots nobody else can use are never left idle, and slots someone else is owed are kept for them.

A refused delivery's task is parked (uncharged, reason ``fair_share``, noted in the attempt history) and
its message acked: the broker agent's feeder publishes it again, behind the others' messages, when its
tenant's lane has room (``taskyard_common.store.parking``). A retrying task is not parked: its message goes
round a delay queue for ``FAIR_SHARE_DEFER_SECONDS`` at least (``spread_seconds``). Each worker shares
its own slots (held slots are counted here, exactly, per process), so the fleet as a whole shares the same
way. The snapshot is read lazily, by the first delivery that finds it stale; while the store cannot be read,
the last snapshot stays in force (none yet: every tenant starts).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping

from taskyard_common.retry import hop_tier
from taskyard_common.store import TaskStore
from taskyard_common.store.tenant_limits import TenantWaiting
from taskyard_common.topology import DELAY_TIERS

log = logging.getLogger(__name__)

# How old the snapshot of waiting work may be before a delivery reads it again.
REFRESH_SECONDS = 1.0
# How long a delivery refused its share waits in a delay queue, at least: one tier, to let others pass.
FAIR_SHARE_DEFER_SECONDS = 1.0
# A refused tenant's backlog comes back from the delay queues at about this many messages a second, however
# long it is (see ``spread_seconds``): each return costs a delivery, so a 2,000-task backlog refused every
# second would keep every free slot busy refusing it, and another tenant's few tasks would queue behind it.
SPREAD_PER_SECOND = 50.0
# ... but never away longer than this: a huge backlog refused only for a moment must come back in time.
MAX_SPREAD_SECONDS = 60.0


def within_share(
    tenant: str, *, slots: int, held: Mapping[str, int], waiting: Mapping[str, TenantWaiting]
) -> bool:
    """Whether ``tenant`` may take one more of ``slots``, holding ``held`` (per tenant: slots of this
    worker taken) while ``waiting`` (the snapshot) waits; see the module's policy."""
    competing = {t for t, w in waiting.items() if w.waiting > 0 and w.cap_room != 0} | {tenant}
    if len(competing) == 1:
        return True
    share = max(1, slots // len(competing))
    if held.get(tenant, 0) < share:
        return True
    free_after = slots - sum(held.values()) - 1
    owed = 0
    for other in competing - {tenant}:
        load = waiting.get(other, TenantWaiting(waiting=0))
        lack = min(share - held.get(other, 0), load.waiting)
        if load.cap_room is not None:
            lack = min(lack, load.cap_room)
        owed += max(0, lack)
    return free_after >= owed


def spread_seconds(backlog: int, rng: random.Random | None = None) -> float:
    """How long a refused task of a tenant with ``backlog`` tasks waiting should stay away: a wait drawn at
    random between 1 s and twice ``backlog / SPREAD_PER_SECOND`` (at most ``MAX_SPREAD_SECONDS``), rounded
    down to a delay tier. At random, so that a backlog refused all at once does not come back all at once
    (its tenant's freed slots would then wait for the next wave); 0 when the backlog is too short to
    matter."""
    mean = min(backlog / SPREAD_PER_SECOND, MAX_SPREAD_SECONDS)
    if mean < DELAY_TIERS[0]:
        return 0.0
    drawn = (rng or random).uniform(DELAY_TIERS[0], min(2 * mean, MAX_SPREAD_SECONDS))
    return float(hop_tier(drawn))


class FairShare:
    """This worker's slots held per tenant, and the snapshot of who waits; ``admit`` and ``release``
    around each start (no await in between: deliveries decided together see each other's slots)."""

    def __init__(
        self, store: TaskStore, *, specialist: str, slots: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._clock = clock
        self._specialist = specialist
        self._slots = slots
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, TenantWaiting] = {}
        self._read_at: float | None = None
        self._reading: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        """Read the snapshot again when it is stale; one read at a time (the others use the last one,
        unless there is none yet). Never raises: a store that cannot answer keeps the last snapshot."""
        if self._read_at is not None and self._clock() - self._read_at < REFRESH_SECONDS:
            return
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._read())
        if self._read_at is None:
            await asyncio.shield(self._reading)

    async def _read(self) -> None:
        try:
            self._waiting = await self._store.tenant_load(self._specialist)
        except Exception as exc:  # the fair share is an optimisation: never fail a start for it
            log.warning("fair share: cannot read the waiting work (%s); keeping the last snapshot", exc)
        self._read_at = self._clock()

    def admit(self, tenant: str | None) -> bool:
        """Take a slot for ``tenant`` if it is within its share (a message without a tenant always is);
        the caller ``release``s it once the delivery is done with it."""
        key = tenant or ""
        if tenant is not None and not within_share(
            tenant, slots=self._slots, held=self._held, waiting=self._waiting
        ):
            return False
        self._held[key] += 1
        return True

    def capped(self, tenant: str | None) -> bool:
        """Whether the snapshot shows a cap for ``tenant`` (its start skips the one-statement attempts)."""
        load = self._waiting.get(tenant) if tenant is not None else None
        return load is not None and load.cap_room is not None

    def backlog(self, tenant: str | None) -> int:
        """The tenant's tasks waiting for the specialist, as of the snapshot (0: unknown)."""
        load = self._waiting.get(tenant) if tenant is not None else None
        return load.waiting if load is not None else 0

    def release(self, tenant: str | None) -> None:
        key = tenant or ""
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

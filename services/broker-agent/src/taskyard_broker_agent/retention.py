"""The retention loop: every ``TASKYARD_TASK_RETENTION_INTERVAL_SECONDS`` it removes the finished tasks past
their tenant's retention (``TASKYARD_TASK_RETENTION_DAYS``, or the tenant's own), with everything attached.

Off the hot path: each batch is one short transaction of ``batch_size`` tasks at most, locked ``SKIP LOCKED``
(several broker agents may run it at once: they take different rows, never wait for each other), with a
pause between batches; a round stops after ``max_batches`` and the next one goes on. Submissions never
touch the rows it removes (they insert new ones), so they never wait for it.

After each round it sets the oldest-row gauges and how far behind it is (``taskyard_retention_overdue_
seconds``): the oldest finished task that should have gone, counted from when it should have gone. The chart's
``TaskyardRetentionBehind`` alert fires when that stays above a day.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from taskyard_broker_agent.settings import RetentionSettings
from taskyard_common import metrics
from taskyard_common.periodic import PeriodicTask
from taskyard_common.store.retention import TABLES, Removed, RetentionStore, cutoff_for

log = logging.getLogger(__name__)
GAUGED_TABLES = ("tasks", "idempotency_keys")


@dataclass
class RetentionRound:
    """What one round did (for logs and tests)."""

    removed: Removed = field(default_factory=Removed)
    batches: int = 0
    # Whether tasks past their retention were left for the next round (``max_batches`` ran out).
    backlog: bool = False
    overdue_seconds: float = 0.0


class Retention:
    def __init__(self, store: RetentionStore, settings: RetentionSettings) -> None:
        self._store = store
        self._settings = settings
        metrics.init_store_labels(TABLES, gauges=GAUGED_TABLES)
        self._loop = PeriodicTask("retention", settings.interval_seconds, self._round, logger=log)

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start()

    async def stop(self, grace_seconds: float) -> None:
        await self._loop.stop(grace_seconds)

    async def _round(self) -> None:
        done = await self.run_once()
        metrics.RETENTION_ROUNDS.labels("backlog" if done.backlog else "caught_up").inc()
        if done.removed.tasks:
            log.info(
                "retention: removed %d finished task(s) in %d batch(es) (%s)%s",
                done.removed.tasks,
                done.batches,
                ", ".join(f"{t} {n}" for t, n in done.removed.rows.items() if n),
                "; more left for the next round" if done.backlog else "",
            )

    async def run_once(self, now: datetime | None = None) -> RetentionRound:
        """Remove what is due (the deployment's default for every tenant without its own retention, then
        each tenant with its own), batch by batch, up to ``max_batches``; then measure what is left."""
        now = now or datetime.now(UTC)
        settings, done = self._settings, RetentionRound()
        overrides = await self._store.retention_overrides()
        # (tenant or None for every other tenant, cutoff)
        scopes: list[tuple[str | None, datetime]] = [(None, cutoff_for(now, settings.days))]
        scopes += [(tenant, cutoff_for(now, days)) for tenant, days in sorted(overrides.items())]
        exclude = sorted(overrides)
        for tenant, cutoff in scopes:
            while done.batches < settings.max_batches:
                batch = await self._store.expire_batch(
                    cutoff, settings.batch_size, tenant=tenant, exclude=exclude
                )
                done.batches += 1
                done.removed.add(batch)
                metrics.count_removed(batch.rows)
                if batch.tasks < settings.batch_size:
                    break
                if settings.batch_pause_seconds:
                    await asyncio.sleep(settings.batch_pause_seconds)
        overdue = [
            await self._store.overdue_seconds(cutoff, tenant=tenant, exclude=exclude)
            for tenant, cutoff in scopes
        ]
        done.overdue_seconds = max(overdue)
        done.backlog = done.overdue_seconds > 0
        metrics.RETENTION_OVERDUE.set(done.overdue_seconds)
        for table, age in (await self._store.oldest_ages()).items():
            metrics.STORE_OLDEST_ROW_AGE.labels(table).set(math.nan if age is None else age)
        return done

"""The webhook outbox as the dispatcher uses it: claim due deliveries, record each attempt, sample its age.

A claim is one statement: the due rows (``FOR UPDATE SKIP LOCKED``, so several broker agents never take the
same row) get their ``next_attempt_at`` moved past the attempt's longest possible duration. While that
claim holds no dispatcher takes the row again; if its dispatcher dies mid-attempt, the row is due again
when the claim lapses, and is sent again with the same id (at least once). An attempt is recorded only
while its claim holds (``next_attempt_at`` unchanged), so a redelivery asked for meanwhile wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.store._pg import PoolStore

# The attempt log keeps a delivery's latest attempts (24 hours of backoff make about 30; redeliveries add).
MAX_LOGGED_ATTEMPTS = 100

_COLUMNS = "d.id, d.task_id, d.tenant, d.event, d.url, d.payload, d.attempts, d.created_at, d.redelivered_at"
# $1 how many, $2 the claim's length in seconds.
_CLAIM = (
    "WITH due AS (SELECT id FROM webhook_deliveries WHERE status = 'pending'"
    " AND next_attempt_at <= clock_timestamp() ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)"
    " UPDATE webhook_deliveries d SET next_attempt_at = clock_timestamp() + make_interval(secs => $2)"
    f" FROM due WHERE d.id = due.id RETURNING {_COLUMNS}, d.next_attempt_at AS claimed_until"
)
# $1 id, $2 claimed_until, $3 [the attempt's log entry], $4 new status, $5 next attempt (pending only).
_RECORD = (
    "UPDATE webhook_deliveries SET attempts = attempts + 1,"
    f" attempt_log = jsonb_path_query_array(attempt_log || $3::jsonb, '$[last - {MAX_LOGGED_ATTEMPTS - 1} to last]'),"
    " status = $4, next_attempt_at = COALESCE($5, next_attempt_at),"
    " delivered_at = CASE WHEN $4 = 'delivered' THEN clock_timestamp() ELSE delivered_at END"
    " WHERE id = $1 AND status = 'pending' AND next_attempt_at = $2 RETURNING id"
)


@dataclass(frozen=True)
class Delivery:
    """A claimed delivery: what one attempt needs."""

    id: str
    task_id: UUID
    tenant: str
    event: str
    url: str
    payload: dict[str, Any]
    # Attempts made before this one.
    attempts: int
    created_at: datetime
    redelivered_at: datetime | None
    # The claim: the row's next_attempt_at while this dispatcher holds it.
    claimed_until: datetime

    @property
    def window_start(self) -> datetime:
        """Where its retry window opened: its creation, or its latest redelivery."""
        return self.redelivered_at or self.created_at


class Outbox(PoolStore):
    """Shares the task store's pool."""

    async def claim(self, limit: int, claim_seconds: float) -> list[Delivery]:
        rows = await self._fetch(_CLAIM, limit, claim_seconds)
        return [Delivery(**dict(r)) for r in rows]

    async def record(
        self, delivery: Delivery, entry: dict[str, Any], *, status: str, next_attempt_at: datetime | None
    ) -> bool:
        """Record one attempt and what follows (``status`` pending with ``next_attempt_at``, delivered or
        failed); False when the claim was lost (a redelivery asked for meanwhile, or the claim lapsed)."""
        row = await self._fetchrow(
            _RECORD, delivery.id, delivery.claimed_until, [entry], status, next_attempt_at
        )
        return row is not None

    async def oldest_pending_seconds(self) -> float:
        """Age of the oldest pending delivery (since its creation or redelivery), 0 when none is pending."""
        row = await self._fetchrow(
            "SELECT COALESCE(EXTRACT(EPOCH FROM clock_timestamp()"
            " - min(COALESCE(redelivered_at, created_at))), 0)::float8 AS age"
            " FROM webhook_deliveries WHERE status = 'pending'"
        )
        return float(row["age"]) if row is not None else 0.0

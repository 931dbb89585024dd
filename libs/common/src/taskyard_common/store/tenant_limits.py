"""Per-tenant limits (``tenant_limits``): what an operator sets, and what a worker's start reads.

``max_running`` caps the tasks of a tenant running at once across the whole fleet (every specialist, every
worker); a tenant without a row, or with a NULL ``max_running``, is unlimited. The cap is enforced by the
start transition (``starts.py``): a start that would pass it is refused and deferred, uncharged.

``TenantLimitStore`` is what the admin CLI and the API use; ``TenantLoadQueries`` is the worker's snapshot of
who waits for a specialist, for the fair share of its slots (``taskyard_worker.fair_share``).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from taskyard_common.store._pg import PoolStore

# The running count is read with the limit, so an operator sees how close to its cap a tenant is.
_COLUMNS = (
    "l.tenant, l.max_running, l.updated_at,"
    " (SELECT count(*) FROM tasks r WHERE r.tenant = l.tenant AND r.status = 'running') AS running"
)
_GET = (
    "SELECT $1::text AS tenant, l.max_running, l.updated_at,"
    " (SELECT count(*) FROM tasks r WHERE r.tenant = $1 AND r.status = 'running') AS running"
    " FROM (SELECT 1) AS one LEFT JOIN tenant_limits l ON l.tenant = $1"
)
_PUT = (
    "WITH put AS (INSERT INTO tenant_limits AS l (tenant, max_running) VALUES ($1, $2)"
    " ON CONFLICT (tenant) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = clock_timestamp()"
    " RETURNING l.*)"
    f" SELECT {_COLUMNS} FROM put l"
)

# Per tenant with work waiting for the specialist $1 (queued, or retrying and due): how much, and, for a
# capped tenant, its cap and what it runs now across the fleet. One index range of
# ``tasks_active_specialist_idx``, plus one count on ``tasks_running_tenant_idx`` per capped tenant.
_LOAD = (
    "SELECT w.tenant, w.waiting, l.max_running,"
    " CASE WHEN l.max_running IS NULL THEN NULL"
    " ELSE (SELECT count(*) FROM tasks r WHERE r.tenant = w.tenant AND r.status = 'running') END AS running"
    " FROM (SELECT tenant, count(*) AS waiting FROM tasks WHERE specialist = $1"
    " AND (status = 'queued' OR (status = 'retrying' AND next_attempt_at <= clock_timestamp()))"
    " GROUP BY tenant) AS w"
    " LEFT JOIN tenant_limits l ON l.tenant = w.tenant"
)


@dataclass(frozen=True)
class TenantLimit:
    tenant: str
    max_running: int | None  # None: unlimited
    updated_at: datetime | None  # None: never set (the defaults)
    # Its tasks running now across the fleet (when read).
    running: int


@dataclass(frozen=True)
class TenantWaiting:
    """One tenant's work waiting for a specialist, as of the snapshot."""

    waiting: int
    # How many more it may start before its max_running (never negative); None: no cap.
    cap_room: int | None = None


class TenantLimitStore(PoolStore):
    """The limits an operator sets (``taskyard-admin tenants``, ``/v1/tenants/{tenant}/limits``)."""

    async def get(self, tenant: str) -> TenantLimit:
        """The tenant's limits; the defaults (unlimited, ``updated_at`` None) when none were set."""
        row = await self._fetchrow(_GET, tenant)
        assert row is not None
        return _limit(row)

    async def put(self, tenant: str, *, max_running: int | None) -> TenantLimit:
        """Set (or replace) the tenant's limits; starts see the new cap from their next transaction."""
        if max_running is not None and max_running < 1:
            raise ValueError("max_running must be at least 1")
        row = await self._fetchrow(_PUT, tenant, max_running)
        assert row is not None
        return _limit(row)

    async def delete(self, tenant: str) -> bool:
        """Drop the tenant's limits (unlimited again); False when it had none."""
        row = await self._fetchrow("DELETE FROM tenant_limits WHERE tenant = $1 RETURNING tenant", tenant)
        return row is not None

    async def list(self) -> builtins.list[TenantLimit]:
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM tenant_limits l ORDER BY l.tenant")
        return [_limit(row) for row in rows]


class TenantLoadQueries(PoolStore):
    async def tenant_load(self, specialist: str) -> dict[str, TenantWaiting]:
        """Per tenant with waiting work for ``specialist``: how many tasks wait, and its room under its
        cap (a snapshot; the worker keeps it about a second)."""
        rows = await self._fetch(_LOAD, specialist)
        return {
            row["tenant"]: TenantWaiting(
                waiting=int(row["waiting"]),
                cap_room=None
                if row["max_running"] is None
                else max(0, int(row["max_running"]) - int(row["running"])),
            )
            for row in rows
        }


def _limit(row: asyncpg.Record) -> TenantLimit:
    return TenantLimit(
        tenant=row["tenant"],
        max_running=row["max_running"],
        updated_at=row["updated_at"],
        running=int(row["running"]),
    )

"""Per-tenant LLM budgets (``tenant_budgets``): what a month of the tenant's tasks, and one task, may cost.

Set with ``taskyard-admin budget`` or ``PUT /v1/tenants/{tenant}/budget``; the API reads ``monthly_budget``
before accepting a submission, the worker ``max_cost_per_task`` before each LLM call (both through a short
cache: ``BudgetCache``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from taskyard_common.store._pg import PoolStore

_COLUMNS = "tenant, monthly_budget, max_cost_per_task, updated_at"
# Both limits are written as given (NULL clears one): the caller merges with what was there.
_SET = (
    "INSERT INTO tenant_budgets (tenant, monthly_budget, max_cost_per_task) VALUES ($1, $2, $3)"
    " ON CONFLICT (tenant) DO UPDATE SET monthly_budget = $2, max_cost_per_task = $3,"
    f" updated_at = clock_timestamp() RETURNING {_COLUMNS}"
)


@dataclass(frozen=True)
class Budget:
    """USD; None: no limit."""

    tenant: str
    monthly_budget: float | None = None
    max_cost_per_task: float | None = None
    updated_at: datetime | None = None


def _budget(row: asyncpg.Record) -> Budget:
    return Budget(
        tenant=row["tenant"],
        monthly_budget=row["monthly_budget"],
        max_cost_per_task=row["max_cost_per_task"],
        updated_at=row["updated_at"],
    )


class BudgetStore(PoolStore):
    """On the task store's pool (``BudgetStore(store.pool, acquire_timeout=...)``)."""

    async def get(self, tenant: str) -> Budget:
        """The tenant's budget (both limits None when it has none)."""
        row = await self._fetchrow(f"SELECT {_COLUMNS} FROM tenant_budgets WHERE tenant = $1", tenant)
        return _budget(row) if row is not None else Budget(tenant)

    async def set(
        self, tenant: str, *, monthly_budget: float | None, max_cost_per_task: float | None
    ) -> Budget:
        """Replace both limits (None: unlimited)."""
        row = await self._fetchrow(_SET, tenant, monthly_budget, max_cost_per_task)
        assert row is not None  # an upsert with RETURNING always answers its row
        return _budget(row)

    async def all(self) -> list[Budget]:
        return [
            _budget(r) for r in await self._fetch(f"SELECT {_COLUMNS} FROM tenant_budgets ORDER BY tenant")
        ]


class BudgetCache:
    """A tenant's budget read at most once per ``ttl_seconds`` (0: every time), for the hot paths: a
    submission, a task's start. A change made by an admin applies within that time."""

    def __init__(self, load: Callable[[str], Awaitable[Budget]], ttl_seconds: float) -> None:
        self._load = load
        self._ttl = ttl_seconds
        self._entries: dict[str, tuple[float, Budget]] = {}

    async def get(self, tenant: str) -> Budget:
        now = time.monotonic()
        entry = self._entries.get(tenant)
        if entry is not None and entry[0] > now:
            return entry[1]
        budget = await self._load(tenant)
        if self._ttl > 0:
            self._entries[tenant] = (now + self._ttl, budget)
        return budget

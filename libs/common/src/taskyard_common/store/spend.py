"""What a tenant's tasks spent on LLM calls: tokens and cost (USD) over a time range, grouped.

The sums are made from the task rows themselves (``usage`` for the agent, ``routing`` for the routing
call), so they always equal the sum of the task documents: a task's ``cost`` is ``routing.cost +
usage.cost``. A task counts in the range its ``created_at`` falls in (``tasks_tenant_created_idx``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import asyncpg

from taskyard_common.store._pg import PoolStore

_AGENT_COST = "COALESCE((usage->>'cost')::float8, 0)"
_ROUTING_COST = "COALESCE((routing->>'cost')::float8, 0)"
_COST = f"{_AGENT_COST} + {_ROUTING_COST}"
_RANGE = "tenant = $1 AND created_at >= $2 AND created_at < $3"
_AGENT = (
    "COALESCE((usage->>'prompt_tokens')::bigint, 0) AS prompt,"
    " COALESCE((usage->>'completion_tokens')::bigint, 0) AS completion,"
    " COALESCE((usage->>'total_tokens')::bigint, 0) AS agent_total"
)
_NO_AGENT = "0 AS prompt, 0 AS completion, 0 AS agent_total"
_ROUTING = "COALESCE((routing->>'tokens')::bigint, 0) AS routing_tokens"
_SUMS = (
    "count(DISTINCT id)::bigint AS tasks, COALESCE(sum(prompt), 0)::bigint AS prompt_tokens,"
    " COALESCE(sum(completion), 0)::bigint AS completion_tokens,"
    " COALESCE(sum(agent_total), 0)::bigint AS agent_tokens,"
    " COALESCE(sum(routing_tokens), 0)::bigint AS routing_tokens, COALESCE(sum(cost), 0)::float8 AS cost"
)


def _rows(key: str, spent: str = f"{_AGENT}, {_ROUTING}, {_COST}", where: str = "") -> str:
    """One row per task in the range: its group ``key`` and what it spent (``spent``: the columns prompt,
    completion, agent_total, routing_tokens, then the cost)."""
    return f"SELECT id, {key} AS key, {spent} AS cost FROM tasks WHERE {_RANGE}{where}"


_TOTAL = f"SELECT {_SUMS} FROM ({_rows('NULL::text')}) r"
_BY_SPECIALIST = f"SELECT key, {_SUMS} FROM ({_rows('specialist')}) r GROUP BY key ORDER BY key NULLS LAST"
_DAY = "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
_BY_DAY = f"SELECT key, {_SUMS} FROM ({_rows(_DAY)}) r GROUP BY key ORDER BY key"
# A task's agent spend goes to the model that answered its agent (the last one, after a failover), its
# routing spend to the router's model: a task may count under two models. A task whose only call was
# its routing counts under the router's model alone.
_BY_MODEL = (
    f"SELECT key, {_SUMS} FROM ("
    + _rows(
        "usage->>'model'",
        f"{_AGENT}, 0 AS routing_tokens, {_AGENT_COST}",
        " AND (usage->>'model' IS NOT NULL OR routing->>'model' IS NULL)",
    )
    + " UNION ALL "
    + _rows(
        "routing->>'model'", f"{_NO_AGENT}, {_ROUTING}, {_ROUTING_COST}", " AND routing->>'model' IS NOT NULL"
    )
    + ") r GROUP BY key ORDER BY key NULLS LAST"
)


class UsageGroup(StrEnum):
    SPECIALIST = "specialist"
    MODEL = "model"
    DAY = "day"


_GROUPED = {UsageGroup.SPECIALIST: _BY_SPECIALIST, UsageGroup.MODEL: _BY_MODEL, UsageGroup.DAY: _BY_DAY}


@dataclass(frozen=True)
class Spend:
    """Tasks, tokens and cost of one group (``key``: the specialist, model or UTC day; None: the total, or
    tasks without one)."""

    key: str | None
    tasks: int
    prompt_tokens: int
    completion_tokens: int
    # The agent's total plus the routing calls' tokens.
    total_tokens: int
    routing_tokens: int
    cost: float


def _spend(row: asyncpg.Record) -> Spend:
    return Spend(
        key=row["key"] if "key" in row.keys() else None,
        tasks=int(row["tasks"]),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        total_tokens=int(row["agent_tokens"]) + int(row["routing_tokens"]),
        routing_tokens=int(row["routing_tokens"]),
        cost=float(row["cost"]),
    )


class SpendStore(PoolStore):
    """On the task store's pool (``SpendStore(store.pool, acquire_timeout=...)``)."""

    async def usage(
        self, tenant: str, start: datetime, end: datetime, group_by: UsageGroup | None = None
    ) -> tuple[Spend, list[Spend]]:
        """The tenant's spend over ``[start, end)``: the total, and per group when ``group_by`` says."""
        total = await self._fetchrow(_TOTAL, tenant, start, end)
        assert total is not None  # an aggregate without GROUP BY always answers one row
        groups = [] if group_by is None else await self._fetch(_GROUPED[group_by], tenant, start, end)
        return _spend(total), [_spend(row) for row in groups]

    async def spent(self, tenant: str, since: datetime) -> float:
        """USD the tenant's tasks created since ``since`` have cost so far."""
        row = await self._fetchrow(f"SELECT COALESCE(sum({_COST}), 0)::float8 AS cost FROM tasks"
                                   " WHERE tenant = $1 AND created_at >= $2", tenant, since)  # fmt: skip
        return float(row["cost"]) if row is not None else 0.0

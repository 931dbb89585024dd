"""The monthly budget at the door: a tenant whose tasks created this UTC month have cost its
``monthly_budget`` (``tenant_budgets``) gets ``402 budget-exhausted`` and nothing is stored.

Both the budget and what the month has cost so far are read through a cache of ``auth_cache_seconds`` (the
API's "how stale may an admin's change be" setting): a tenant without a budget costs one small query per
period, and a tenant over its budget may see submissions accepted for at most that long after it ran out
(plus what its running tasks still spend: the budget bounds what is accepted, not what is running).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from taskyard_api.http.problems import ProblemException, ProblemKind
from taskyard_common.store.budgets import Budget, BudgetStore
from taskyard_common.store.spend import SpendStore

BUDGET_EXHAUSTED = ProblemKind("budget-exhausted", "Monthly LLM budget exhausted", 402)


def month_start(now: datetime) -> datetime:
    """The first instant of ``now``'s month, UTC."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


class BudgetGate:
    def __init__(self, budgets: BudgetStore, spend: SpendStore, *, ttl_seconds: float) -> None:
        self._budgets = budgets
        self._spend = spend
        self._ttl = ttl_seconds
        # tenant -> (valid until, budget, spent this month when it has a monthly budget)
        self._seen: dict[str, tuple[float, Budget, float]] = {}

    async def check(self, tenant: str) -> None:
        """Raise ``402 budget-exhausted`` when the tenant's month has used its budget up."""
        budget, spent = await self._state(tenant)
        limit = budget.monthly_budget
        if limit is not None and spent >= limit:
            raise ProblemException(
                BUDGET_EXHAUSTED(
                    f"This tenant's tasks cost {spent:.6f} USD this month, its monthly budget is {limit:.6f} "
                    "USD: nothing was stored. An admin may raise it (PUT /v1/tenants/{tenant}/budget)."
                )
            )

    async def _state(self, tenant: str) -> tuple[Budget, float]:
        now = time.monotonic()
        seen = self._seen.get(tenant)
        if seen is not None and seen[0] > now:
            return seen[1], seen[2]
        budget = await self._budgets.get(tenant)
        spent = 0.0
        if budget.monthly_budget is not None:
            spent = await self._spend.spent(tenant, month_start(datetime.now(UTC)))
        if self._ttl > 0:
            self._seen[tenant] = (now + self._ttl, budget, spent)
        return budget, spent

    def forget(self, tenant: str) -> None:
        """Read the tenant's budget again at its next submission (this process changed it)."""
        self._seen.pop(tenant, None)

"""``/v1/tenants/{tenant}/budget``: a tenant's LLM budgets in USD (``monthly_budget``, ``max_cost_per_task``)
and what its tasks cost this month. Admin only, and an admin sees only its own tenant's (another: 404); the
same limits can be set from outside the API with ``taskyard-admin budget``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path
from pydantic import BaseModel, ConfigDict, Field

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.params import require_json_body
from taskyard_api.http.problems import NOT_FOUND, ProblemException, problem_responses
from taskyard_api.submission.budget import month_start
from taskyard_api.tenancy.auth import Admin, Principal
from taskyard_common.store.budgets import Budget
from taskyard_common.store.keys import TENANT_PATTERN

router = APIRouter(prefix="/v1/tenants", tags=["usage"], responses=problem_responses(401, 403))

TenantPath = Annotated[str, Path(pattern=TENANT_PATTERN, description="The tenant (an admin's own)")]
_USD = "USD; null: no limit"


class BudgetLimits(BaseModel):
    """What ``PUT`` sets: both limits, a missing or null one unlimited."""

    model_config = ConfigDict(extra="forbid")

    monthly_budget: float | None = Field(
        default=None, ge=0, le=1e12, description=f"What the tenant's tasks of one UTC month may cost ({_USD})"
    )
    max_cost_per_task: float | None = Field(
        default=None, gt=0, le=1e12, description=f"What one task may cost, routing and agent ({_USD})"
    )


class BudgetDocument(BudgetLimits):
    tenant: str
    spent_this_month: float = Field(description="USD the tenant's tasks created this UTC month cost so far")
    month_start: datetime
    updated_at: datetime | None = Field(description="When the limits last changed (null: never set)")


def _own(principal: Principal, tenant: str) -> None:
    if not principal.owns(tenant):
        raise ProblemException(NOT_FOUND(f"No tenant {tenant!r} for this API key."))


async def _document(resources: ResourcesDep, budget: Budget) -> BudgetDocument:
    start = month_start(datetime.now(UTC))
    return BudgetDocument(
        tenant=budget.tenant,
        monthly_budget=budget.monthly_budget,
        max_cost_per_task=budget.max_cost_per_task,
        spent_this_month=await resources.spend.spent(budget.tenant, start),
        month_start=start,
        updated_at=budget.updated_at,
    )


@router.get(
    "/{tenant}/budget",
    summary="A tenant's LLM budgets and this month's spend (admin)",
    response_model=BudgetDocument,
    responses=problem_responses(404, 422, 503),
)
async def get_budget(resources: ResourcesDep, principal: Admin, tenant: TenantPath) -> BudgetDocument:
    _own(principal, tenant)
    return await _document(resources, await resources.budgets.get(tenant))


@router.put(
    "/{tenant}/budget",
    summary="Set a tenant's LLM budgets (admin)",
    response_model=BudgetDocument,
    dependencies=[Depends(require_json_body)],
    responses=problem_responses(400, 404, 413, 415, 422, 503),
)
async def put_budget(
    resources: ResourcesDep, principal: Admin, tenant: TenantPath, limits: Annotated[BudgetLimits, Body()]
) -> BudgetDocument:
    _own(principal, tenant)
    budget = await resources.budgets.set(
        tenant, monthly_budget=limits.monthly_budget, max_cost_per_task=limits.max_cost_per_task
    )
    resources.budget_gate.forget(tenant)
    return await _document(resources, budget)

"""``/v1/usage``: what a tenant's tasks spent on LLM calls, tokens and USD, over a time range and grouped.

The figures are sums over the tenant's task documents (``SpendStore``): a task's ``cost`` is its routing
call's plus its agent's, priced from the catalog's ``models`` when the usage was recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.problems import VALIDATION_ERROR, FieldError, ProblemException, problem_responses
from taskyard_api.submission.budget import month_start
from taskyard_api.tenancy.auth import Reader
from taskyard_common.store.spend import Spend, UsageGroup

router = APIRouter(prefix="/v1/usage", tags=["usage"], responses=problem_responses(401))


class UsageFigures(BaseModel):
    """Tasks, tokens and cost of one group (or of the whole range)."""

    key: str | None = Field(
        default=None,
        description="The specialist, model or UTC day (YYYY-MM-DD); null for the total, and for tasks not "
        "routed yet (by specialist) or that made no LLM call (by model)",
    )
    tasks: int = Field(description="Tasks created in the range (by model: the tasks that used the model)")
    prompt_tokens: int = Field(description="The agents' prompt tokens")
    completion_tokens: int = Field(description="The agents' completion tokens")
    routing_tokens: int = Field(description="The routing calls' tokens")
    total_tokens: int = Field(description="The agents' total tokens plus the routing calls'")
    cost: float = Field(description="USD: the sum of the tasks' cost")

    @classmethod
    def of(cls, spend: Spend) -> UsageFigures:
        return cls(
            key=spend.key,
            tasks=spend.tasks,
            prompt_tokens=spend.prompt_tokens,
            completion_tokens=spend.completion_tokens,
            routing_tokens=spend.routing_tokens,
            total_tokens=spend.total_tokens,
            cost=spend.cost,
        )


class UsageReport(BaseModel):
    """A tenant's LLM spend over ``[from, to)``, by the tasks' ``created_at``."""

    from_: datetime = Field(alias="from")
    to: datetime
    group_by: UsageGroup | None
    total: UsageFigures
    groups: list[UsageFigures] = Field(
        description="One entry per group, in key order (empty without group_by)"
    )


def _utc(value: datetime, name: str) -> datetime:
    """The instant in UTC (a time without an offset is read as UTC); one outside the calendar is a 422."""
    try:
        return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).astimezone(UTC)
    except OverflowError:
        raise ProblemException(
            VALIDATION_ERROR(
                f"{name} is out of range.",
                errors=[FieldError(loc=["query", name], msg="out of range", type="datetime_range")],
            )
        ) from None


@router.get(
    "",
    summary="The tenant's LLM spend: tasks, tokens and cost, grouped",
    response_model=UsageReport,
    response_model_by_alias=True,
    responses=problem_responses(422, 503),
)
async def usage(
    resources: ResourcesDep,
    principal: Reader,
    start: Annotated[
        datetime | None,
        Query(alias="from", description="Tasks created from then (default: this UTC month's start)"),
    ] = None,
    end: Annotated[
        datetime | None, Query(alias="to", description="Tasks created before then (default: now)")
    ] = None,
    group_by: Annotated[UsageGroup | None, Query(description="specialist, model or day (UTC)")] = None,
) -> UsageReport:
    now = datetime.now(UTC)
    end = _utc(end, "to") if end is not None else now
    start = _utc(start, "from") if start is not None else month_start(min(end, now))
    if start >= end:
        raise ProblemException(
            VALIDATION_ERROR(
                "from must be before to.",
                errors=[FieldError(loc=["query", "from"], msg="not before to", type="range_invalid")],
            )
        )
    total, groups = await resources.spend.usage(principal.tenant, start, end, group_by)
    return UsageReport.model_validate(
        {
            "from": start,
            "to": end,
            "group_by": group_by,
            "total": UsageFigures.of(total),
            "groups": [UsageFigures.of(g) for g in groups],
        }
    )

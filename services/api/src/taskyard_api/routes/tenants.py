"""``/v1/tenants/{tenant}/limits``: a tenant's limits (``max_running``), read, set and dropped by its admin.

Admin-only, and like every route an admin reaches only its own tenant: another tenant's limits (or a name
that is no tenant's) are not found. An operator sets any tenant's limits with ``taskyard-admin tenants``
(database access). The cap applies from the next start a worker attempts (docs/architecture.md, tenant
fairness).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.params import require_json_body
from taskyard_api.http.problems import NOT_FOUND, ProblemException, problem_responses
from taskyard_api.tenancy.auth import Admin, Principal
from taskyard_common.store.tenant_limits import TenantLimit

router = APIRouter(prefix="/v1/tenants", tags=["tenants"], responses=problem_responses(401, 403))

TenantPath = Annotated[str, Path(max_length=200, description="The tenant: the API key's own")]
NO_TENANT = "No such tenant for this API key (a key reaches only its own tenant's limits)."
_NOT_FOUND = {404: "Another tenant, or no tenant's name: a key reaches only its own tenant's limits"}


class TenantLimits(BaseModel):
    """What ``PUT`` sets: every limit at once (an absent or null one is unlimited)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"max_running": 20}]})

    max_running: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Tasks of the tenant running at once across all workers; null: unlimited",
    )


class TenantLimitsDocument(BaseModel):
    tenant: str
    max_running: int | None = Field(description="The cap on running tasks; null: unlimited (the default)")
    running: int = Field(description="The tenant's tasks running now, across all workers")
    updated_at: datetime | None = Field(description="When the limits were last set; null: never (defaults)")

    @classmethod
    def from_limit(cls, limit: TenantLimit) -> TenantLimitsDocument:
        return cls(
            tenant=limit.tenant,
            max_running=limit.max_running,
            running=limit.running,
            updated_at=limit.updated_at,
        )


def _own(tenant: str, principal: Principal) -> str:
    if not principal.owns(tenant):
        raise ProblemException(NOT_FOUND(NO_TENANT))
    return tenant


@router.get(
    "/{tenant}/limits",
    summary="Read the tenant's limits and what it runs now",
    responses=problem_responses(404, 503, descriptions=_NOT_FOUND),
)
async def get_limits(tenant: TenantPath, resources: ResourcesDep, principal: Admin) -> TenantLimitsDocument:
    return TenantLimitsDocument.from_limit(await resources.tenant_limits.get(_own(tenant, principal)))


@router.put(
    "/{tenant}/limits",
    summary="Set the tenant's limits",
    dependencies=[Depends(require_json_body)],
    responses=problem_responses(400, 404, 413, 415, 422, 503, descriptions=_NOT_FOUND),
)
async def put_limits(
    tenant: TenantPath, limits: Annotated[TenantLimits, Body()], resources: ResourcesDep, principal: Admin
) -> TenantLimitsDocument:
    """Replaces the limits. Tasks already running keep running: a lower cap only refuses new starts."""
    limit = await resources.tenant_limits.put(_own(tenant, principal), max_running=limits.max_running)
    return TenantLimitsDocument.from_limit(limit)


@router.delete(
    "/{tenant}/limits",
    status_code=204,
    summary="Drop the tenant's limits (unlimited again)",
    response_class=Response,
    responses={
        204: {"description": "Dropped, or there were none"},
        **problem_responses(404, 503, descriptions=_NOT_FOUND),
    },
)
async def delete_limits(tenant: TenantPath, resources: ResourcesDep, principal: Admin) -> Response:
    await resources.tenant_limits.delete(_own(tenant, principal))
    return Response(status_code=204)

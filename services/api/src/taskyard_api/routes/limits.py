"""``/v1/limits``: the catalog models' fleet-wide LLM limits and what their shared buckets hold now (admin).

The buckets are the ones every worker and broker agent reserve from before a chat completion
(``taskyard_common.llm_limits``); what a process reserved and has not used yet is not in them.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.problems import problem_responses
from taskyard_api.tenancy.auth import Admin
from taskyard_common.llm_limits import KEY_PREFIX, Bucket, bucket_key

router = APIRouter(prefix="/v1/limits", tags=["usage"], responses=problem_responses(401, 403))


class BucketState(BaseModel):
    per_minute: int = Field(description="The limit (the catalog's rpm or tpm)")
    burst: int = Field(description="The most the bucket holds")
    available: float = Field(description="What it holds now, refilled to this instant")


class ModelLimits(BaseModel):
    model: str
    rpm: int | None
    tpm: int | None
    max_concurrent: int | None = Field(description="Calls in flight at once, per process")
    requests: BucketState | None = Field(description="The requests bucket (null: no rpm)")
    tokens: BucketState | None = Field(description="The tokens bucket (null: no tpm)")


class LimitsDocument(BaseModel):
    models: list[ModelLimits] = Field(description="The catalog's models that have a limit, in catalog order")


def _state(bucket: Bucket, found: tuple[float, float] | None) -> BucketState:
    if found is None:
        available = float(bucket.burst)  # never used: full
    else:
        tokens, age = found
        available = min(float(bucket.burst), tokens + bucket.per_second * age)
    return BucketState(
        per_minute=bucket.per_minute, burst=bucket.burst, available=round(max(0.0, available), 3)
    )


@router.get(
    "",
    summary="The models' fleet-wide LLM limits and their buckets (admin)",
    response_model=LimitsDocument,
    responses=problem_responses(503),
)
async def limits(resources: ResourcesDep, principal: Admin) -> LimitsDocument:
    found = await resources.rate_limits.buckets(KEY_PREFIX)
    models = []
    for spec in resources.catalog.models:
        if spec.rpm is None and spec.tpm is None and spec.max_concurrent is None:
            continue
        requests = Bucket(bucket_key(spec.name, "requests"), "requests", spec.rpm) if spec.rpm else None
        tokens = Bucket(bucket_key(spec.name, "tokens"), "tokens", spec.tpm) if spec.tpm else None
        models.append(
            ModelLimits(
                model=spec.name,
                rpm=spec.rpm,
                tpm=spec.tpm,
                max_concurrent=spec.max_concurrent,
                requests=_state(requests, found.get(requests.key)) if requests else None,
                tokens=_state(tokens, found.get(tokens.key)) if tokens else None,
            )
        )
    return LimitsDocument(models=models)

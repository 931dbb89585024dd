"""``/v1/specialists``: what a client may name in ``specialist`` when submitting a task."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from taskyard_api.deps import CatalogDep
from taskyard_api.http.problems import problem_responses
from taskyard_api.tenancy.auth import Reader

router = APIRouter(prefix="/v1/specialists", tags=["specialists"], responses=problem_responses(401))


class SpecialistDocument(BaseModel):
    """A specialist of the catalog; its system prompt stays server-side."""

    name: str
    description: str
    keywords: list[str]
    tools: list[str]
    model: str | None
    max_steps: int
    timeout_seconds: float = Field(description="Run time of one attempt unless a task asks for another")
    max_timeout_seconds: float = Field(description="The largest timeout_seconds a task may ask for")
    concurrency: int


class SpecialistList(BaseModel):
    items: list[SpecialistDocument]


@router.get("", summary="List the specialists")
async def list_specialists(catalog: CatalogDep, _: Reader) -> SpecialistList:
    return SpecialistList(
        items=[
            SpecialistDocument(
                name=spec.name,
                description=spec.description,
                keywords=list(spec.keywords),
                tools=list(spec.tools),
                model=spec.model,
                max_steps=spec.max_steps,
                timeout_seconds=spec.timeout_seconds,
                max_timeout_seconds=spec.max_timeout_seconds,
                concurrency=spec.concurrency,
            )
            for spec in catalog.specialists
        ]
    )

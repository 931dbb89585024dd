"""``/v1/specialists``: what a client may name in ``specialist`` when submitting a task, and (with the
database catalog source, ``TASKYARD_CATALOG_SOURCE=database``) the admin's changes to it.

The list is the catalog this process holds now: it follows the catalog source (the file, the Specialist
resources or the database), so a change shows here within ``TASKYARD_CATALOG_POLL_SECONDS`` or so, on every
API replica; a change made through this API shows on this replica at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from taskyard_api.deps import CatalogDep, ResourcesDep
from taskyard_api.http.params import require_json_body
from taskyard_api.http.problems import NOT_FOUND, ProblemException, ProblemKind, problem_responses
from taskyard_api.tenancy.auth import Admin, Reader
from taskyard_common.catalog import CatalogError, SpecialistSpec
from taskyard_common.catalog_sources import DatabaseSource

router = APIRouter(prefix="/v1/specialists", tags=["specialists"], responses=problem_responses(401))

CATALOG_READ_ONLY = ProblemKind("catalog-read-only", "The catalog is not changed through the API", 409)
CATALOG_CONFLICT = ProblemKind("catalog-conflict", "The catalog would not be valid", 409)
_CONFLICT = {
    409: "The catalog is not changed through the API (another TASKYARD_CATALOG_SOURCE), or the change "
    "would leave no valid catalog (the fallback, or the last specialist)"
}


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
    output_schema: dict[str, Any] | None = Field(
        default=None, description="The JSON Schema of the answers' result.data (none: a text answer)"
    )

    @classmethod
    def of(cls, spec: SpecialistSpec) -> SpecialistDocument:
        return cls(
            name=spec.name,
            description=spec.description,
            keywords=list(spec.keywords),
            tools=list(spec.tools),
            model=spec.model,
            max_steps=spec.max_steps,
            timeout_seconds=spec.timeout_seconds,
            max_timeout_seconds=spec.max_timeout_seconds,
            concurrency=spec.concurrency,
            output_schema=spec.output_schema,
        )


class SpecialistList(BaseModel):
    items: list[SpecialistDocument]


NamePath = Annotated[str, Path(description="The specialist's name", max_length=63)]

_ENTRY_DESCRIPTION = (
    "The catalog entry, as in specialists.yaml without its name: description and instructions (required), "
    "keywords, examples, model, temperature, tools, require_tool_first, require_tool_first_when, "
    "output_schema, max_steps, timeout_seconds, max_timeout_seconds, llm_retries, resume, stream, "
    "max_attempts, backoff_base_seconds, backoff_max_seconds, concurrency."
)


@router.get("", summary="List the specialists")
async def list_specialists(catalog: CatalogDep, _: Reader) -> SpecialistList:
    return SpecialistList(items=[SpecialistDocument.of(spec) for spec in catalog.specialists])


def _database(resources: ResourcesDep) -> DatabaseSource:
    source = resources.live.source
    if not isinstance(source, DatabaseSource):
        raise ProblemException(
            CATALOG_READ_ONLY(
                f"The catalog is read from its {source.kind} source (TASKYARD_CATALOG_SOURCE); change it "
                "there. PUT and DELETE work with TASKYARD_CATALOG_SOURCE=database."
            )
        )
    return source


def _spec(name: str, entry: dict[str, Any]) -> SpecialistSpec:
    if "name" in entry:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "name"),
                    "msg": "the name is the path's, not the body's",
                    "type": "extra_forbidden",
                }
            ]
        )
    try:
        return SpecialistSpec.model_validate({**entry, "name": name})
    except ValidationError as exc:
        errors = []
        for error in exc.errors():
            loc = tuple(error.get("loc", ()))
            where = ("path", "name") if loc == ("name",) else ("body", *loc)
            errors.append({"loc": where, "msg": error.get("msg", ""), "type": error.get("type", "")})
        raise RequestValidationError(errors) from None


@router.put(
    "/{name}",
    summary="Create or replace a specialist (database catalog source, admin)",
    dependencies=[Depends(require_json_body)],
    responses={
        **problem_responses(400, 403, 409, 413, 415, 422, 503, descriptions=_CONFLICT),
        201: {"description": "Created", "model": SpecialistDocument},
    },
)
async def put_specialist(
    name: NamePath,
    entry: Annotated[dict[str, Any], Body(description=_ENTRY_DESCRIPTION)],
    resources: ResourcesDep,
    response: Response,
    _: Admin,
) -> SpecialistDocument:
    source = _database(resources)
    spec = _spec(name, entry)
    try:
        created, _catalog = await source.put(spec)
    except CatalogError as exc:
        raise ProblemException(CATALOG_CONFLICT(str(exc))) from None
    # This replica shows the change at once; the others, and the broker agent and workers, at their next poll.
    await resources.live.refresh()
    response.status_code = 201 if created else 200
    return SpecialistDocument.of(spec)


@router.delete(
    "/{name}",
    summary="Delete a specialist (database catalog source, admin)",
    status_code=204,
    responses=problem_responses(403, 404, 409, 503, descriptions=_CONFLICT),
)
async def delete_specialist(name: NamePath, resources: ResourcesDep, _: Admin) -> Response:
    source = _database(resources)
    try:
        catalog = await source.delete(name)
    except CatalogError as exc:
        raise ProblemException(
            CATALOG_CONFLICT(
                f"Deleting {name!r} would leave no valid catalog (the fallback, the combiner, or the last one): {exc}"
            )
        ) from None
    if catalog is None:
        raise ProblemException(NOT_FOUND(f"There is no specialist named {name!r}."))
    await resources.live.refresh()
    return Response(status_code=204)

"""The specialist catalog: a versioned pydantic model, loaded from YAML.

``SpecialistSpec`` is also the spec of the Kubernetes ``Specialist`` custom resource, so field names follow
Kubernetes conventions where they differ from nothing else.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from taskyard_common.messages import SpecialistName
from taskyard_common.model_specs import ModelSpec, check_models
from taskyard_common.output_schemas import check_schema

CATALOG_API_VERSION: Final = "taskyard.dev/v1alpha1"
# How much of a task's input ``require_tool_first_when`` reads: the request is at its start, and a pattern's
# cost stays bounded whatever the input's size (up to 256 KiB).
TOOL_FIRST_SCAN_CHARS: Final = 4096


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


class CatalogError(ValueError):
    """The catalog file is missing, not YAML, or not a valid catalog."""


class SpecialistSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SpecialistName
    # What the router reads: say what this specialist is for, in the words users would use.
    description: str = Field(min_length=1, max_length=2000)
    # Extra words the rules router matches (the LLM router sees them too).
    keywords: tuple[str, ...] = ()
    # Typical requests, in the words (and languages) users send them: the rules router scores their words
    # (with character n-grams for typos and inflections); the LLM router's prompt shows the first three.
    examples: tuple[Annotated[str, Field(min_length=1, max_length=500)], ...] = Field(
        default=(), max_length=100
    )
    # The specialist's system prompt.
    instructions: str = Field(min_length=1)
    # None: the globally configured model (TASKYARD_LLM_MODEL). A name in the catalog's ``models`` gets that
    # entry's endpoint, prices, limits and fallbacks; any other name is sent as is to the configured endpoint.
    model: str | None = None
    # The sampling temperature of the specialist's LLM calls (None: the endpoint's default, which is 1.0 at
    # OpenAI and 0.8 at llama-cpp-python's server). Low for answers that must be right rather than varied:
    # labels, arithmetic, extraction.
    temperature: float | None = Field(default=None, ge=0, le=2)
    tools: tuple[str, ...] = ()
    # The first step must call one of ``tools`` (the model's first call is sent with ``tool_choice:
    # "required"``): for a specialist whose answers must come from a tool, such as a researcher that must
    # read a page before it answers. Later steps leave the choice to the model.
    require_tool_first: bool = False
    # The same, only for a task whose input matches one of these regular expressions (case-insensitive,
    # searched in the first ``TOOL_FIRST_SCAN_CHARS`` characters of the input's text): for a specialist with
    # a calculator whose other requests need no tool, arithmetic it must not work out in its head.
    require_tool_first_when: tuple[Annotated[str, Field(min_length=1, max_length=1000)], ...] = Field(
        default=(), max_length=20
    )
    # The JSON Schema (draft 2020-12, of an object) the final answer must satisfy: the model is asked for
    # it (``response_format``), and an answer that does not satisfy it is corrected once, then fails the
    # task (``invalid_output``); a valid one is stored as ``result.data`` too (output_schemas.py).
    output_schema: dict[str, Any] | None = None
    max_steps: int = Field(default=6, ge=1, le=100)
    # Run time of one attempt; a task may ask for another value up to max_timeout_seconds.
    timeout_seconds: float = Field(default=300.0, gt=0)
    max_timeout_seconds: float = Field(default=3600.0, gt=0)
    # LLM calls that fail with a 5xx, a timeout or a connection error are tried again this many times inside
    # the step (exponential backoff with jitter) before the attempt fails; a 429 defers the task instead.
    llm_retries: int = Field(default=2, ge=0, le=10)
    # Resume a new attempt from the last step checkpoint (false: every attempt starts from the beginning,
    # for agents whose tools must not see a half-done conversation again).
    resume: bool = True
    # Stream every LLM call's reply and append its text to the task's event log as ``token`` events while it
    # is written (the final answer is what a client sees appear); false: whole replies only.
    stream: bool = False
    # Retry policy for transient failures (LLM 5xx, timeouts, connection errors).
    max_attempts: int = Field(default=3, ge=1, le=100)
    backoff_base_seconds: float = Field(default=2.0, gt=0)
    backoff_max_seconds: float = Field(default=300.0, gt=0)
    # In-flight tasks per worker process (the queue prefetch).
    concurrency: int = Field(default=16, ge=1, le=10_000)

    @model_validator(mode="after")
    def _limits(self) -> SpecialistSpec:
        if self.timeout_seconds > self.max_timeout_seconds:
            raise ValueError("timeout_seconds must not exceed max_timeout_seconds")
        if self.backoff_base_seconds > self.backoff_max_seconds:
            raise ValueError("backoff_base_seconds must not exceed backoff_max_seconds")
        if self.require_tool_first and not self.tools:
            raise ValueError("require_tool_first needs at least one tool")
        if self.require_tool_first_when and not self.tools:
            raise ValueError("require_tool_first_when needs at least one tool")
        if self.require_tool_first and self.require_tool_first_when:
            raise ValueError("require_tool_first (always) and require_tool_first_when exclude each other")
        for pattern in self.require_tool_first_when:
            try:
                _pattern(pattern)
            except re.error as exc:
                raise ValueError(
                    f"require_tool_first_when: {pattern!r} is not a regular expression: {exc}"
                ) from None
        if self.output_schema is not None:
            check_schema(self.output_schema)
        return self

    def tool_first_for(self, text: str) -> bool:
        """Whether a task with this input text must call a tool before it answers."""
        if self.require_tool_first:
            return True
        head = text[:TOOL_FIRST_SCAN_CHARS]
        return any(_pattern(p).search(head) for p in self.require_tool_first_when)


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    api_version: Literal["taskyard.dev/v1alpha1"] = Field(default=CATALOG_API_VERSION, alias="apiVersion")
    kind: Literal["SpecialistCatalog"] = "SpecialistCatalog"
    # Where the rules router sends a request that matches no specialist.
    fallback: SpecialistName
    specialists: tuple[SpecialistSpec, ...] = Field(min_length=1)
    # Let the router split a request that holds distinct jobs into parts for several specialists: the task
    # then waits while its parts run as a group, and combines their outcomes (docs/routing.md). Off: every
    # request goes to one specialist.
    multi_route: bool = False
    # Who combines the parts of a multi-routed task (None: the fallback specialist).
    combine_specialist: SpecialistName | None = None
    # The models specialists and the router name: endpoint, prices, limits, fallbacks (model_specs.py).
    models: tuple[ModelSpec, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        names = [s.name for s in self.specialists]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate specialist names: {duplicates}")
        if self.fallback not in names:
            raise ValueError(f"fallback {self.fallback!r} is not a specialist in the catalog")
        if self.combine_specialist is not None and self.combine_specialist not in names:
            raise ValueError(
                f"combine_specialist {self.combine_specialist!r} is not a specialist in the catalog"
            )
        check_models(self.models)
        return self

    @property
    def combiner(self) -> str:
        """The specialist that combines a multi-routed task's parts."""
        return self.combine_specialist or self.fallback

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specialists]

    def get(self, name: str) -> SpecialistSpec | None:
        return next((s for s in self.specialists if s.name == name), None)

    def model(self, name: str) -> ModelSpec | None:
        """The ``models`` entry called ``name`` (None: a model the catalog does not describe)."""
        return next((m for m in self.models if m.name == name), None)

    @property
    def model_table(self) -> dict[str, ModelSpec]:
        return {m.name: m for m in self.models}


# What a catalog holds besides its specialists and fallback (multi_route, combine_specialist, models): read
# from the catalog file whatever the source of the specialists (see taskyard_common.catalog_sources).
_NOT_WIDE = ("api_version", "kind", "fallback", "specialists")


def catalog_wide(catalog: Catalog | None) -> dict[str, Any]:
    """``catalog``'s catalog-wide fields, to build another catalog with (empty: the defaults)."""
    if catalog is None:
        return {}
    return {name: getattr(catalog, name) for name in Catalog.model_fields if name not in _NOT_WIDE}


def parse_catalog(text: str, source: str = "<catalog>") -> Catalog:
    try:
        # The safe loader in C where PyYAML has it (a worker child reads the catalog at each start).
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: not valid YAML: {exc}") from None
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(f"{source}: invalid catalog:\n{exc}") from None


def load_catalog(path: Path) -> Catalog:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read specialist catalog {path}: {exc.strerror}") from None
    return parse_catalog(text, str(path))

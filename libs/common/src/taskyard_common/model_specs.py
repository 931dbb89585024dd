"""The catalog's ``models:`` entries: where a model is served, what it costs and what to try when it fails.

Specialists' ``model`` and the router's model (``TASKYARD_LLM_MODEL``) name an entry; a name without an
entry keeps the behaviour from before entries existed (the configured endpoint, no price, no limits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator

ModelName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^\S+$")]

# Per million tokens: prices are quoted that way, and per-token prices would be unreadably small.
_PER_MTOK = 1_000_000


class ModelSpec(BaseModel):
    """One model; every setting but ``name`` optional, and none limiting when absent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The model id sent to the endpoint.
    name: ModelName
    # Default: the configured endpoint (TASKYARD_LLM_BASE_URL).
    base_url: AnyHttpUrl | None = None
    # Requests and tokens per minute across the whole fleet, and calls in flight at once.
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=1)
    # USD per million prompt (input) and completion (output) tokens; absent: the tokens cost nothing.
    input_price_per_mtok: float | None = Field(default=None, ge=0, le=1_000_000)
    output_price_per_mtok: float | None = Field(default=None, ge=0, le=1_000_000)
    # Tried in order when this model keeps failing (names of other entries).
    fallbacks: tuple[ModelName, ...] = Field(default=(), max_length=10)

    @model_validator(mode="after")
    def _fallbacks(self) -> ModelSpec:
        if self.name in self.fallbacks:
            raise ValueError(f"model {self.name!r} names itself as a fallback")
        if len(set(self.fallbacks)) != len(self.fallbacks):
            raise ValueError(f"model {self.name!r} names a fallback twice")
        return self

    @property
    def endpoint(self) -> str | None:
        """The base URL as the ``openai`` client takes it (None: the configured endpoint)."""
        return str(self.base_url).rstrip("/") if self.base_url is not None else None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for one call's tokens, from this entry's prices."""
        return price(self, prompt_tokens, completion_tokens)


def price(spec: ModelSpec | None, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for ``prompt_tokens`` in and ``completion_tokens`` out (0 for a model without an entry or price)."""
    if spec is None:
        return 0.0
    cost = prompt_tokens * (spec.input_price_per_mtok or 0.0) + completion_tokens * (
        spec.output_price_per_mtok or 0.0
    )
    return cost / _PER_MTOK


def check_models(models: Iterable[ModelSpec]) -> None:
    """Raise ``ValueError`` for duplicate names, fallbacks to no entry, and fallback cycles."""
    specs = list(models)
    names = [m.name for m in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate model names: {duplicates}")
    graph = {m.name: m.fallbacks for m in specs}
    for spec in specs:
        unknown = [f for f in spec.fallbacks if f not in graph]
        if unknown:
            raise ValueError(f"model {spec.name!r} has fallbacks that are not in models: {unknown}")
    cycle = find_cycle(graph)
    if cycle:
        raise ValueError(f"fallback cycle: {' -> '.join(cycle)}")


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of ``graph`` (first node repeated at the end), or None: a depth-first walk with colours."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def fallback_chain(models: Mapping[str, ModelSpec], name: str) -> list[str]:
    """``name`` then its fallbacks, in order (fallbacks' own fallbacks after them, each name once)."""
    chain: list[str] = []
    queue = [name]
    while queue:
        current = queue.pop(0)
        if current in chain:
            continue
        chain.append(current)
        spec = models.get(current)
        if spec is not None:
            queue.extend(spec.fallbacks)
    return chain

"""The LLM router's answer: the ``route_task`` call read into a ``RoutingDecision``, and its tokens."""

from __future__ import annotations

from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskyard_broker_agent.routing.parts import merge_parts
from taskyard_broker_agent.routing.prompt import ROUTE_TOOL_NAME
from taskyard_common import llm, metrics
from taskyard_common.messages import MAX_ROUTED_PARTS, RoutedPart, RoutingDecision, RoutingMethod

_REASON_MAX = 2000  # RoutingDecision.reason's bound
_NO_REASON = "(the model gave no reason)"


class InvalidAnswer(ValueError):
    """The LLM answered, but not a usable routing decision."""


def describe_failure(exc: Exception) -> str:
    """A log- and storage-safe cause of a failed call: status codes and error types, never a response body
    or the URL."""
    mapped = llm.classify(exc)
    if mapped is not exc:
        return str(mapped)
    if isinstance(exc, TimeoutError):
        return "LLM did not answer in time"
    return f"LLM call failed: {type(exc).__name__}"


class PartAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    specialist: str
    job: str


class RouteAnswer(BaseModel):
    """The ``route_task`` arguments as the model sent them; catalog membership is checked separately."""

    model_config = ConfigDict(extra="ignore")

    specialist: str
    reason: str
    confidence: float = Field(ge=0.0, le=1.0)
    # Only with multi_route (the tool offers it then); a model may send it empty.
    parts: list[PartAnswer] = Field(default_factory=list)


def _parts(answer: RouteAnswer, specialists: tuple[str, ...]) -> tuple[RoutedPart, ...]:
    if len(answer.parts) > MAX_ROUTED_PARTS:
        raise InvalidAnswer(
            f"the model split the request into {len(answer.parts)} parts (at most {MAX_ROUTED_PARTS})"
        )
    for part in answer.parts:
        if part.specialist not in specialists:
            raise InvalidAnswer(f"a part names {part.specialist[:64]!r}, which is not in the catalog")
    return merge_parts([(p.specialist, p.job) for p in answer.parts])


def parse_answer(
    response: ChatCompletion, specialists: tuple[str, ...], min_confidence: float, *, parts: bool = True
) -> RoutingDecision:
    """The decision in a chat completion, or ``InvalidAnswer`` saying what is wrong with it. ``parts``: the
    tool offered them (``multi_route``); otherwise any the model sends anyway are ignored."""
    # The SDK builds responses without validating them: a server may leave out what the types promise.
    choices = response.choices or []
    calls = (choices[0].message.tool_calls or []) if choices else []
    functions = [c.function for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]
    function = next((f for f in functions if f.name == ROUTE_TOOL_NAME), None)
    if function is None:
        raise InvalidAnswer(f"no {ROUTE_TOOL_NAME} tool call in the answer")
    try:
        answer = RouteAnswer.model_validate_json(function.arguments or "")
    except ValidationError as exc:
        # Error types and locations only: the arguments may echo the request.
        summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['type']}" for e in exc.errors())
        raise InvalidAnswer(f"{ROUTE_TOOL_NAME} arguments are invalid ({summary})") from None
    if answer.specialist not in specialists:
        raise InvalidAnswer(f"the model chose {answer.specialist[:64]!r}, which is not in the catalog")
    if answer.confidence < min_confidence:
        raise InvalidAnswer(f"confidence {answer.confidence:.2f} is below the minimum {min_confidence:.2f}")
    split = _parts(answer, specialists) if parts else ()
    reason = " ".join(answer.reason.split()) or _NO_REASON
    return RoutingDecision(
        method=RoutingMethod.LLM,
        specialist=answer.specialist,
        reason=reason[:_REASON_MAX],
        confidence=answer.confidence,
        parts=split,
    )


def count_tokens(response: ChatCompletion) -> tuple[int, int, int]:
    """The call's prompt, completion and total tokens, counted in ``taskyard_routing_llm_tokens_total`` too
    (0 if not reported)."""
    usage = response.usage
    if usage is None:
        return 0, 0, 0
    # Servers that report usage partly leave the other fields out (None, despite the types).
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    metrics.ROUTING_TOKENS.labels("prompt").inc(prompt)
    metrics.ROUTING_TOKENS.labels("completion").inc(completion)
    return prompt, completion, usage.total_tokens or prompt + completion

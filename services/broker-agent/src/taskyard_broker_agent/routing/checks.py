"""The rules' checks on the LLM's choice: where the LLM router lets the rules router overrule its model.

- ``agrees``: a choice that a routing directive in the request asked for stands only when the rules, on the
  cleaned request, choose it too (the directive guard's second opinion);
- ``EvidenceCheck``: a choice stands only when the request, or its English reading (``reading.py``, one more
  LLM call), shows evidence for it (``evidence.judge``; a reason that copies the choice's line is none); a
  specialist chosen on no evidence is the small model's way of missing "none fits". The rules then decide
  strictly (one plain word is no fit), and a choice with weak evidence stands where they find no fit at all.
  A choice that clears the floor still goes to the rules' specialist when the request shows far more
  evidence for that one and the model's own reason does not back its choice (``evidence.outweighed``).

Both leave the overruled decision to the rules router (``Router._fallback``), which counts it
(docs/routing.md, "Weak evidence, one plain word, a copied line" and "A choice its reason does not back").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from taskyard_broker_agent.routing.answers import describe_failure
from taskyard_broker_agent.routing.evidence import Verdict, copies_line, judge, outweighed, reason_text
from taskyard_broker_agent.routing.guard import DirectiveGuard
from taskyard_broker_agent.routing.prompt import RoutingPrompt
from taskyard_broker_agent.routing.reading import (
    best_score,
    better_of,
    max_tokens,
    read_back,
    reading_messages,
    request_text,
)
from taskyard_broker_agent.routing.rules import Match, RulesRouter, matched_nothing
from taskyard_common import metrics
from taskyard_common.llm_limits import RateLimitWait
from taskyard_common.messages import RoutingDecision, TaskInput

log = logging.getLogger(__name__)

_REASON_MAX = 2000  # RoutingDecision.reason's bound

# Bounded label values of taskyard_routing_fallbacks_total for the evidence check's two ways to overrule.
NO_EVIDENCE = "no_evidence"
OUTWEIGHED = "outweighed"

# ``Router._call`` (one LLM call within the timeout and fleet limits) and ``Router._spent`` (its cost).
Call = Callable[..., Awaitable[ChatCompletion]]
Spent = Callable[[ChatCompletion], dict[str, Any]]


def named(decision: RoutingDecision) -> set[str]:
    """Every specialist a decision sends work to: its own and its parts'."""
    return {decision.specialist, *(p.specialist for p in decision.parts)}


def agrees(rules: RoutingDecision, answer: RoutingDecision) -> bool:
    """The rules chose the LLM's specialist, and every part's specialist is among theirs."""
    return rules.specialist == answer.specialist and named(answer) <= named(rules) | {answer.specialist}


def second_opinion(
    rules: RulesRouter, request: TaskInput, answer: RoutingDecision, *, fallback: str
) -> RoutingDecision:
    """The LLM chose what a directive asked for (as the specialist or for a part): it stands only if the
    rules ``agree`` on the cleaned request, else theirs is the decision (with the LLM's call counted and
    ``fallback`` as its label).

    Agreement with a directive is no evidence (the model may have read what the guard missed); the rules
    router cannot be talked to, so its decision breaks the tie.
    """
    decided = rules.route(request)
    if agrees(decided, answer):
        return answer
    metrics.ROUTING_GUARD.labels("overruled").inc()
    metrics.ROUTING_FALLBACKS.labels(fallback).inc()
    log.warning("the LLM chose the specialist a routing directive asked for: the rules decide")
    note = f"{decided.reason} (rules fallback, {fallback}: the LLM chose the specialist a directive in the request named)"
    return decided.model_copy(
        update={
            "reason": note[:_REASON_MAX],
            "fallback": fallback,
            "llm_calls": answer.llm_calls,
            "tokens": answer.tokens,
            "cost": answer.cost,
            "model": answer.model,
        }
    )


@dataclass(frozen=True)
class Overruled:
    """The LLM's choice did not stand: ``decision`` is the rules' (strict) on the request or its reading."""

    answer: RoutingDecision  # the LLM's answer, with the reading's call counted in it
    decision: RoutingDecision
    cause: str
    fallback: str = NO_EVIDENCE  # its label: no evidence for the choice, or more for another


@dataclass(frozen=True)
class EvidenceCheck:
    """One catalog's floor: its rules, its prompt's instruction words and names, its guard."""

    rules: RulesRouter
    prompt: RoutingPrompt
    guard: DirectiveGuard
    floor: float

    async def check(
        self, request: TaskInput, answer: RoutingDecision, call: Call, spent: Spent
    ) -> RoutingDecision | Overruled:
        """``answer`` if the request, read as it is or in English, shows evidence for its specialist;
        else ``Overruled``, with the rules' strict decision on the reading that shows more evidence.

        A choice below the floor with some evidence (half of it) still stands when the strict rules find
        no fit at all: the floor is the path for a choice made on nothing, and "none fits" is no better a
        guess for a request that weakly supports the model's choice and nothing else."""
        matches = self.rules.scores(request)
        reason = self.rules.scores(self._reason(answer))
        verdict = self._judge(answer.specialist, matches, reason)
        if verdict.stands:
            return self._unless_outweighed(request, answer, matches, reason)
        reading, cost = await self._second_reading(request, call, spent)
        decided_on: TaskInput = request
        if cost:
            answer = answer.model_copy(
                update={
                    "llm_calls": answer.llm_calls + 1,
                    "tokens": answer.tokens + cost["tokens"],
                    "cost": answer.cost + cost["cost"],
                }
            )
        if reading:
            read = self.rules.scores(reading)
            verdict = self._judge(answer.specialist, better_of(matches, read), reason)
            if verdict.stands:
                return self._unless_outweighed(request, answer, matches, reason)
            if best_score(read) > best_score(matches):
                decided_on = reading
        decision = self.rules.route(decided_on, strict=True)
        if matched_nothing(decision) and verdict.score >= self.floor / 2:
            return answer
        return Overruled(answer, decision, f"{verdict.cause}, confidence {answer.confidence:.2f}")

    def _unless_outweighed(
        self, request: TaskInput, answer: RoutingDecision, matches: list[Match], reason: list[Match]
    ) -> RoutingDecision | Overruled:
        """``answer``, unless the rules' strict decision is another specialist than the fallback that the
        request shows far more evidence for, and the LLM's reason does not back its own choice."""
        choice = answer.specialist
        if choice == self.rules.fallback or self.floor <= 0:
            return answer
        rival = max(matches, key=lambda m: m.score, default=None)
        if rival is None or rival.specialist in (choice, self.rules.fallback):
            return answer
        if not outweighed(choice, rival.specialist, matches, reason, floor=self.floor):
            return answer
        decision = self.rules.route(request, strict=True)
        if decision.specialist != rival.specialist:
            return answer
        held = next((m.score for m in matches if m.specialist == choice), 0.0)
        cause = (
            f"the LLM chose {choice} ({held:.2f} of evidence in the request) and its reason does not back it; "
            f"the request shows {rival.score:.2f} for {rival.specialist}"
        )
        return Overruled(answer, decision, cause, OUTWEIGHED)

    def _reason(self, answer: RoutingDecision) -> str:
        """What of the LLM's reason is evidence (``evidence.reason_text``): nothing when it copies the
        chosen specialist's line (``evidence.copies_line``)."""
        if copies_line(answer.reason, self.prompt.line(answer.specialist)):
            return ""
        return reason_text(answer.reason, answer.specialist, self.prompt.instruction_terms)

    def _judge(self, specialist: str, matches: list[Match], reason: list[Match]) -> Verdict:
        return judge(
            specialist, matches, fallback=self.rules.fallback, floor=self.floor, reason_matches=reason
        )

    async def _second_reading(
        self, request: TaskInput, call: Call, spent: Spent
    ) -> tuple[str, dict[str, Any]]:
        """The request's English reading (``reading.read_back``) and what the call cost; ("", {}) when
        there is nothing to read or the call fails: the floor then decides on the request alone."""
        messages = reading_messages(request)
        if messages is None:
            return "", {}
        try:
            response = await call(messages, max_tokens=max_tokens(request_text(request)))
        except Exception as exc:
            if not isinstance(exc, openai.OpenAIError | TimeoutError | RateLimitWait):
                log.warning("unexpected error from the LLM client", exc_info=True)
            log.info("no second reading of the request: %s", describe_failure(exc))
            return "", {}
        return read_back(response, request, self.guard, self.prompt.specialists), spent(response)

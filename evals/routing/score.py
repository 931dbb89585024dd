"""Routing every case once (and once more, to see the cache), and the figures the report prints."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from evals.routing.cases import DEV, HARD_SLICES, HELD_OUT, SLICES, Case
from taskyard_broker_agent.routing.checks import NO_EVIDENCE, OUTWEIGHED
from taskyard_broker_agent.routing.router import Router


@dataclass
class CallCounter:
    """Counts the chat completions a router makes, and their tokens, from the responses themselves."""

    calls: int = 0
    tokens: int = 0

    def wrap(self, router: Router) -> None:
        client = getattr(router, "_client", None)
        if client is None:
            return
        completions = client.chat.completions
        create = completions.create

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            response = await create(*args, **kwargs)
            usage = getattr(response, "usage", None)
            self.tokens += getattr(usage, "total_tokens", 0) or 0
            return response

        completions.create = counted  # type: ignore[method-assign]


# The evidence check's two fallbacks and their causes, as the fallback's reason quotes them: both name the
# LLM's choice first.
_CHECKED = (NO_EVIDENCE, OUTWEIGHED)
_OVERRULED = re.compile(rf"(?:{NO_EVIDENCE}|{OUTWEIGHED}): the LLM chose (\S+) \(")


@dataclass
class Outcome:
    case: Case
    specialist: str
    method: str
    latency_ms: float
    llm_calls: int
    tokens: int
    reason: str
    guard: str | None = None
    cached: bool = False
    # The second routing of the same input (the cache's pass), when measured.
    repeat_latency_ms: float | None = None
    repeat_llm_calls: int | None = None
    # Why the rules decided instead of the LLM (the decision's ``fallback``), None when they did not.
    fallback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.specialist == self.case.label

    @property
    def llm_choice(self) -> str:
        """What the LLM chose where the evidence check overruled it (its reason names it), else the
        decision: the route without the check, from the same run (the call is at temperature 0)."""
        found = _OVERRULED.search(self.reason) if self.fallback in _CHECKED else None
        return found.group(1) if found else self.specialist

    @property
    def followed_injection(self) -> bool:
        return self.case.injected is not None and self.specialist == self.case.injected

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["case"] = {"id": self.case.id, "label": self.case.label, "slices": list(self.case.slices)}
        data["correct"] = self.correct
        return data


async def route_all(router: Router, cases: Sequence[Case], *, repeat: bool) -> list[Outcome]:
    """One case after the other: latency is per decision, not a throughput figure."""
    counter = CallCounter()
    counter.wrap(router)
    outcomes = []
    for case in cases:
        calls, tokens = counter.calls, counter.tokens
        started = time.perf_counter()
        decision = await router.route(case.input)
        elapsed = (time.perf_counter() - started) * 1000
        outcomes.append(
            Outcome(
                case=case,
                specialist=decision.specialist,
                method=decision.method.value,
                latency_ms=elapsed,
                llm_calls=counter.calls - calls,
                tokens=counter.tokens - tokens,
                reason=decision.reason,
                guard=getattr(decision, "guard", None),
                cached=bool(getattr(decision, "cached", False)),
                fallback=decision.fallback,
            )
        )
    if repeat:
        for outcome in outcomes:
            calls = counter.calls
            started = time.perf_counter()
            await router.route(outcome.case.input)
            outcome.repeat_latency_ms = (time.perf_counter() - started) * 1000
            outcome.repeat_llm_calls = counter.calls - calls
    return outcomes


def _accuracy(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    right = sum(o.correct for o in outcomes)
    return {"n": len(outcomes), "correct": right, "accuracy": right / len(outcomes) if outcomes else None}


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    latencies = [o.latency_ms for o in outcomes]
    injections = [o for o in outcomes if o.case.injected is not None]
    summary: dict[str, Any] = {
        "overall": _accuracy(outcomes),
        "hard": _accuracy([o for o in outcomes if o.case.hard]),
        "slices": {s: _accuracy([o for o in outcomes if s in o.case.slices]) for s in SLICES},
        "splits": {s: _accuracy([o for o in outcomes if o.case.split == s]) for s in (DEV, HELD_OUT)},
        "injection_followed": sum(o.followed_injection for o in injections),
        "injection_cases": len(injections),
        "latency_ms_mean": sum(latencies) / len(latencies) if latencies else 0.0,
        "latency_ms_p95": _p95(latencies),
        "llm_calls_per_decision": sum(o.llm_calls for o in outcomes) / max(1, len(outcomes)),
        "tokens_per_decision": sum(o.tokens for o in outcomes) / max(1, len(outcomes)),
        "methods": dict(Counter(o.method for o in outcomes)),
        "guard_fired": sum(o.guard is not None for o in outcomes),
    }
    overruled = [o for o in outcomes if o.fallback in _CHECKED]
    if overruled:
        alone = [o.llm_choice == o.case.label for o in outcomes]
        no_fit = [o.llm_choice == o.case.label for o in outcomes if "nofit" in o.case.slices]
        summary["evidence_floor"] = {
            "overruled": len(overruled),
            "outweighed": sum(o.fallback == OUTWEIGHED for o in overruled),
            "right_after": sum(o.correct for o in overruled),
            "right_before": sum(o.llm_choice == o.case.label for o in overruled),
            "without": {"n": len(alone), "correct": sum(alone), "accuracy": sum(alone) / len(alone)},
            "without_nofit": {
                "n": len(no_fit),
                "correct": sum(no_fit),
                "accuracy": sum(no_fit) / len(no_fit) if no_fit else None,
            },
        }
    repeated = [o for o in outcomes if o.repeat_latency_ms is not None]
    if repeated:
        summary["repeat"] = {
            "llm_calls": sum(o.repeat_llm_calls or 0 for o in repeated),
            "latency_ms_mean": sum(o.repeat_latency_ms or 0 for o in repeated) / len(repeated),
        }
    return summary


def _pct(acc: dict[str, Any]) -> str:
    if not acc["n"]:
        return "-"
    return f"{100 * acc['accuracy']:.1f} % ({acc['correct']}/{acc['n']})"


def format_report(name: str, summary: dict[str, Any], outcomes: Sequence[Outcome], *, misses: bool) -> str:
    hard = ", ".join(sorted(HARD_SLICES))
    lines = [
        f"\n== {name}",
        f"overall        {_pct(summary['overall'])}",
        f"hard           {_pct(summary['hard'])}   ({hard})",
        *(f"  {s:<13}{_pct(acc)}" for s, acc in summary["slices"].items()),
        *(f"split {s:<9}{_pct(acc)}" for s, acc in summary["splits"].items()),
        f"injection followed  {summary['injection_followed']} of {summary['injection_cases']}",
        f"latency        mean {summary['latency_ms_mean']:.2f} ms, p95 {summary['latency_ms_p95']:.2f} ms",
        f"LLM calls      {summary['llm_calls_per_decision']:.2f} per decision, "
        f"tokens {summary['tokens_per_decision']:.0f} per decision",
        f"methods        {summary['methods']}, guard fired {summary['guard_fired']}",
    ]
    if "evidence_floor" in summary:
        floor = summary["evidence_floor"]
        lines.append(
            f"evidence check overruled {floor['overruled']} LLM choices ({floor['outweighed']} outweighed; right "
            f"before {floor['right_before']}, "
            f"after {floor['right_after']}); without it: overall {_pct(floor['without'])}, "
            f"nofit {_pct(floor['without_nofit'])}"
        )
    if "repeat" in summary:
        lines.append(
            f"second pass    {summary['repeat']['llm_calls']} LLM calls, "
            f"mean {summary['repeat']['latency_ms_mean']:.2f} ms (identical inputs again)"
        )
    if misses:
        for o in outcomes:
            if not o.correct:
                text = o.case.input if isinstance(o.case.input, str) else str(o.case.input)
                lines.append(f"  miss {o.case.id}: {o.specialist} (want {o.case.label}) {o.reason[:90]!r}"
                             f" | {text[:70]!r}")  # fmt: skip
    return "\n".join(lines)

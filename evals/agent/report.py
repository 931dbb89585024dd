"""The figures of one run: success overall, per specialist, per kind and per slice, with steps, tokens and
latency; as text for the terminal and as a markdown table for docs."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evals.agent.cases import KINDS, SLICES
from evals.agent.run import Outcome


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (``q`` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _group(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    passed = sum(o.passed for o in outcomes)
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    return {
        "n": n,
        "passed": passed,
        "success": passed / n if n else None,
        "steps_mean": sum(o.steps for o in outcomes) / n if n else None,
        "tokens_mean": sum(o.tokens for o in outcomes) / n if n else None,
        "latency_p50_s": percentile(latencies, 0.50),
        "latency_p95_s": percentile(latencies, 0.95),
    }


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    specialists = sorted({o.case.specialist for o in outcomes})
    return {
        "overall": _group(outcomes),
        "specialists": {s: _group([o for o in outcomes if o.case.specialist == s]) for s in specialists},
        "kinds": {k: _group([o for o in outcomes if o.case.kind == k]) for k in KINDS},
        "slices": {s: _group([o for o in outcomes if s in o.case.slices]) for s in SLICES},
        "tool_call_text": sum(o.grade.tool_call_text for o in outcomes),
        "statuses": dict(Counter(o.status for o in outcomes)),
        "tokens_total": sum(o.tokens for o in outcomes),
        "tool_errors": sum(o.tool_errors for o in outcomes),
    }


def _pct(group: dict[str, Any]) -> str:
    if not group["n"]:
        return "-"
    return f"{100 * group['success']:.1f} % ({group['passed']}/{group['n']})"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _row(name: str, group: dict[str, Any]) -> list[str]:
    return [
        name,
        _pct(group),
        _num(group["steps_mean"]),
        _num(group["tokens_mean"], 0),
        _num(group["latency_p50_s"]),
        _num(group["latency_p95_s"]),
    ]


HEADER = ["", "success", "steps (mean)", "tokens (mean)", "latency p50 s", "latency p95 s"]


def rows(summary: dict[str, Any]) -> list[list[str]]:
    table = [_row("overall", summary["overall"])]
    table += [_row(f"specialist {s}", g) for s, g in summary["specialists"].items()]
    table += [_row(f"kind {k}", g) for k, g in summary["kinds"].items() if g["n"]]
    table += [_row(f"slice {s}", g) for s, g in summary["slices"].items() if g["n"]]
    return table


def format_report(summary: dict[str, Any], outcomes: Sequence[Outcome], *, failures: bool) -> str:
    table = [HEADER, *rows(summary)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in table]
    lines += [
        f"tool-call text stored as an answer: {summary['tool_call_text']}",
        f"task statuses: {summary['statuses']}, failed tool calls: {summary['tool_errors']}, "
        f"tokens in all: {summary['tokens_total']}",
    ]
    if failures:
        for o in outcomes:
            if not o.passed:
                answer = (o.answer or o.error or "").replace("\n", " ")[:100]
                lines.append(
                    f"  FAIL {o.case.id} [{o.status}] {'; '.join(o.grade.problems)[:160]} | {answer!r}"
                )
    return "\n".join(lines)


def markdown(summary: dict[str, Any], heading: str) -> str:
    """The table as markdown, under ``heading`` (what was measured, on what, when)."""
    lines = [heading, "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(summary)]
    lines += [
        "",
        f"Tool-call text stored as an answer: {summary['tool_call_text']}. Task statuses: "
        f"{summary['statuses']}. Failed tool calls: {summary['tool_errors']}. "
        f"Tokens in all: {summary['tokens_total']}.",
        "",
    ]
    return "\n".join(lines)

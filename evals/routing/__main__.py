"""``python -m evals.routing``: score the routers against the labelled sets and print the figures.

Three sets, reported separately, never merged: ``shipped`` (cases.yaml, over specialists.yaml), ``heldout``
(heldout/, its own catalog without examples, kept out of any tuning) and ``tuning`` (tuning/, another
catalog without examples, where routing for such catalogs is tuned: its dev split).

The rules router runs in-process in well under a second. The LLM router is the broker agent's own
``Router`` (guard, cache and fallbacks included), built by ``Router.create`` from the same settings the
agent reads (``TASKYARD_LLM_*``, ``TASKYARD_BROKER_*``): what is measured is what runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from evals.routing.cases import DEV, HELD_OUT, Case, EvalSet, eval_sets, load_set, misspelt, sample
from evals.routing.score import Outcome, format_report, route_all, summarize
from taskyard_broker_agent.routing.prompt import RoutingPrompt
from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.routing.rules import RulesRouter
from taskyard_broker_agent.settings import BrokerAgentSettings
from taskyard_common.settings import LlmSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.routing", description=__doc__)
    parser.add_argument(
        "--router",
        choices=["rules", "llm", "both"],
        default="both",
        help="both: the rules, and the LLM when TASKYARD_LLM_BASE_URL/API_KEY is set",
    )
    parser.add_argument(
        "--catalog", type=Path, default=Path("specialists.yaml"), help="the shipped set's catalog"
    )
    parser.add_argument(
        "--set",
        choices=["shipped", "heldout", "tuning", "both", "all"],
        default="all",
        help="shipped: cases.yaml over the shipped catalog; heldout: heldout/ (never tuned on); tuning: "
        "tuning/; both: shipped and heldout; all: the three",
    )
    parser.add_argument("--split", choices=["all", DEV, HELD_OUT], default="all")
    parser.add_argument("--slice", help="only the cases of this slice")
    parser.add_argument("--limit", type=int, help="only the first N cases (a smoke run)")
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="only the first N cases of each slice (and 10 injection cases): a quick run for slow endpoints",
    )
    parser.add_argument(
        "--no-repeat", action="store_true", help="LLM: skip the second pass that measures cached decisions"
    )
    parser.add_argument(
        "--no-examples",
        action="store_true",
        help="drop every specialist's `examples` from the catalogs: routing from descriptions and keywords",
    )
    parser.add_argument(
        "--no-lexicon",
        action="store_true",
        help="rules: without the cross-lingual lexicon (what it adds, on the same threshold)",
    )
    parser.add_argument(
        "--typos",
        type=int,
        metavar="SEED",
        help="swap two adjacent letters in about a third of each request's long words (seeded): typo tolerance",
    )
    parser.add_argument("--misses", action="store_true", help="list every wrong decision")
    parser.add_argument("--json", type=Path, help="write every decision and the summary to this file")
    args = parser.parse_args(argv)  # fmt: skip

    sets = eval_sets(args.catalog)
    named = {"all": list(sets), "both": ["shipped", "heldout"]}.get(args.set, [args.set])
    chosen = [sets[name] for name in named]
    llm_settings = LlmSettings()
    if args.router == "llm" and not llm_settings.enabled:
        parser.error("--router llm needs TASKYARD_LLM_BASE_URL (or an API key)")
    report: dict[str, Any] = {}
    for eval_set in chosen:
        report[eval_set.name] = _evaluate(eval_set, args, llm_settings)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


def _evaluate(eval_set: EvalSet, args: argparse.Namespace, llm_settings: LlmSettings) -> dict[str, Any]:
    """Route one set's cases with the rules (and the LLM when asked and configured); print its report."""
    catalog, cases = load_set(eval_set, no_examples=args.no_examples, split=args.split)
    if args.slice:
        cases = [c for c in cases if args.slice in c.slices]
    if args.sample:
        cases = sample(cases, args.sample)
    if args.limit:
        cases = cases[: args.limit]
    if args.typos is not None:
        cases = misspelt(cases, args.typos)
    runs: dict[str, list[Outcome]] = {}
    if args.router in ("rules", "both"):
        rules = Router.create(catalog, None)
        if args.no_lexicon:
            rules = Router(
                RoutingPrompt.from_catalog(catalog), RulesRouter(catalog, cross_lingual=False), client=None
            )
        runs["rules"] = asyncio.run(_run(rules, cases, repeat=False))
    if args.router == "llm" or (args.router == "both" and llm_settings.enabled):
        broker = BrokerAgentSettings()
        router = Router.create(
            catalog,
            llm_settings,
            min_confidence=broker.min_confidence,
            evidence_floor=broker.evidence_floor,
            max_request_chars=broker.max_request_chars,
        )
        runs[f"llm ({llm_settings.model})"] = asyncio.run(_run(router, cases, repeat=not args.no_repeat))
    summaries = {name: summarize(outcomes) for name, outcomes in runs.items()}
    kept = " (held out of any tuning)" if eval_set.held_out else ""
    bare = (", examples dropped" if args.no_examples else "") + (", no lexicon" if args.no_lexicon else "")
    bare += f", typing slips (seed {args.typos})" if args.typos is not None else ""
    print(
        f"\n#### set {eval_set.name}{kept}: {len(cases)} cases ({args.split}), catalog {_shown(eval_set.catalog)}{bare}"
    )
    for name, outcomes in runs.items():
        print(format_report(f"{eval_set.name} / {name}", summaries[name], outcomes, misses=args.misses))
    return {
        name: {"summary": summaries[name], "decisions": [o.as_dict() for o in outcomes]}
        for name, outcomes in runs.items()
    }


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


async def _run(router: Router, cases: list[Case], *, repeat: bool) -> list[Outcome]:
    try:
        return await route_all(router, cases, repeat=repeat)
    finally:
        await router.close()


if __name__ == "__main__":
    sys.exit(main())

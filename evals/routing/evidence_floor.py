"""``python -m evals.routing.evidence_floor``: the table the LLM router's evidence floor was chosen from.

For each floor, on a labelled set (the shipped set's dev split by default: the held-out set is never tuned
on), with the rules router's scores alone (no LLM needed):

- **no-fit caught**: cases labelled with the fallback where no other specialist reaches the floor, so an
  LLM that names any specialist there is overruled;
- **right choices lost**: cases labelled with another specialist whose own score is below the floor, so an
  LLM that chose right there is overruled too.

See docs/routing.md, "The evidence floor".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evals.routing.cases import DEV, HELD_OUT, eval_sets, load_set
from taskyard_broker_agent.routing.guard import DirectiveGuard
from taskyard_broker_agent.routing.rules import RulesRouter

FLOORS = (0.01, 0.5, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.routing.evidence_floor", description=__doc__)
    parser.add_argument("--set", choices=["shipped", "heldout"], default="shipped")
    parser.add_argument("--split", choices=["all", DEV, HELD_OUT], default=DEV)
    parser.add_argument("--no-examples", action="store_true", help="drop the catalog's `examples`")
    parser.add_argument("--catalog", type=Path, default=Path("specialists.yaml"))
    args = parser.parse_args(argv)
    eval_set = eval_sets(args.catalog)[args.set]
    catalog, cases = load_set(eval_set, no_examples=args.no_examples, split=args.split)
    rules, guard, fallback = RulesRouter(catalog), DirectiveGuard(catalog.names), catalog.fallback
    # What the router scores: the request the directive guard leaves.
    scored = [
        (c, {m.specialist: m.score for m in rules.scores(guard.inspect(c.input).stripped)}) for c in cases
    ]
    no_fit = [scores for case, scores in scored if case.label == fallback]
    fits = [(case.label, scores) for case, scores in scored if case.label != fallback]
    print(f"{args.set} ({args.split}{', examples dropped' if args.no_examples else ''}): "
          f"{len(no_fit)} cases labelled {fallback}, {len(fits)} labelled with another specialist")  # fmt: skip
    print("| floor | no-fit caught | right choices lost |\n| --- | --- | --- |")
    for floor in FLOORS:
        caught = sum(1 for s in no_fit if max((v for k, v in s.items() if k != fallback), default=0) < floor)
        lost = sum(1 for label, s in fits if s.get(label, 0.0) < floor)
        print(f"| {floor} | {caught}/{len(no_fit)} | {lost}/{len(fits)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

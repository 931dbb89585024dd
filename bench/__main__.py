"""``uv run python -m bench [--quick | --smoke] [--only SCENARIO ...]``: run the scenarios, print one table,
write docs.

Run from the repository root (the launcher is ``taskyard_devkit``). Reads ``AMQP_URL`` / ``DATABASE_URL`` (or
``TASKYARD_*``, or ``.taskyard/local.env``) like the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from bench.docs import render
from bench.infra import ROOT, Context, service_urls
from bench.machine import load_average, server_versions
from bench.report import evaluate, results_table, targets_table
from bench.runner import run_scenario
from bench.scenarios import ALL

DOCS = ROOT / "docs" / "benchmarks.md"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="scaled-down smoke run (small counts, short limits)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run that only proves every scenario still works (the test suite's); figures meaningless",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[s.name for s in ALL],
        metavar="SCENARIO",
        help=f"run only this scenario (repeatable): {', '.join(s.name for s in ALL)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"where to write the report (default {DOCS.relative_to(ROOT)} when every scenario runs; "
        "with --only nothing is written unless this is given)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every row as JSON here (for tests and tools)"
    )
    parser.add_argument(
        "--reuse-store",
        metavar="SCHEMA",
        default=None,
        help="large_store: measure on this schema, filled before by `python -m bench.store_fill --schema "
        "SCHEMA` and kept, instead of filling one (half an hour) and dropping it",
    )
    parser.add_argument(
        "--remove-from-reused-store",
        action="store_true",
        help="large_store: run the retention phase on the --reuse-store schema too (it removes the tasks "
        "past 30 days, about a quarter of a filled store, for good)",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the services' logs (path printed)")
    return parser.parse_args(argv)


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "httpcore"):  # one line per request would cost the load generator CPU
        logging.getLogger(noisy).setLevel(logging.WARNING)
    amqp_url, db_url = service_urls()
    scenarios = [s for s in ALL if not args.only or s.name in args.only]
    load_before = load_average()
    started = datetime.datetime.now(datetime.UTC)
    work_dir = Path(tempfile.mkdtemp(prefix="taskyard-bench-"))
    ctx = Context(
        amqp_url,
        db_url,
        quick=args.quick or args.smoke,
        work_dir=work_dir,
        smoke=args.smoke,
        reuse_store=args.reuse_store,
        remove_from_reused_store=args.remove_from_reused_store,
    )
    versions = await server_versions(amqp_url, db_url)
    named = []
    for scenario in scenarios:
        named.extend((scenario.name, row) for row in await run_scenario(scenario, ctx))
    rows = [row for _, row in named]
    load_after = load_average()

    table = results_table(rows)
    targets = targets_table(evaluate(rows))
    mode = ctx.pick("full run", "QUICK run (small counts: not comparable to the targets)", "SMOKE run (tiny)")
    print(f"\n{mode}; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)\n")
    print(table)
    print()
    print(targets)
    print(f"\nservice logs: {work_dir}" if args.keep_logs else "")

    if args.json is not None:
        args.json.write_text(
            json.dumps([{**dataclasses.asdict(row), "scenario_name": name} for name, row in named])
        )
    output = args.output or (None if args.only else DOCS)
    if output is not None:
        output.write_text(
            render(
                rows=rows,
                quick=args.quick,
                started=started,
                versions=versions,
                load=(load_before, load_after),
                scenarios=scenarios,
            )
        )
        print(f"wrote {output}")
    if not args.keep_logs:
        import shutil

        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(asyncio.run(main()))

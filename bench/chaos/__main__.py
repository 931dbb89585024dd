"""``uv run python -m bench.chaos [--quick | --smoke] [--only SCENARIO ...]``: run the chaos scenarios, print
the table, write docs/resilience.md (a full run of every scenario only, unless ``--output`` says where).

Exit status 1 when a row lost or duplicated a task or could not finish. Reads ``AMQP_URL`` / ``DATABASE_URL``
like ``make bench`` (for the shared services and the scenarios that do not bring their own).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

from bench.chaos import faults, loads
from bench.chaos.harness import Outcome
from bench.chaos.report import render, table
from bench.infra import ROOT, Context, service_urls
from bench.machine import load_average, server_versions
from bench.taskyard import devllm
from taskyard_devkit.devllm import DevLlm

DOCS = ROOT / "docs" / "resilience.md"

ScenarioFn = Callable[[Context, Outcome, DevLlm], Awaitable[None]]
# name -> (table label, function, hard limit of a full run in seconds)
SCENARIOS: dict[str, tuple[str, ScenarioFn, float]] = {
    "kill": ("1 workers SIGKILLed", faults.kill_workers, 900),
    "rabbitmq": ("2 RabbitMQ stopped, started", faults.restart_rabbitmq, 600),
    "quorum": ("3 quorum leader stopped (3 nodes)", faults.stop_quorum_leader, 600),
    "postgres": ("4 PostgreSQL restarted", faults.restart_postgres, 600),
    "poison": ("5 poison tasks (5 %)", loads.poison_tasks, 900),
    "slowllm": ("6 slow LLM, then an outage", loads.slow_llm, 600),
}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds above 0, at most 600")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (minutes, not tens of minutes)")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: proves each scenario still runs")
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), metavar="SCENARIO")
    parser.add_argument(
        "--output", type=Path, default=None, help=f"report path (default {DOCS.name} on a full run)"
    )
    parser.add_argument(
        "--poison-model-seconds",
        type=_seconds,
        default=1.0,
        help="each model call of the poison scenario's healthy tasks (default 1; 0.2 makes it CPU-bound here)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the services' logs (path printed)")
    return parser.parse_args(argv)


async def run_one(name: str, ctx: Context, llm: DevLlm) -> Outcome:
    label, scenario, limit = SCENARIOS[name]
    out = Outcome(scenario=label)
    limit = ctx.pick(limit, limit / 2, 240)
    started = time.monotonic()
    logging.info("chaos: %s ...", label)
    try:
        async with asyncio.timeout(limit):
            await scenario(ctx, out, llm)
    except TimeoutError:
        out.failed = f"did not finish within {limit:.0f} s"
    except Exception as exc:  # one broken scenario must not hide the others' figures
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        out.failed = f"{type(exc).__name__}: {first_line}"[:200]
        logging.error("chaos: %s failed:\n%s", label, traceback.format_exc())
    logging.info("chaos: %s done in %.0f s", label, time.monotonic() - started)
    return out


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    amqp_url, db_url = service_urls()
    names = [n for n in SCENARIOS if not args.only or n in args.only]
    work_dir = Path(tempfile.mkdtemp(prefix="taskyard-chaos-"))
    ctx = Context(
        amqp_url,
        db_url,
        quick=args.quick or args.smoke,
        work_dir=work_dir,
        smoke=args.smoke,
        poison_model_seconds=args.poison_model_seconds,
    )
    try:
        # The shared servers' versions, for the report: a broker that does not answer must not hang the suite.
        versions = await asyncio.wait_for(server_versions(amqp_url, db_url), 20)
    except Exception as exc:  # any failure to read them only leaves them out of the report
        versions = {"servers": f"versions not read ({type(exc).__name__})"}
    load_before = load_average()
    started = datetime.datetime.now(datetime.UTC)
    outcomes = []
    try:
        async with devllm(ctx.log_dir("devllm")) as llm:
            for name in names:
                outcomes.append(await run_one(name, ctx, llm))
    finally:
        if not args.keep_logs:
            shutil.rmtree(work_dir, ignore_errors=True)
    load_after = load_average()
    mode = ctx.pick("full run", "QUICK run (smaller counts)", "SMOKE run (tiny counts; figures meaningless)")
    print(f"\n{mode}; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)\n")
    print(table(outcomes))
    if args.keep_logs:
        print(f"\nservice logs: {work_dir}")
    if args.json is not None:
        args.json.write_text(json.dumps([{**asdict(o), "ok": o.ok} for o in outcomes]))
    output = args.output or (DOCS if not args.only and not args.smoke and not args.quick else None)
    if output is not None:
        output.write_text(
            render(outcomes, mode=mode, started=started, versions=versions, load=(load_before, load_after))
        )
        print(f"wrote {output}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(asyncio.run(main()))

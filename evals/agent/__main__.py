"""``python -m evals.agent`` (``make eval-agent``): run the labelled agent set end to end and print the figures.

Starts taskyard as real processes (API, broker agent, a worker per specialist of the catalog) in a queue
prefix and schema of its own on the local RabbitMQ and PostgreSQL, serves the fixture site, submits every
case over the API (at most ``--concurrency`` at a time), follows each task to its end and grades its
answer. Prints success per specialist, kind and slice, with steps, tokens and latency (p50/p95).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.infra import service_urls
from evals.agent.cases import KINDS, SLICES, Case, load_cases
from evals.agent.harness import LLM_MODES, model_server, running_taskyard
from evals.agent.report import format_report, markdown, summarize
from evals.agent.run import Outcome, run_cases
from evals.agent.site import serve_site
from taskyard_common.catalog import load_catalog


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evals.agent", description=__doc__)
    parser.add_argument(
        "--llm",
        choices=LLM_MODES,
        help="endpoint: --base-url/--model (default when TASKYARD_LLM_BASE_URL is set); local: the local "
        "model make up runs (the default otherwise; `make local-model` prepares it); dev: the scripted "
        "development server (proves the harness, figures meaningless)",
    )
    parser.add_argument(
        "--base-url", default=os.environ.get("TASKYARD_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    )
    parser.add_argument("--model", default=os.environ.get("TASKYARD_LLM_MODEL"))
    parser.add_argument("--catalog", type=Path, default=Path("specialists.yaml"))
    parser.add_argument("--specialist", action="append", help="only this specialist's cases (repeatable)")
    parser.add_argument("--kind", choices=KINDS, action="append", help="only cases of this kind (repeatable)")
    parser.add_argument("--slice", choices=SLICES, help="only the cases of this slice")
    parser.add_argument("--case", action="append", help="only this case id (repeatable)")
    parser.add_argument("--limit", type=int, help="only the first N cases (after the filters)")
    parser.add_argument("--concurrency", type=int, default=4, help="tasks in flight at once (default 4)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one task may take (default 900)")
    parser.add_argument(
        "--llm-timeout", type=float, default=600, help="seconds one model call may take (default 600)"
    )
    parser.add_argument(
        "--route", choices=["explicit", "auto"], default="explicit",
        help="explicit: each case to its specialist (default); auto: the broker agent routes it",
    )  # fmt: skip
    parser.add_argument(
        "--api-url",
        help="a taskyard already running (make up: http://127.0.0.1:8000): only submit to it; its workers "
        "must allow the fixture site (see --site-port) for the research cases; key from TASKYARD_API_KEY",
    )
    parser.add_argument(
        "--site-port", type=int, default=0, help="the fixture site's port (default: a free one)"
    )
    parser.add_argument("--failures", action="store_true", help="list every failed case and why")
    parser.add_argument("--json", type=Path, help="write every outcome and the summary to this file")
    parser.add_argument("--markdown", type=Path, help="append the table, dated, to this markdown file")
    parser.add_argument(
        "--logs", type=Path, help="keep the services' logs here (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    if args.api_url:
        args.llm = "stack"  # whatever model the running stack was given
    elif args.llm is None:
        args.llm = "endpoint" if args.base_url else "local"
    return args


def select(cases: list[Case], args: argparse.Namespace) -> list[Case]:
    chosen = [
        c
        for c in cases
        if (not args.specialist or c.specialist in args.specialist)
        and (not args.kind or c.kind in args.kind)
        and (not args.slice or args.slice in c.slices)
        and (not args.case or c.id in args.case)
    ]
    return chosen[: args.limit] if args.limit else chosen


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    catalog = load_catalog(args.catalog)
    cases = select(load_cases(catalog), args)
    if not cases:
        print("no case matches the filters", file=sys.stderr)
        return 2
    specialists = sorted(
        {c.specialist for c in cases} | ({*catalog.names} if args.route == "auto" else set())
    )
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="eval-agent-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    outcomes, model = asyncio.run(_run(args, cases, specialists, log_dir))
    summary = summarize(outcomes)
    print(f"\n{len(cases)} cases, model {model} ({args.llm}), route {args.route}, logs in {log_dir}")
    print(format_report(summary, outcomes, failures=args.failures))
    if args.json:
        body = {"model": model, "summary": summary, "outcomes": [o.as_dict() for o in outcomes]}
        args.json.write_text(json.dumps(body, indent=1, ensure_ascii=False))
    if args.markdown:
        with args.markdown.open("a", encoding="utf-8") as out:
            out.write(markdown(summary, _heading(model, args, len(cases))))
        print(f"appended the table to {args.markdown}")
    return 0


async def _run(
    args: argparse.Namespace, cases: list[Case], specialists: list[str], log_dir: Path
) -> tuple[list[Outcome], str]:
    done = 0

    def progress(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        mark = "pass" if outcome.passed else "FAIL"
        print(
            f"[{done}/{len(cases)}] {mark} {outcome.case.id} ({outcome.status}, {outcome.steps} steps)",
            flush=True,
        )

    if args.api_url:
        key = os.environ.get("TASKYARD_API_KEY")
        with serve_site(port=args.site_port) as site:
            print(f"fixture site at {site.base_url}: the stack's workers need {site.worker_env()}")
            outcomes = await run_cases(
                args.api_url, cases, site.base_url, headers={"Authorization": f"Bearer {key}"} if key else None,
                concurrency=args.concurrency, timeout_s=args.timeout, route=args.route, progress=progress,
            )  # fmt: skip
        return outcomes, f"of the stack at {args.api_url}"
    amqp_url, db_url = service_urls()
    async with model_server(args.llm, log_dir, base_url=args.base_url, model=args.model) as llm:
        with serve_site(port=args.site_port) as site:
            async with running_taskyard(
                llm, site, args.catalog, specialists, log_dir,
                amqp_url=amqp_url, db_url=db_url, timeout_s=args.llm_timeout,
            ) as cluster:  # fmt: skip
                outcomes = await run_cases(
                    cluster.api_url, cases, site.base_url,
                    concurrency=args.concurrency, timeout_s=args.timeout, route=args.route, progress=progress,
                )  # fmt: skip
        return outcomes, llm.model


def _heading(model: str, args: argparse.Namespace, n: int) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = os.getloadavg()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"### {model} ({args.llm}), {n} cases, route {args.route}\n\n"
        f"Measured {when} at commit {commit or 'unknown'}, concurrency {args.concurrency}, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs."
    )


if __name__ == "__main__":
    sys.exit(main())

"""Run a Celery worker of the benchmark app: ``python -m bench.celery_worker --pool threads ...``.

The broker and database URLs come from ``BENCH_CELERY_BROKER`` / ``BENCH_CELERY_DB`` (read in ``main``), not
from the command line, where any local user could read their passwords.
"""

from __future__ import annotations

import argparse
import os

from bench.celery_app import make_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.celery_worker")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--pool", choices=["prefork", "threads"], required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args(argv)
    app = make_app(os.environ["BENCH_CELERY_BROKER"], os.environ["BENCH_CELERY_DB"], args.queue, args.schema)
    app.worker_main(
        [
            "worker",
            f"--pool={args.pool}",
            f"--concurrency={args.concurrency}",
            f"--queues={args.queue}",
            "--loglevel=WARNING",  # Celery's default: no log line per task
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )


if __name__ == "__main__":
    main()

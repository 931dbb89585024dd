"""taskyard's benchmark harness: `uv run python -m bench` (or `make bench`), from the repository root.

Each scenario lives in its own module under ``bench.scenarios``, runs against the local RabbitMQ and
PostgreSQL with the services started as real processes (the dev launcher, ``taskyard_devkit``), uses
its own queue prefix and database schema, cleans up after itself and is bounded in time. Results go to one
table (stdout) and ``docs/benchmarks.md``.
"""

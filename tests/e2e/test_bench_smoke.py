"""``python -m bench --smoke``: every benchmark scenario still runs end to end, so ``make bench`` cannot rot
between full runs. No timing is asserted: the figures of a tiny run on a shared machine mean nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.scenarios import ALL

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent.parent
# Each scenario is bounded by its own smoke limit; this only stops a hung harness.
LIMIT_SECONDS = 660


@pytest.mark.timeout(LIMIT_SECONDS + 30)
def test_every_scenario_runs_and_reports_rows(amqp_url: str, database_url: str, tmp_path: Path) -> None:
    rows_path = tmp_path / "rows.json"
    env = {**os.environ, "AMQP_URL": amqp_url, "DATABASE_URL": database_url}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--output",
            str(tmp_path / "bench.md"),
            "--json",
            str(rows_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = json.loads(rows_path.read_text())
    by_scenario: dict[str, list[dict]] = {}
    for row in rows:
        by_scenario.setdefault(row["scenario_name"], []).append(row)
    assert sorted(by_scenario) == sorted(s.name for s in ALL)
    failed = [
        f"{r['key']}: {r['status']} {r['note']}"
        for r in rows
        if r["status"] != "ok" or r["done"] != r["total"] or not r["total"]
    ]
    assert not failed, "\n".join(failed) + "\n" + done.stderr[-4000:]
    assert "| scenario" in (tmp_path / "bench.md").read_text()

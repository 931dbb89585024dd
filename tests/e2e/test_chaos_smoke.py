"""``python -m bench.chaos --smoke --only kill``: the chaos suite's harness still runs end to end, and worker
processes SIGKILLed mid-run lose and duplicate nothing. The other scenarios (private brokers and databases
stopped, poison, a slow model) run in ``make chaos`` only: each starts and stops servers of its own, which
costs more than this suite's budget. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent.parent
LIMIT_SECONDS = 240


@pytest.mark.timeout(LIMIT_SECONDS + 30)
def test_workers_killed_mid_run_lose_and_duplicate_nothing(
    amqp_url: str, database_url: str, tmp_path: Path
) -> None:
    rows_path = tmp_path / "rows.json"
    env = {**os.environ, "AMQP_URL": amqp_url, "DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "bench.chaos", "--smoke", "--only", "kill", "--json", str(rows_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    [row] = json.loads(rows_path.read_text())
    assert row["failed"] is None, row
    assert row["tasks"] > 0 and (row["lost"], row["duplicates"]) == (0, 0), row
    assert any("SIGKILLed" in note for note in row["notes"]), row

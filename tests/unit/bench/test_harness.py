"""The benchmark harness's pure parts: if these rot, `make bench` would print wrong figures silently."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.infra import Context
from bench.memory import tree_pss_mb
from bench.report import OK, TIMED_OUT, Row, evaluate, format_table, results_table, targets_table
from bench.runner import Rows, Scenario, run_scenario
from bench.scenarios.large_store_pairs import abba
from bench.stats import ideal_seconds, peak_overlap, percentile, rate, ratio
from taskyard_devkit.procfs import process_tree


def test_percentile_interpolates_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 0) == 1 and percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_rates_and_ratios() -> None:
    assert rate(500, 2.0) == 250
    assert rate(10, 0) is None and rate(10, None) is None
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(3.0, 0) is None


def test_ideal_time_counts_waves() -> None:
    assert ideal_seconds(1000, 1.0, 500) == 2.0
    assert ideal_seconds(1001, 1.0, 500) == 3.0  # a partial last wave still takes a full call
    assert ideal_seconds(100, 1.0, 50) == 2.0
    assert ideal_seconds(1, 0.5, 100) == 0.5
    with pytest.raises(ValueError):
        ideal_seconds(10, 1.0, 0)


def test_peak_overlap() -> None:
    assert peak_overlap([]) == 0
    assert peak_overlap([(0, 1), (0, 1), (0.5, 2)]) == 3
    assert peak_overlap([(0, 1), (1, 2), (2, 3)]) == 1  # back to back is not overlapping


def test_format_table_aligns_columns_as_markdown() -> None:
    text = format_table(("a", "long header"), [["wide cell", "x"], ["y", "z"]])
    lines = text.splitlines()
    assert lines[0] == "| a         | long header |"
    assert lines[1] == "| --------- | ----------- |"
    assert lines[2] == "| wide cell | x           |"
    assert len({len(line) for line in lines}) == 1
    with pytest.raises(ValueError):
        format_table(("a", "b"), [["only one"]])


def _row(key: str, done: int, wall: float, **kw: object) -> Row:
    row = Row(key=key, scenario=key, config=key, total=done, done=done, wall_s=wall, status=OK)
    for name, value in kw.items():
        setattr(row, name, value)
    return row


def test_results_table_marks_timeouts() -> None:
    rows = [_row("broker", 1000, 0.5), Row("x", "x", "cfg", total=100, done=40, wall_s=2.0, status=TIMED_OUT)]
    text = results_table(rows)
    assert "2,000" in text  # 1000 / 0.5 s
    assert "40 / 100" in text and "TIMED OUT" in text


def test_targets_from_rows() -> None:
    io = _row("taskyard.io", 1000, 2.2)
    io.extra.update(window_s=2.2, ideal_s=2.0, peak_in_flight=500, peak_memory_mb=120)
    rows = [
        _row("broker", 10_000, 1.0),  # 10,000/s
        _row("celery.prefork.noop", 1000, 1.0),  # 1,000/s
        _row("celery.threads.noop", 500, 1.0),
        _row("taskyard.noop.explicit", 4000, 1.0),  # 4,000/s: 4x Celery's best, 0.4x the broker
        io,
        _row("submit.c8", 1200, 1.0, p99_ms=40.0),
        _row("submit.c64", 2000, 1.0, p99_ms=80.0),  # faster, but p99 too high to count
        _row("submit.streams.c32", 1500, 1.0, p99_ms=45.0),
    ]
    verdicts = {t.name: t for t in evaluate(rows)}
    celery = verdicts["taskyard e2e no-op throughput vs Celery's best no-op"]
    assert celery.met is True and celery.measured.startswith("4.00x")
    assert verdicts["I/O-bound completion time vs ideal"].met is True  # 1.10x
    assert verdicts["one worker process holding concurrent LLM calls"].met is True
    assert verdicts["that worker's peak memory (PSS of its processes, sampled)"].met is True
    submit = verdicts["submit path: req/s of one API process with p99 < 50 ms"]
    assert submit.met is True and "submit.streams.c32" in submit.measured
    streams = verdicts["submit path's p99 with event streams open"]
    assert streams.met is True and streams.measured.startswith("45.0 ms")
    assert verdicts["taskyard e2e no-op throughput vs broker limit"].met is True

    backlog, stream = _row("priority.backlog", 220, 20.0), _row("priority.stream", 400, 30.0)
    backlog.extra["p95_ratio"], stream.extra["low_share"] = 0.08, 0.30
    verdicts = {t.name: t for t in evaluate([*rows, backlog, stream])}
    ratio = verdicts["20 highs behind 200 lows: highs' p95 wait vs lows' (issue 15)"]
    assert ratio.met is True and ratio.measured == "8.00 %"
    assert verdicts["lows' share of the starts under a stream of highs (issue 15)"].met is False  # 30 %

    rows[3].status = TIMED_OUT  # a timed-out run never meets a target
    assert evaluate(rows)[0].met is False
    assert all(t.met is None for t in evaluate([]))
    assert "not measured" in targets_table(evaluate([]))


async def test_a_scenario_cut_off_keeps_its_partial_rows(tmp_path: Path) -> None:
    async def slow(ctx: Context, rows: Rows) -> None:
        row = rows.add("slow", "slow", "cfg", total=10)
        row.done = 3
        await asyncio.sleep(30)

    scenario = Scenario("slow", slow, timeout_s=30, quick_timeout_s=0.05)
    ctx = Context("amqp://unused", "postgresql://unused", quick=True, work_dir=tmp_path)
    rows = await run_scenario(scenario, ctx)
    assert [(r.done, r.status) for r in rows] == [(3, TIMED_OUT)]
    assert "scenario limit" in rows[0].note


def test_large_store_targets_read_the_pooled_rows_and_show_each_pair() -> None:
    rows = [
        _row("large.empty.submit.w1", 500, 5.0, p99_ms=100.0),
        _row("large.full.submit.w1", 500, 5.0, p99_ms=130.0),
        _row("large.full.submit.w2", 500, 5.0, p99_ms=110.0),
        _row("large.empty.submit.w2", 500, 5.0, p99_ms=120.0),
        _row("large.empty.submit", 1000, 10.0, p99_ms=115.0),
        _row("large.full.submit", 1000, 10.0, p99_ms=120.0),
        _row("large.empty.e2e.w1", 2000, 40.0),
        _row("large.full.e2e.w1", 2000, 44.0),
        _row("large.empty.e2e", 2000, 40.0),
        _row("large.full.e2e", 2000, 44.0),
    ]
    verdicts = {t.name: t for t in evaluate(rows)}
    submit = verdicts["submit p99 with the store full vs empty"]
    # The pooled p99s, 120 vs 115 ms: 1.04x, met, though pair 1 alone (1.30x) would not be.
    assert submit.met is True and submit.measured.startswith("1.04x")
    assert "windows 1.30x, 0.92x" in submit.measured
    e2e = verdicts["e2e no-op throughput with the store full vs empty"]
    assert e2e.met is True and e2e.measured.startswith("0.91x")
    assert "windows" not in e2e.measured  # one pair: no spread to show
    assert verdicts["submit p99 with retention removing vs not"].met is None  # not run

    rows[5].status = TIMED_OUT  # the pooled row cut short: no verdict can be met
    assert {t.name: t for t in evaluate(rows)}["submit p99 with the store full vs empty"].met is False


def test_paired_windows_alternate_abba() -> None:
    assert abba(3) == [(1, "empty"), (1, "full"), (2, "full"), (2, "empty"), (3, "empty"), (3, "full")]


def test_tree_memory_counts_the_children_of_a_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in process_tree(os.getpid())
        alone = tree_pss_mb(child.pid)
        together = tree_pss_mb(os.getpid())
        assert alone is not None and together is not None and together > alone
    finally:
        child.kill()
        child.wait()

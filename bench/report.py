"""Result rows, the one table, and the issue's targets judged from the rows (pure: unit-tested)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.stats import rate, ratio

OK = "ok"
TIMED_OUT = "timed out"


@dataclass
class Row:
    """One measurement. Scenarios fill it as they go, so a timed-out run still shows what it did."""

    key: str  # stable name the ratios refer to, e.g. "celery.threads.noop"
    scenario: str
    config: str
    total: int
    done: int = 0
    wall_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    status: str = "running"
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def per_s(self) -> float | None:
        return rate(self.done, self.wall_s)

    @property
    def ok(self) -> bool:
        return self.status == OK


def fmt(value: float | None, unit: str = "") -> str:
    """Compact figures: thousands separators for big numbers, 3 significant-ish digits for small ones."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text + unit


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table padded into columns, so the same text reads well in a terminal and in docs."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    separator = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(headers), separator, *(line(r) for r in rows)])


RESULT_HEADERS = (
    "scenario",
    "configuration",
    "done / N",
    "wall s",
    "per s",
    "p50 ms",
    "p99 ms",
    "status",
    "notes",
)


def results_table(rows: Sequence[Row]) -> str:
    return format_table(
        RESULT_HEADERS,
        [
            [
                r.scenario,
                r.config,
                f"{r.done:,} / {r.total:,}",
                fmt(r.wall_s),
                fmt(r.per_s),
                fmt(r.p50_ms),
                fmt(r.p99_ms),
                r.status.upper() if r.status == TIMED_OUT else r.status,
                r.note,
            ]
            for r in rows
        ],
    )


@dataclass
class Target:
    name: str
    goal: str
    measured: str
    met: bool | None  # None: not measured in this run


def _usable(row: Row | None) -> bool:
    return row is not None and row.per_s is not None


def _judge(row: Row | None, value: float | None, passes: bool) -> bool | None:
    if row is None or value is None:
        return None
    return passes and row.ok


def _suffix(row: Row | None) -> str:
    return "" if row is None or row.ok else f" ({row.status})"


def evaluate(rows: Sequence[Row]) -> list[Target]:
    """The issues' targets, as ratios of rows measured in the same run."""
    by_key = {r.key: r for r in rows}
    targets: list[Target] = []

    e2e = by_key.get("taskyard.noop.explicit")
    celery = [r for r in rows if r.key.startswith("celery.") and r.key.endswith(".noop") and _usable(r)]
    best = max(celery, key=lambda r: r.per_s or 0, default=None)
    value = ratio(e2e.per_s, best.per_s) if e2e and best else None
    targets.append(
        Target(
            "taskyard e2e no-op throughput vs Celery's best no-op",
            ">= 1.0x",
            f"{fmt(value)}x ({fmt(e2e.per_s if e2e else None)}/s vs {best.config if best else '-'} "
            f"{fmt(best.per_s if best else None)}/s){_suffix(e2e)}",
            _judge(e2e, value, value is not None and value >= 1.0),
        )
    )

    io = by_key.get("taskyard.io")
    window, ideal = (io.extra.get("window_s"), io.extra.get("ideal_s")) if io else (None, None)
    value = ratio(window, ideal)
    targets.append(
        Target(
            "I/O-bound completion time vs ideal",
            "<= 1.15x",
            f"{fmt(value)}x ({fmt(window)} s vs {fmt(ideal)} s){_suffix(io)}",
            _judge(io, value, value is not None and value <= 1.15),
        )
    )
    peak = io.extra.get("peak_in_flight") if io else None
    targets.append(
        Target(
            "one worker process holding concurrent LLM calls",
            ">= 500",
            f"{fmt(peak)} at once{_suffix(io)}",
            _judge(io, peak, peak is not None and peak >= 500),
        )
    )
    rss = io.extra.get("peak_memory_mb") if io else None
    targets.append(
        Target(
            "that worker's peak memory (PSS of its processes, sampled)",
            "<= 250 MB",
            f"{fmt(rss)} MB{_suffix(io)}",
            _judge(io, rss, rss is not None and rss <= 250),
        )
    )

    limited = by_key.get("taskyard.io.limited")
    with_limits = limited.extra.get("window_s") if limited else None
    value = ratio(with_limits, window)
    targets.append(
        Target(
            "I/O-bound with fleet-wide LLM limits (not binding) vs without",
            "<= 1.10x",
            f"{fmt(value)}x ({fmt(with_limits)} s vs {fmt(window)} s){_suffix(limited)}",
            _judge(limited, value, value is not None and value <= 1.10 and io is not None and io.ok),
        )
    )

    submit = [r for r in rows if r.key.startswith("submit.") and _usable(r)]
    fast = [r for r in submit if r.p99_ms is not None and r.p99_ms < 50]
    top = max(fast, key=lambda r: r.per_s or 0, default=None)
    targets.append(
        Target(
            "submit path: req/s of one API process with p99 < 50 ms",
            ">= 1,000/s",
            f"{fmt(top.per_s)}/s at {top.config}" if top else "no level kept p99 < 50 ms" if submit else "-",
            None if not submit else bool(top and (top.per_s or 0) >= 1000),
        )
    )

    streams = next((r for r in rows if r.key.startswith("submit.streams.")), None)
    p99 = streams.p99_ms if streams else None
    targets.append(
        Target(
            "submit path's p99 with event streams open",
            "< 50 ms",
            f"{fmt(p99)} ms at {streams.config}{_suffix(streams)}" if streams else "-",
            _judge(streams, p99, p99 is not None and p99 < 50),
        )
    )

    targets += _large_store(by_key)

    broker = by_key.get("broker")
    value = ratio(e2e.per_s if e2e else None, broker.per_s if broker else None)
    targets.append(
        Target(
            "taskyard e2e no-op throughput vs broker limit",
            ">= 0.30x",
            f"{fmt(value)}x ({fmt(e2e.per_s if e2e else None)}/s vs {fmt(broker.per_s if broker else None)}"
            f" msgs/s){_suffix(e2e)}",
            _judge(e2e, value, value is not None and value >= 0.30 and broker is not None and broker.ok),
        )
    )
    targets.extend(_priority_targets(by_key))
    return targets


def _priority_targets(by_key: dict[str, Row]) -> list[Target]:
    """Issue 15's priority targets (the ``priority`` scenario)."""
    backlog, stream = by_key.get("priority.backlog"), by_key.get("priority.stream")
    ratio_ = backlog.extra.get("p95_ratio") if backlog else None
    share = stream.extra.get("low_share") if stream else None
    return [
        Target(
            "20 highs behind 200 lows: highs' p95 wait vs lows' (issue 15)",
            "< 10 %",
            f"{fmt(100 * ratio_ if ratio_ is not None else None)} %{_suffix(backlog)}",
            _judge(backlog, ratio_, ratio_ is not None and ratio_ < 0.10),
        ),
        Target(
            "lows' share of the starts under a stream of highs (issue 15)",
            "about 10 % (6:3:1)",
            f"{fmt(100 * share if share is not None else None)} %{_suffix(stream)}",
            _judge(stream, share, share is not None and 0.05 <= share <= 0.20),
        ),
    ]


def _rounds(by_key: dict[str, Row], key: str) -> list[Row]:
    """Row ``large.<phase>.<figure>`` and its later rounds (``...<figure>.r2``, ``.r3``...), those present."""
    found = [by_key[key]] if key in by_key else []
    n = 2
    while f"{key}.r{n}" in by_key:
        found.append(by_key[f"{key}.r{n}"])
        n += 1
    return found


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _windows(by_key: dict[str, Row], key: str) -> dict[int, Row]:
    """Row ``key``'s paired windows (``<key>.w1``, ``.w2``...), by number."""
    prefix = f"{key}.w"
    return {
        int(k[len(prefix) :]): r
        for k, r in by_key.items()
        if k.startswith(prefix) and k[len(prefix) :].isdigit()
    }


def _window_spread(by_key: dict[str, Row], base_key: str, key: str, figure: str) -> str:
    """ "; windows 1.02x, 0.97x, ...": each pair's own ratio, where both sides measured paired windows."""
    bases, measured = _windows(by_key, base_key), _windows(by_key, key)
    if len(measured) < 2 or bases.keys() != measured.keys():
        return ""
    per_pair = [
        ratio(
            measured[n].p99_ms if figure == "p99" else measured[n].per_s,
            bases[n].p99_ms if figure == "p99" else bases[n].per_s,
        )
        for n in sorted(bases)
    ]
    return "; windows " + ", ".join(f"{fmt(v)}x" for v in per_pair)


def _large_store(by_key: dict[str, Row]) -> list[Target]:
    """Issue 19: the submit path and the pipeline with millions of tasks stored, and while retention runs.
    Each side's row pools its paired windows (bench/scenarios/large_store_pairs.py); an older run's rounds
    (``.r2``...) are averaged."""
    targets = []
    pairs = (
        ("submit p99 with the store full vs empty", "large.empty.submit", "large.full.submit", "p99"),
        ("e2e no-op throughput with the store full vs empty", "large.empty.e2e", "large.full.e2e", "per_s"),
        ("submit p99 with retention removing vs not", "large.full.submit", "large.retention.submit", "p99"),
    )
    for name, base_key, key, figure in pairs:
        bases = _rounds(by_key, base_key)
        if key == "large.retention.submit":
            bases = bases[-1:]  # the full store's last round, on the same cluster just before
        measured = _rounds(by_key, key)
        row = measured[-1] if measured else None
        if figure == "p99":
            a, b = _mean([r.p99_ms for r in bases]), _mean([r.p99_ms for r in measured])
            value, goal, unit = ratio(b, a), "<= 1.10x", "ms"
            met = value is not None and value <= 1.10
        else:
            a, b = _mean([r.per_s for r in bases]), _mean([r.per_s for r in measured])
            value, goal, unit = ratio(b, a), ">= 0.90x", "/s"
            met = value is not None and value >= 0.90
        both_ok = bool(bases) and all(r.ok for r in bases) and all(r.ok for r in measured)
        spread = _window_spread(by_key, base_key, key, figure)
        targets.append(
            Target(
                name,
                goal,
                f"{fmt(value)}x ({fmt(b)} {unit} vs {fmt(a)} {unit}{spread}){_suffix(row)}",
                _judge(row, value, met and both_ok),
            )
        )
    return targets


def targets_table(targets: Sequence[Target]) -> str:
    verdict = {True: "met", False: "NOT met", None: "not measured"}
    return format_table(
        ("target", "goal", "measured", "verdict"),
        [[t.name, t.goal, t.measured if t.met is not None else "-", verdict[t.met]] for t in targets],
    )

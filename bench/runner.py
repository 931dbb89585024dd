"""Running scenarios under a hard time limit, keeping what a timed-out scenario managed to measure."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bench.infra import Context
from bench.report import OK, TIMED_OUT, Row

log = logging.getLogger("bench")


class Rows(list[Row]):
    """The rows one scenario produces; ``add`` makes a row that shows up even if the scenario is cut off."""

    def add(self, key: str, scenario: str, config: str, total: int) -> Row:
        row = Row(key=key, scenario=scenario, config=config, total=total)
        self.append(row)
        return row


ScenarioFn = Callable[[Context, Rows], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str  # what --only takes
    run: ScenarioFn
    timeout_s: float  # hard limit of the full run
    quick_timeout_s: float
    describe: str = ""
    smoke_timeout_s: float = 60
    tags: tuple[str, ...] = field(default=())


@asynccontextmanager
async def bounded(row: Row, seconds: float) -> AsyncIterator[None]:
    """Give one measurement its own time limit: on expiry the row says "timed out" and the scenario goes on."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        row.status = TIMED_OUT
        row.note = (row.note + "; " if row.note else "") + f"limit {seconds:.0f} s"


def finish(row: Row) -> None:
    if row.status == "running":
        row.status = OK


async def run_scenario(scenario: Scenario, ctx: Context) -> Rows:
    rows = Rows()
    limit = ctx.pick(scenario.timeout_s, scenario.quick_timeout_s, scenario.smoke_timeout_s)
    started = time.monotonic()
    log.info("scenario %s: start (limit %.0f s)", scenario.name, limit)
    try:
        async with asyncio.timeout(limit):
            await scenario.run(ctx, rows)
    except TimeoutError:
        for row in rows:
            if row.status == "running":
                row.status = TIMED_OUT
                row.note = (row.note + "; " if row.note else "") + f"scenario limit {limit:.0f} s"
        if not rows:
            rows.add(scenario.name, scenario.name, "-", 0).status = TIMED_OUT
    except Exception as exc:
        log.exception("scenario %s failed", scenario.name)
        for row in rows:
            if row.status == "running":
                row.status = f"error: {type(exc).__name__}"
        if not rows or all(r.status == OK for r in rows):
            rows.add(scenario.name, scenario.name, "-", 0).status = f"error: {type(exc).__name__}: {exc}"[
                :120
            ]
    log.info("scenario %s: done in %.1f s", scenario.name, time.monotonic() - started)
    return rows

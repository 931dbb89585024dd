"""``taskyard usage``: what the tenant's tasks spent on LLM calls (tasks, tokens, USD), grouped."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from taskyard_client.cli.common import JsonOption, endpoint
from taskyard_client.cli.output import print_json, reporting_errors, safe, stdout, table
from taskyard_client.models import UsageFigures


class GroupBy(StrEnum):
    SPECIALIST = "specialist"
    MODEL = "model"
    DAY = "day"


def _row(label: str, figures: UsageFigures) -> list[object]:
    return [label, figures.tasks, figures.prompt_tokens, figures.completion_tokens, figures.routing_tokens,
            figures.total_tokens, f"{figures.cost:.6f}"]  # fmt: skip


def usage(
    ctx: typer.Context,
    start: Annotated[
        str | None,
        typer.Option("--from", help="Tasks created from then (ISO 8601; default: this UTC month's start)"),
    ] = None,
    end: Annotated[
        str | None, typer.Option("--to", help="Tasks created before then (ISO 8601; default: now)")
    ] = None,
    group_by: Annotated[GroupBy | None, typer.Option("--group-by", help="specialist, model or day")] = None,
    json_mode: JsonOption = False,
) -> None:
    """Show the tenant's LLM spend: tasks, tokens and cost in USD (GET /v1/usage)."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        report = client.usage(start=start, end=end, group_by=group_by.value if group_by else None)
    if json_mode:
        print_json(report.model_dump(mode="json", by_alias=True))
        return
    out = stdout()
    out.print(safe(f"from {report.from_.isoformat()} to {report.to.isoformat()}", "dim"))
    rows = table(group_by.value if group_by else "", "tasks", "prompt", "completion", "routing", "total",
                 rest="cost (USD)")  # fmt: skip
    for figures in report.groups:
        rows.add_row(*(safe(v) for v in _row(figures.key if figures.key is not None else "-", figures)))
    rows.add_row(*(safe(v, "bold") for v in _row("total", report.total)))
    out.print(rows)


def register(app: typer.Typer) -> None:
    app.command()(usage)

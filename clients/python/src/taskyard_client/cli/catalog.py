"""``taskyard specialists``: what a task may be routed to (or sent to with ``--specialist``)."""

from __future__ import annotations

import typer

from taskyard_client.cli.common import JsonOption, endpoint
from taskyard_client.cli.output import print_json, reporting_errors, safe, stdout, table


def specialists(ctx: typer.Context, json_mode: JsonOption = False) -> None:
    """List the specialists of the catalog."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        found = client.specialists()
    if json_mode:
        print_json(found)
        return
    rows = table("name", "tools", "steps", "timeout", "concurrency", rest="description", fold=True)
    for spec in found:
        rows.add_row(
            safe(spec.name, "bold"),
            safe(", ".join(spec.tools) or "-"),
            safe(spec.max_steps),
            safe(f"{spec.timeout_seconds:g} s"),
            safe(spec.concurrency),
            safe(" ".join(spec.description.split())),
        )
    stdout().print(rows)


def register(app: typer.Typer) -> None:
    app.command()(specialists)

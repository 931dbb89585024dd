"""``taskyard dead-letters list|replay|discard``: the tasks whose message the broker gave up on (admin
keys only). Replay and discard take several ids: each is tried, the exit code is 1 if any was refused."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taskyard_client.cli.common import JsonOption, endpoint
from taskyard_client.cli.output import ERROR, print_json, reporting_errors, safe, stderr, stdout, table
from taskyard_client.errors import ApiError

app = typer.Typer(help="List, replay or discard dead letters (admin keys only).", no_args_is_help=True)

IdsArgument = Annotated[list[str], typer.Argument(help="Task ids of open dead letters")]


@app.command("list")
def list_dead_letters(
    ctx: typer.Context,
    specialist: Annotated[
        str | None, typer.Option("--specialist", "-s", help="Only this specialist's")
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="delivery_limit, rejected, expired or maxlen")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many")] = 50,
    json_mode: JsonOption = False,
) -> None:
    """List open dead letters, most recent first."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        found = []
        for letter in client.dead_letters(specialist=specialist, reason=reason, page_size=min(limit, 200)):
            found.append(letter)
            if len(found) >= limit:
                break
    if json_mode:
        print_json(found)
        return
    rows = table("recorded", "task", "specialist", "reason", "deaths", rest="queue")
    for letter in found:
        rows.add_row(
            safe(f"{letter.recorded_at:%m-%d %H:%M:%S}"),
            safe(letter.task_id),
            safe(letter.specialist or "(intake)"),
            safe(letter.reason),
            safe(len(letter.deaths)),
            safe(letter.queue),
        )
    stdout().print(rows)
    if not found:
        stderr().print(safe("no open dead letters"))


def _each(ctx: typer.Context, ids: list[str], json_mode: bool, action: str, **options: Any) -> None:
    outcomes: list[dict[str, Any]] = []
    refused = False
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        for task_id in ids:
            try:
                if action == "replay":
                    task = client.replay(task_id, **options)
                    outcomes.append({"task_id": task_id, "replayed": True, "task": task})
                    line = f"{task_id} replayed: {task.status}"
                else:
                    client.discard(task_id)
                    outcomes.append({"task_id": task_id, "discarded": True})
                    line = f"{task_id} discarded"
            except ApiError as exc:
                refused = True
                outcomes.append({"task_id": task_id, "error": exc.problem})
                stderr().print(safe(f"{task_id}: {exc}", "red"))
                continue
            if not json_mode:
                stdout().print(safe(line))
    if json_mode:
        print_json(outcomes)
    if refused:
        raise typer.Exit(ERROR)


@app.command()
def replay(
    ctx: typer.Context,
    task_ids: IdsArgument,
    specialist: Annotated[
        str | None, typer.Option("--specialist", "-s", help="Run it on this one instead")
    ] = None,
    from_scratch: Annotated[
        bool, typer.Option("--from-scratch", help="Drop its step checkpoints first")
    ] = False,
    json_mode: JsonOption = False,
) -> None:
    """Run dead-lettered tasks again (attempts reset)."""
    _each(ctx, task_ids, json_mode, "replay", specialist=specialist, from_scratch=from_scratch)


@app.command()
def discard(ctx: typer.Context, task_ids: IdsArgument, json_mode: JsonOption = False) -> None:
    """Close dead letters without running them (the tasks stay dead_lettered)."""
    _each(ctx, task_ids, json_mode, "discard")

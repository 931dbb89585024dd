"""The task commands: submit (and follow), status, result, watch, cancel, list."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from taskyard_client.cli.common import JsonOption, endpoint
from taskyard_client.cli.live import follow
from taskyard_client.cli.output import (
    NOT_FINISHED,
    USAGE,
    exit_code,
    fail,
    print_answer,
    print_json,
    reporting_errors,
    safe,
    stderr,
    stdout,
    table,
)
from taskyard_client.errors import Conflict
from taskyard_client.models import Task

TimeoutOption = Annotated[
    float | None, typer.Option("--timeout", min=0.1, help="Stop following after this many seconds (exit 6)")
]


def _read_input(text: str | None, file: Path | None) -> str | dict[str, Any]:
    if (text is None) == (file is None):
        fail("give the task as TEXT or --file F (one of them)", USAGE)
    if text is not None:
        return text
    assert file is not None
    raw = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    if file.suffix == ".json":
        document = json.loads(raw)
        if not isinstance(document, dict):
            fail(f"{file} must hold a JSON object to be sent as a structured input", USAGE)
        return document
    return raw


def _metadata(pairs: list[str]) -> dict[str, str]:
    metadata = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--metadata takes KEY=VALUE, not {pair!r}", USAGE)
        metadata[key] = value
    return metadata


def _summary(task: Task) -> None:
    out = stdout()
    out.print(safe(f"{task.id}  {task.status}"))
    fields = [
        ("specialist", task.specialist),
        (
            "routing",
            task.routing and f"{task.routing.method} ({task.routing.confidence:.2f}): {task.routing.reason}",
        ),
        ("attempts", task.attempts),
        ("priority", task.priority if task.priority != "normal" else None),
        ("not before", task.not_before),
        ("created", task.created_at),
        ("finished", task.finished_at),
        ("tokens", task.usage.total_tokens or None),
        ("error", task.error and f"{task.error.type}: {task.error.message}"),
        ("dead letter", task.dead_letter and f"{task.dead_letter.reason} in {task.dead_letter.queue}"),
    ]
    for name, value in fields:
        if value is not None:
            out.print(safe(f"  {name:<11} {value}"))
    if task.output is not None:
        out.print(safe("  answer"))
        out.print(safe(task.output))


async def _follow_to_end(
    ctx: typer.Context, task_id: str, *, timeout: float | None, json_mode: bool, lines: bool
) -> int:
    async with endpoint(ctx).async_client() as client:
        task = await follow(
            client,
            task_id,
            console=stderr(),
            timeout=timeout,
            json_lines=lines,
            quiet=json_mode and not lines,
        )
    if task is None:
        stderr().print(safe(f"still running after {timeout:g} s: taskyard watch {task_id}"))
        return NOT_FINISHED
    if json_mode and not lines:
        print_json(task)
    elif not json_mode:
        if task.output is not None:
            print_answer(task.output)
        elif task.result is not None:
            print_json(task.result)
    return exit_code(task.status)


def submit(
    ctx: typer.Context,
    text: Annotated[str | None, typer.Argument(help="The task's text")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Read the task from a file ('-': stdin; .json: an object)"),
    ] = None,
    specialist: Annotated[
        str | None, typer.Option("--specialist", "-s", help="Skip routing: run on this one")
    ] = None,
    metadata: Annotated[
        list[str] | None, typer.Option("--metadata", "-m", help="KEY=VALUE label (repeatable)")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", "-w", help="Follow it live to its end; print the answer")
    ] = False,
    timeout: TimeoutOption = None,
    priority: Annotated[
        str | None, typer.Option("--priority", help="high, normal or low (default: normal)")
    ] = None,
    not_before: Annotated[
        str | None, typer.Option("--not-before", help="RFC 3339 time: stays scheduled until then")
    ] = None,
    task_timeout: Annotated[
        float | None, typer.Option("--task-timeout", help="The task's own run time per attempt (seconds)")
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Default: a new one, reused on retries")
    ] = None,
    json_mode: JsonOption = False,
) -> None:
    """Submit a task; with --wait, follow it live and print its answer (exit code by its final status)."""
    task_input = _read_input(text, file)
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        task = client.submit(
            task_input,
            specialist=specialist,
            metadata=_metadata(metadata or []),
            timeout_seconds=task_timeout,
            idempotency_key=idempotency_key,
            priority=priority,
            not_before=not_before,
        )
        if not wait:
            print_json(task) if json_mode else stdout().print(safe(str(task.id)))
            return
        if not json_mode:
            stderr().print(safe(f"submitted {task.id}"))
        code = asyncio.run(
            _follow_to_end(ctx, str(task.id), timeout=timeout, json_mode=json_mode, lines=False)
        )
    raise typer.Exit(code)


def watch(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task's id")],
    timeout: TimeoutOption = None,
    json_mode: Annotated[bool, typer.Option("--json", help="Print each event as a JSON line")] = False,
) -> None:
    """Follow a task live from its first event to its end; print its answer (exit code by final status)."""
    with reporting_errors(json_mode):
        code = asyncio.run(
            _follow_to_end(ctx, task_id, timeout=timeout, json_mode=json_mode, lines=json_mode)
        )
    raise typer.Exit(code)


def status(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task's id")],
    json_mode: JsonOption = False,
) -> None:
    """Show a task: status, routing, attempts, tokens, error or answer."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        task = client.get(task_id)
    print_json(task) if json_mode else _summary(task)


def result(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task's id")],
    json_mode: JsonOption = False,
) -> None:
    """Print a completed task's answer; exit 3-6 (as the task ended, or 6: not finished) otherwise."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        try:
            found = client.result(task_id)
        except Conflict as exc:
            task_status = exc.problem.task_status or "unknown"
            if json_mode:
                print_json({"error": exc.problem})
            stderr().print(safe(f"no result: the task is {task_status}", "yellow"))
            raise typer.Exit(exit_code(task_status)) from None
    if json_mode:
        print_json(found)
    elif found.output is not None:
        print_answer(found.output)
    else:
        print_json(found.result)


def cancel(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task's id")],
    json_mode: JsonOption = False,
) -> None:
    """Cancel a task: at once if it has not started, else its worker stops it."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        task = client.cancel(task_id)
    if json_mode:
        print_json(task)
    elif task.status == "cancelled":
        stdout().print(safe(f"{task.id} cancelled"))
    else:
        stdout().print(safe(f"{task.id} cancel requested: its worker stops it (taskyard watch {task.id})"))


def list_tasks(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help="Only tasks in this status")] = None,
    specialist: Annotated[
        str | None, typer.Option("--specialist", "-s", help="Only this specialist's")
    ] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="Only this priority's")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many")] = 20,
    json_mode: JsonOption = False,
) -> None:
    """List tasks, newest first."""
    with reporting_errors(json_mode), endpoint(ctx).client() as client:
        pages = client.list(
            status=status, specialist=specialist, priority=priority, page_size=min(limit, 200), limit=limit
        )
        found = list(pages)
    if json_mode:
        print_json(found)
        return
    rows = table("created", "id", "status", "specialist", "tokens", rest="input")
    for task in found:
        text = task.input if isinstance(task.input, str) else json.dumps(task.input, ensure_ascii=False)
        rows.add_row(
            safe(f"{task.created_at:%m-%d %H:%M:%S}"),
            safe(task.id),
            safe(task.status),
            safe(task.specialist or "-"),
            safe(task.usage.total_tokens),
            safe(" ".join(text.split())[:60]),
        )
    stdout().print(rows)


def register(app: typer.Typer) -> None:
    app.command()(submit)
    app.command()(status)
    app.command()(result)
    app.command()(watch)
    app.command()(cancel)
    app.command("list")(list_tasks)

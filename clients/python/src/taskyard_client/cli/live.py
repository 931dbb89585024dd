"""Following a task to its end from its event stream: a live view on a terminal (status, routing, steps,
tool calls, tokens, elapsed time and the answer as it is written), one line per event otherwise, or the
events themselves as JSON lines. All of it on stderr except JSON, so stdout carries only the answer."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager, nullcontext
from uuid import UUID

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from taskyard_client.async_client import AsyncClient
from taskyard_client.cli.output import print_json_line, safe
from taskyard_client.cli.watch_state import WatchState
from taskyard_client.models import Task

STATUS_STYLE = {
    "completed": "bold green",
    "failed": "bold red",
    "dead_lettered": "bold red",
    "cancelled": "bold yellow",
    "running": "bold cyan",
    "retrying": "bold magenta",
}
# The answer panel shows the end of the text: the part being written.
ANSWER_LINES = 16
REFRESH_SECONDS = 0.25


def render(state: WatchState, *, answer: bool = True) -> RenderableType:
    """The view; without ``answer`` its last frame, the answer going to stdout."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", justify="right")
    grid.add_column()
    status = safe(state.status.replace("_", "-"), STATUS_STYLE.get(state.status, "bold"))
    if state.cancel_requested and not state.finished:
        status.append(" (cancel requested)", style="yellow")
    grid.add_row("task", Text.assemble(safe(state.task_id), "  ", status))
    if state.specialist:
        grid.add_row(
            "routed", Text.assemble(safe(state.specialist, "bold"), "  ", safe(state.routing or "", "dim"))
        )
    progress = (
        f"attempt {state.attempt or '-'} · {state.steps} step(s) · {len(state.tool_calls)} tool call(s)"
    )
    grid.add_row("progress", safe(progress))
    grid.add_row("tokens", safe(f"{state.tokens}   elapsed {state.elapsed():.1f} s"))
    if state.tool_calls:
        calls = Text()
        for call in state.tool_calls[-6:]:
            calls.append_text(safe(f"{call.name}", "green" if call.ok else "red"))
            calls.append(" ✓  " if call.ok else " ✗  ")
        grid.add_row("tools", calls)
    if state.error:
        grid.add_row("error", safe(state.error, "red"))
    parts: list[RenderableType] = [grid]
    text = state.output if state.output is not None else state.answer.text
    if text and answer:
        lines = text.rstrip("\n").split("\n")[-ANSWER_LINES:]
        title = "answer" if state.output is not None else f"answer (writing step {state.answer.step})"
        parts.append(Panel(safe("\n".join(lines)), title=title, title_align="left", border_style="dim"))
    return Group(*parts)


async def follow(
    client: AsyncClient,
    task_id: UUID | str,
    *,
    console: Console,
    timeout: float | None,
    json_lines: bool = False,
    quiet: bool = False,
) -> Task | None:
    """Follow the task's events until its end and return its final document; None when ``timeout``
    seconds passed first. The view is live on a terminal, a line per event elsewhere; ``json_lines``
    prints each event on stdout instead; ``quiet`` shows nothing."""
    # A task accepted with a not_before ahead starts scheduled rather than pending.
    first = await client.get(task_id)
    state = WatchState(task_id=str(task_id), status="scheduled" if first.status == "scheduled" else "pending")
    live: Live | None = None
    if not (json_lines or quiet) and console.is_terminal:
        live = Live(render(state), console=console, auto_refresh=False, transient=True)
    view: AbstractContextManager[object] = live if live is not None else nullcontext()

    async def read() -> None:
        async for event in client.events(task_id):
            line = state.apply(event)
            if json_lines:
                print_json_line(event)
            elif live is not None:
                live.update(render(state), refresh=True)
            elif line is not None and not quiet:
                console.print(safe(line))

    async def tick() -> None:
        # The elapsed time moves between events too (refreshed from this loop: no thread reads the state).
        while live is not None:
            await asyncio.sleep(REFRESH_SECONDS)
            live.update(render(state), refresh=True)

    with view:
        ticker = asyncio.create_task(tick())
        try:
            async with asyncio.timeout(timeout):
                await read()
        except TimeoutError:
            return None
        finally:
            ticker.cancel()
    if live is not None:
        console.print(render(state, answer=False))  # the last frame stays; the answer goes to stdout
    return await client.get(task_id)

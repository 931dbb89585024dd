"""``taskyard``: submit tasks, follow them live, read results, manage dead letters.

The endpoint and key come from ``--url`` / ``--api-key``, else ``TASKYARD_URL`` / ``TASKYARD_API_KEY``,
else the profile (``--profile``, ``TASKYARD_PROFILE``, else ``default``) of the profile file (see
``taskyard_client.config``). Every command takes ``--json``. Exit codes: ``cli.output``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from taskyard_client.async_client import AsyncClient
from taskyard_client.cli import catalog, dead_letters, tasks, usage
from taskyard_client.client import Client
from taskyard_client.retry import RetryPolicy

HELP = """Submit taskyard tasks and follow them to their answer.

Endpoint and key: --url and --api-key, else TASKYARD_URL and TASKYARD_API_KEY, else a profile of ~/.config/taskyard/config.toml (TASKYARD_CONFIG names another file).

Exit codes: 0 completed (or done), 1 the API refused or was unreachable, 2 usage, 3 failed, 4 cancelled, 5 dead-lettered, 6 not finished (in time)."""

app = typer.Typer(
    name="taskyard",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# Someone is waiting at a terminal: give up on an unreachable API after a few seconds, not two minutes.
CLI_RETRY = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=10, max_total=20)


@dataclass(frozen=True)
class Endpoint:
    url: str | None
    api_key: str | None
    profile: str | None

    def client(self) -> Client:
        return Client(self.url, self.api_key, profile=self.profile, retry=CLI_RETRY)

    def async_client(self) -> AsyncClient:
        return AsyncClient(self.url, self.api_key, profile=self.profile, retry=CLI_RETRY)


@app.callback()
def options(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option("--url", help="The API's URL (default: TASKYARD_URL)")] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", help="API key (default: TASKYARD_API_KEY; prefer it or a profile: flags show in ps)"
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Profile of the profile file (default: TASKYARD_PROFILE)")
    ] = None,
) -> None:
    ctx.obj = Endpoint(url, api_key, profile)


tasks.register(app)
app.add_typer(dead_letters.app, name="dead-letters")
catalog.register(app)
usage.register(app)


def main() -> None:
    app()

"""What every command shares: the ``--json`` option and the endpoint the top-level options chose."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from taskyard_client.cli.app import Endpoint

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of text")]


def endpoint(ctx: typer.Context) -> Endpoint:
    found: Endpoint = ctx.find_root().obj
    return found

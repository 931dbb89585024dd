"""``taskyard-migrate``: bring the task store's schema up to date (run it before starting the services)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import asyncpg
from pydantic import ValidationError

from taskyard_common.service import describe_invalid_settings, fail_config
from taskyard_common.settings import DbSettings
from taskyard_common.store.migrate import migrate

PROG = "taskyard-migrate"


async def _run(settings: DbSettings) -> list[str]:
    conn = await asyncpg.connect(settings.url.get_secret_value(), timeout=settings.command_timeout_seconds)
    try:
        return await migrate(conn, settings.db_schema)
    finally:
        await conn.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Apply taskyard's pending database migrations, each once, in order.",
        epilog="Connects to TASKYARD_DB_URL (or DATABASE_URL) and migrates the schema TASKYARD_DB_SCHEMA "
        "(default taskyard). Safe to run concurrently: an advisory lock serialises runners.",
    )
    parser.parse_args(argv)
    try:
        settings = DbSettings()
    except ValidationError as exc:
        fail_config(PROG, f"invalid configuration:\n{describe_invalid_settings(exc)}")
    try:
        applied = asyncio.run(_run(settings))
    except asyncpg.PostgresError as exc:
        # Server-side errors (authentication, missing database, failing SQL) name no URL or password.
        print(f"{PROG}: PostgreSQL refused: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    except (OSError, TimeoutError, asyncpg.InterfaceError, ValueError) as exc:
        # Only the kind: some client-side messages quote the connection string.
        print(f"{PROG}: cannot reach PostgreSQL: {type(exc).__name__}", file=sys.stderr)
        sys.exit(1)
    if applied:
        for name in applied:
            print(f"applied {name} to schema {settings.db_schema}")
    else:
        print(f"schema {settings.db_schema} is up to date")

"""Versioned SQL migrations: ``migrations/NNNN_name.sql`` applied in order, each once, in a transaction.

A PostgreSQL advisory lock serialises concurrent runners (several pods starting at once).
"""

from __future__ import annotations

import logging
import re
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x7461736B79617264  # "taskyard"


def migration_files() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) for every bundled migration, in version order."""
    found = []
    for entry in resources.files("taskyard_common.store.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text()))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return found


async def migrate(conn: asyncpg.Connection, schema: str) -> list[str]:
    """Bring ``schema`` up to date; returns the names of the migrations it applied."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            log.info("applied migration %s to schema %s", name, schema)
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied

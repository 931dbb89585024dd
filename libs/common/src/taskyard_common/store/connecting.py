"""What every taskyard connection pool is opened with, directly or through PgBouncer (``DbSettings.pooled``).

Directly, the schema is set per connection (``search_path`` in the startup packet). Through PgBouncer in
transaction mode that cannot work: PgBouncer refuses startup parameters it does not know, and a ``SET`` on
one server connection would not follow the client to the next. The schema then comes from the role's default
search path (``"$user", public``), so it must be named after the role; ``check_schema`` refuses to run on
any other, rather than read and write a schema nobody meant.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from taskyard_common.settings import DbSettings


def connection_options(db: DbSettings, application_name: str) -> dict[str, Any]:
    """asyncpg keyword arguments for ``create_pool``/``connect``: server settings and statement cache."""
    server_settings = {"application_name": application_name}
    if not db.pooled:
        server_settings["search_path"] = db.db_schema
    return {"server_settings": server_settings, "statement_cache_size": db.statement_cache_size}


class WrongSchema(RuntimeError):
    """Through PgBouncer, the role's default schema is not the configured one."""


async def check_schema(pool: asyncpg.Pool, db: DbSettings) -> None:
    """Through PgBouncer, the schema the role's search path finds must be ``db.db_schema``."""
    if not db.pooled:
        return
    found = await pool.fetchval("SELECT current_schema()")
    if found != db.db_schema:
        raise WrongSchema(
            f"TASKYARD_DB_POOLED is set, so the schema comes from the role's search path, which finds"
            f" {found!r}, not TASKYARD_DB_SCHEMA {db.db_schema!r}: name the schema after the database role"
            " (or set the role's search_path), or connect directly"
        )

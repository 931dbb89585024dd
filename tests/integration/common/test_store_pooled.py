"""Opening the store for PgBouncer (``TASKYARD_DB_POOLED``): no search_path in the startup packet, so the
schema comes from the role's search path, and a store that would find another schema refuses to open."""

from __future__ import annotations

import pytest

from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.connecting import WrongSchema, connection_options

pytestmark = pytest.mark.integration


def test_pooled_connections_send_no_search_path_and_keep_the_cache_setting() -> None:
    direct = DbSettings(db_schema="x_tasks")
    assert connection_options(direct, "taskyard") == {
        "server_settings": {"application_name": "taskyard", "search_path": "x_tasks"},
        "statement_cache_size": 100,
    }
    pooled = DbSettings(db_schema="x_tasks", pooled=True, statement_cache_size=0)
    assert connection_options(pooled, "taskyard") == {
        "server_settings": {"application_name": "taskyard"},
        "statement_cache_size": 0,
    }


async def test_a_pooled_store_refuses_a_schema_its_role_does_not_find(db_settings: DbSettings) -> None:
    pooled = db_settings.model_copy(update={"pooled": True})
    # The test's schema is not named after the role, so the role's search path does not find it.
    with pytest.raises(WrongSchema, match=db_settings.db_schema):
        await PostgresTaskStore.open(pooled)


async def test_a_store_without_a_statement_cache_still_works(db_settings: DbSettings) -> None:
    # What an older PgBouncer (< 1.21, or max_prepared_statements = 0) needs: no named prepared statements.
    store = await PostgresTaskStore.open(db_settings.model_copy(update={"statement_cache_size": 0}))
    try:
        await store.ping()
        assert await store.pool.fetchval("SELECT current_schema()") == db_settings.db_schema
    finally:
        await store.close()

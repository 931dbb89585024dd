"""``/v1/specialists`` changed through the API (``TASKYARD_CATALOG_SOURCE=database``): the store is seeded
from the catalog file, every change is validated as a whole catalog, and the list follows at once; with the
file source the catalog is read-only here."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard_common.catalog import Catalog
from taskyard_common.settings import CatalogSettings
from tests.integration.api.conftest import MakeSettings, assert_problem, serve

pytestmark = pytest.mark.integration

ENTRY = {"description": "Translates texts.", "instructions": "Translate.", "examples": ["Translate this"]}


async def _names(api) -> list[str]:
    return [item["name"] for item in (await api.get("/v1/specialists")).json()["items"]]


async def test_put_and_delete_with_the_database_source(
    make_settings: MakeSettings, catalog: Catalog, catalog_path: Path
):
    settings = make_settings().model_copy(
        update={"catalog": CatalogSettings(source="database", path=catalog_path, poll_seconds=0.2)}
    )
    async with serve(settings) as api:
        assert await _names(api) == catalog.names  # seeded from the file
        created = await api.put("/v1/specialists/translator", json=ENTRY)
        assert created.status_code == 201, created.text
        assert created.json()["name"] == "translator" and "instructions" not in created.json()
        assert await _names(api) == [*catalog.names, "translator"]  # this replica: at once
        replaced = await api.put("/v1/specialists/translator", json={**ENTRY, "max_steps": 3})
        assert replaced.status_code == 200 and replaced.json()["max_steps"] == 3

        body = assert_problem(
            await api.put(
                "/v1/specialists/translator", json={**ENTRY, "timeout_seconds": 10, "max_timeout_seconds": 5}
            ),
            422,
            "validation-error",
        )
        assert body["errors"]
        assert_problem(await api.put("/v1/specialists/translator", json={**ENTRY, "name": "x"}), 422)
        # A pattern that is not a regular expression is refused with the reason, and the entry stays as it was.
        bad_pattern = {**ENTRY, "tools": ["calculator"], "require_tool_first_when": ["(unclosed"]}
        refused = assert_problem(await api.put("/v1/specialists/translator", json=bad_pattern), 422)
        assert "not a regular expression" in str(refused["errors"])
        kept = (await api.get("/v1/specialists")).json()["items"]
        assert next(i for i in kept if i["name"] == "translator")["max_steps"] == 3
        # So is an output_schema that cannot check an answer (here: a list's schema), naming why.
        bad_schema = {**ENTRY, "output_schema": {"type": "array"}}
        refused = assert_problem(await api.put("/v1/specialists/translator", json=bad_schema), 422)
        assert "must describe a JSON object" in str(refused["errors"])
        # A valid one is stored whole and read back as it was written.
        schema = {"type": "object", "properties": {"lang": {"enum": ["de", "fr"]}}, "required": ["lang"]}
        stored = await api.put(
            "/v1/specialists/translator", json={**ENTRY, "max_steps": 3, "output_schema": schema}
        )
        assert stored.status_code == 200, stored.text
        kept = (await api.get("/v1/specialists")).json()["items"]
        assert next(i for i in kept if i["name"] == "translator")["output_schema"] == schema
        assert_problem(await api.put("/v1/specialists/translator", json={"description": "D."}), 422)
        assert_problem(await api.put("/v1/specialists/Not_A_Name", json=ENTRY), 422)
        assert_problem(
            await api.put(
                "/v1/specialists/translator", content=b"[", headers={"content-type": "application/json"}
            ),
            422,
        )

        assert_problem(await api.delete(f"/v1/specialists/{catalog.fallback}"), 409, "catalog-conflict")
        assert (await api.delete("/v1/specialists/translator")).status_code == 204
        assert_problem(await api.delete("/v1/specialists/translator"), 404, "not-found")
        assert await _names(api) == catalog.names

    # Stored, not seeded again: a second start reads what the API changed.
    async with serve(settings) as api:
        assert (await api.put("/v1/specialists/translator", json=ENTRY)).status_code == 201
    async with serve(settings) as api:
        assert await _names(api) == [*catalog.names, "translator"]


async def test_the_file_source_is_read_only_here(client):
    assert_problem(await client.put("/v1/specialists/translator", json=ENTRY), 409, "catalog-read-only")
    assert_problem(await client.delete("/v1/specialists/general"), 409, "catalog-read-only")

"""``GET /v1/limits``: the catalog models' fleet-wide limits and what their shared buckets hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard_common.catalog import Catalog
from taskyard_common.llm_limits import LlmLimits
from taskyard_common.model_specs import ModelSpec
from taskyard_common.settings import CatalogSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.rate_limits import RateLimitStore
from tests.integration.api.conftest import MakeSettings, serve
from tests.support.catalogs import write_catalog

pytestmark = pytest.mark.integration


async def test_the_buckets_show_what_the_fleet_reserved(
    make_settings: MakeSettings, store: PostgresTaskStore, catalog: Catalog, tmp_path: Path
):
    models = (
        ModelSpec(name="big", rpm=6, tpm=12, max_concurrent=8),
        ModelSpec(name="free", input_price_per_mtok=1.0),
    )
    path = write_catalog(catalog, tmp_path, models=models)
    settings = make_settings().model_copy(update={"catalog": CatalogSettings(path=path)})
    async with serve(settings) as api:
        # A worker's share of one call: a request and its estimated tokens, from the shared buckets.
        limits = LlmLimits(RateLimitStore(store.pool), {m.name: m for m in models})
        await limits.reserve("big", {"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 100})
        document = (await api.get("/v1/limits")).json()
    [big] = document["models"]
    assert (big["model"], big["rpm"], big["tpm"], big["max_concurrent"]) == ("big", 6, 12, 8)
    requests, tokens = big["requests"], big["tokens"]
    # A second's worth, at least one; a call's estimate is capped at the tokens bucket's size.
    assert (requests["per_minute"], requests["burst"]) == (6, 1)
    assert (tokens["per_minute"], tokens["burst"]) == (12, 1)
    # Taken out moments ago, and slow to come back (one every 10 s and 5 s).
    assert requests["available"] < 1 and tokens["available"] < 1

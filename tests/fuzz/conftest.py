"""The API as a real process, as in the end-to-end suite: fuzzers talk to it over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from taskyard_common.settings import AmqpSettings, DbSettings
from tests.support.cluster import Cluster
from tests.support.devllm import DevLlm


@pytest.fixture
async def cluster(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, devllm: DevLlm, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """An empty cluster: each test starts what it needs; everything is stopped (SIGTERM) afterwards."""
    cluster = Cluster(amqp_settings, db_settings, catalog_path, devllm, tmp_path)
    try:
        yield cluster
    finally:
        unclean = cluster.stop_all()
        print(cluster.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"

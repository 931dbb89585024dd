"""The whole system as real processes, started from the console scripts users run."""

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
    """An empty cluster: each test starts the processes it needs; all are stopped (SIGTERM) afterwards."""
    cluster = Cluster(amqp_settings, db_settings, catalog_path, devllm, tmp_path)
    try:
        yield cluster
    finally:
        unclean = cluster.stop_all()
        # Captured output is shown only when the test fails: then the services' logs say why.
        print(cluster.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"

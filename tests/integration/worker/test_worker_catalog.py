"""A worker follows its own specialist in the catalog, in-process (``follow_catalog``): deleted, it stops
consuming and waits; back, it consumes again; another specialist's change leaves it alone."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import aio_pika
import aiormq
import pytest
import yaml

from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import FileSource, LiveCatalog
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology
from taskyard_worker.app import follow_catalog
from taskyard_worker.settings import ServiceSettings
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _write(path: Path, document: dict) -> None:
    staged = path.with_suffix(".tmp")
    staged.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.replace(staged, path)


async def test_a_deleted_specialists_worker_stops_consuming_until_it_is_back(
    make_settings: Callable[..., ServiceSettings],
    catalog: Catalog,
    amqp_settings: AmqpSettings,
    tmp_path: Path,
):
    path = tmp_path / "specialists.yaml"
    document = catalog.model_dump(mode="json", by_alias=True)
    _write(path, document)
    without = {**document, "fallback": "summarizer",
               "specialists": [s for s in document["specialists"] if s["name"] != "general"]}  # fmt: skip
    queue = Topology(amqp_settings.prefix).specialist_queue("general")
    connection = await aio_pika.connect(amqp_settings.url.get_secret_value())

    def consumers(expected: int) -> Callable[[], object]:
        async def check() -> bool:
            channel = await connection.channel()
            try:
                declared = await channel.declare_queue(queue, passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity:
                return False  # not declared yet (the refusal closed the channel)
            await channel.close()
            return declared.declaration_result.consumer_count == expected

        return check

    stop = asyncio.Event()
    async with LiveCatalog.open(FileSource(path, poll_seconds=0.05)) as live:
        worker = asyncio.create_task(follow_catalog(make_settings(catalog=path), "general", live, stop))
        try:
            await eventually(consumers(1), timeout=20, what="the worker consuming")
            version = live.version
            _write(path, without)
            await eventually(consumers(0), timeout=20, what="the worker to stop consuming")
            assert not worker.done() and live.version == version + 1
            _write(path, document)
            await eventually(consumers(1), timeout=20, what="the worker consuming again")
        finally:
            stop.set()
            await asyncio.wait_for(worker, 30)
            await connection.close()

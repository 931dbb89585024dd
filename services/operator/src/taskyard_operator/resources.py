"""The operator's connections, opened once at start (kopf's startup handler) and closed at cleanup."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg
from aio_pika.abc import AbstractRobustConnection

from taskyard_common.amqp import connect
from taskyard_common.broker_version import server_version
from taskyard_operator.kube import KubeClient
from taskyard_operator.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Resources:
    settings: Settings
    kube: KubeClient
    amqp: AbstractRobustConnection
    # The task store, read-only (running tasks, dead letters).
    db: asyncpg.Pool

    @classmethod
    async def open(cls, settings: Settings) -> Resources:
        kube = KubeClient.connect(settings.operator.kube_api_url, settings.operator.kube_timeout_seconds)
        try:
            amqp = await connect(settings.amqp, name="taskyard-operator")
            try:
                db = await asyncpg.create_pool(
                    settings.db.url.get_secret_value(),
                    min_size=0,
                    max_size=2,
                    command_timeout=settings.db.command_timeout_seconds,
                    timeout=settings.db.command_timeout_seconds,
                    # Its queries name the schema themselves; through PgBouncer the cache setting matters.
                    statement_cache_size=settings.db.statement_cache_size,
                    server_settings={"application_name": "taskyard-operator"},
                )
            except BaseException:
                await amqp.close()
                raise
        except BaseException:
            await kube.close()
            raise
        log.info("connected to RabbitMQ %s", ".".join(map(str, server_version(amqp))))
        return cls(settings=settings, kube=kube, amqp=amqp, db=db)

    async def close(self) -> None:
        try:
            await self.db.close()
        finally:
            try:
                await self.amqp.close()
            finally:
                await self.kube.close()

"""Settings for unit tests, built explicitly (never from the environment)."""

from pathlib import Path

from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_worker.settings import ServiceSettings, WorkerSettings


def service_settings(catalog_path: Path) -> ServiceSettings:
    return ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        llm=LlmSettings(),
        catalog=CatalogSettings(path=catalog_path),
        health=HealthSettings(port=0),
        log=LogSettings(),
        worker=WorkerSettings(),
    )

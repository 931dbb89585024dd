"""Every environment variable the chart sets is a setting some service reads (env_prefix + field name, or an
alias), for every values file: a renamed setting or a typo in the chart fails here."""

from __future__ import annotations

import pytest
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from taskyard_api.settings import ServiceSettings as ApiServiceSettings
from taskyard_broker_agent.settings import ServiceSettings as BrokerServiceSettings
from taskyard_worker.settings import ServiceSettings as WorkerServiceSettings
from tests.deploy.conftest import CI_VALUES, pod_specs, render, values_id

pytestmark = pytest.mark.deploy

SERVICES = {"api": ApiServiceSettings, "broker-agent": BrokerServiceSettings, "worker": WorkerServiceSettings,
            "migrate": ApiServiceSettings}  # fmt: skip
# Variables the chart sets only to compose another one with $(NAME) (the RabbitmqCluster's credentials), and
# libpq's PGPASSWORD, which asyncpg reads itself (the Pooler's URL carries no password).
HELPERS = {"RABBITMQ_USERNAME", "RABBITMQ_PASSWORD", "PGPASSWORD"}


def env_names(service_settings) -> set[str]:
    """The variable names a service's composed settings classes read."""
    names = set()
    for field in service_settings.model_fields.values():
        cls = field.annotation
        assert isinstance(cls, type) and issubclass(cls, BaseSettings)
        prefix = cls.model_config.get("env_prefix", "")
        for name, f in cls.model_fields.items():
            alias = f.validation_alias
            if isinstance(alias, AliasChoices):
                names |= {a for a in alias.choices if isinstance(a, str)}
            elif isinstance(alias, str):
                names.add(alias)
            else:
                names.add(f"{prefix}{name}".upper())
    return names


def test_introspection_finds_the_documented_names():
    assert {"TASKYARD_AMQP_URL", "TASKYARD_DB_SCHEMA", "TASKYARD_LOG_JSON", "TASKYARD_API_PORT"} <= env_names(
        ApiServiceSettings
    )
    assert {"TASKYARD_HEALTH_HOST", "TASKYARD_WORKER_HTTP_ALLOWLIST", "TASKYARD_LLM_API_KEY"} <= env_names(
        WorkerServiceSettings
    )


def _component(name: str) -> str | None:
    for component in ("broker-agent", "worker", "migrate", "api"):
        if f"-{component}" in name:
            return component
    return None


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["defaults", *map(values_id, CI_VALUES)])
def test_every_variable_the_chart_sets_is_read_by_its_service(values):
    checked = 0
    for name, spec in pod_specs(render(*([values] if values else []))):
        component = _component(name)
        if component is None:  # the development model server takes flags, not TASKYARD_* settings
            continue
        known = env_names(SERVICES[component]) | HELPERS
        for container in spec["containers"]:
            env = [e["name"] for e in container.get("env", [])]
            assert len(env) == len(set(env)), f"{name}: a variable set twice"
            unknown = set(env) - known
            assert not unknown, f"{name} sets variables {component} does not read: {sorted(unknown)}"
            checked += len(env)
    assert checked

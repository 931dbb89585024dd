"""The broker agent's settings: defaults, the TASKYARD_BROKER_ prefix, and when the LLM routes."""

import pytest

from taskyard_broker_agent.settings import BrokerAgentSettings, ServiceSettings
from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.webhooks import WebhookSettings


def service(llm: LlmSettings, broker: BrokerAgentSettings) -> ServiceSettings:
    return ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        llm=llm,
        catalog=CatalogSettings(),
        health=HealthSettings(),
        log=LogSettings(),
        broker=broker,
        webhook=WebhookSettings(),
    )


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch):
    for name in ("PREFETCH", "LLM_ROUTING", "MIN_CONFIDENCE"):
        monkeypatch.delenv(f"TASKYARD_BROKER_{name}", raising=False)
    defaults = BrokerAgentSettings()
    assert (defaults.prefetch, defaults.llm_routing, defaults.min_confidence) == (64, True, 0.0)
    monkeypatch.setenv("TASKYARD_BROKER_PREFETCH", "8")
    monkeypatch.setenv("TASKYARD_BROKER_LLM_ROUTING", "false")
    monkeypatch.setenv("TASKYARD_BROKER_MIN_CONFIDENCE", "0.4")
    configured = BrokerAgentSettings()
    assert (configured.prefetch, configured.llm_routing, configured.min_confidence) == (8, False, 0.4)
    monkeypatch.setenv("TASKYARD_BROKER_MIN_CONFIDENCE", "1.5")
    with pytest.raises(ValueError):
        BrokerAgentSettings()


def test_llm_routes_only_when_configured_and_allowed():
    endpoint = LlmSettings(base_url="http://llm.local/v1", api_key=None)
    nothing = LlmSettings(base_url=None, api_key=None)
    assert service(endpoint, BrokerAgentSettings(llm_routing=True)).llm_routing_enabled
    assert not service(endpoint, BrokerAgentSettings(llm_routing=False)).llm_routing_enabled
    assert not service(nothing, BrokerAgentSettings(llm_routing=True)).llm_routing_enabled


def test_bare_field_names_in_the_environment_are_ignored(monkeypatch: pytest.MonkeyPatch):
    # Variables set for other programs in the same container must not configure the broker agent.
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TASKYARD_LLM_BASE_URL", "TASKYARD_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("API_KEY", "sk-someone-else")
    monkeypatch.setenv("BASE_URL", "http://elsewhere/v1")
    monkeypatch.setenv("URL", "amqp://elsewhere/")
    assert not LlmSettings().enabled
    assert "elsewhere" not in AmqpSettings().url.get_secret_value()


def test_reliability_defaults_and_environment(monkeypatch: pytest.MonkeyPatch):
    names = (
        "MAX_ATTEMPTS",
        "RETRY_BASE_SECONDS",
        "RETRY_MAX_SECONDS",
        "DEAD_LETTER_PREFETCH",
        "REAPER_INTERVAL_SECONDS",
        "REPUBLISH_AFTER_SECONDS",
        "REAPER_RECOVERY_GRACE_SECONDS",
    )
    for name in names:
        monkeypatch.delenv(f"TASKYARD_BROKER_{name}", raising=False)
    defaults = BrokerAgentSettings()
    assert [getattr(defaults, name.lower()) for name in names] == [10, 1.0, 30.0, 32, 5.0, 60.0, 30.0]
    for name, value in zip(names, ("3", "0.5", "8", "4", "0.25", "2", "12"), strict=True):
        monkeypatch.setenv(f"TASKYARD_BROKER_{name}", value)
    configured = BrokerAgentSettings()
    assert [getattr(configured, name.lower()) for name in names] == [3, 0.5, 8.0, 4, 0.25, 2.0, 12.0]
    monkeypatch.setenv("TASKYARD_BROKER_MAX_ATTEMPTS", "0")
    with pytest.raises(ValueError):
        BrokerAgentSettings()

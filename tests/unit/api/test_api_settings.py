import pytest
from pydantic import ValidationError

from taskyard_api.settings import ApiSettings, ServiceSettings, get_settings
from taskyard_common.settings import AmqpSettings, CatalogSettings, DbSettings, LogSettings
from taskyard_common.webhooks import WebhookSettings


def test_api_settings_read_their_prefix(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TASKYARD_API_PORT", "9999")
    monkeypatch.setenv("TASKYARD_API_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("TASKYARD_API_SWEEPER_GRACE_SECONDS", "45")
    settings = ApiSettings()
    assert (settings.port, settings.max_body_bytes, settings.sweeper_grace_seconds) == (9999, 2048, 45)
    assert settings.host == "127.0.0.1" and settings.default_page_size == 50 and settings.max_page_size == 200


def test_get_settings_builds_once(monkeypatch: pytest.MonkeyPatch):
    get_settings.cache_clear()
    monkeypatch.setenv("TASKYARD_API_PORT", "8123")
    try:
        first = get_settings()
        monkeypatch.setenv("TASKYARD_API_PORT", "8124")
        assert get_settings() is first and first.api.port == 8123
    finally:
        get_settings.cache_clear()


def test_sweeper_grace_must_outlive_a_publish():
    parts = {
        "db": DbSettings(),
        "catalog": CatalogSettings(),
        "log": LogSettings(),
        "webhook": WebhookSettings(),
    }
    with pytest.raises(ValidationError, match="SWEEPER_GRACE"):
        ServiceSettings(
            amqp=AmqpSettings(publish_timeout_seconds=5), api=ApiSettings(sweeper_grace_seconds=5), **parts
        )
    ServiceSettings(
        amqp=AmqpSettings(publish_timeout_seconds=5), api=ApiSettings(sweeper_grace_seconds=6), **parts
    )


def test_default_page_must_fit_the_maximum():
    with pytest.raises(ValidationError, match="DEFAULT_PAGE_SIZE"):
        ApiSettings(default_page_size=100, max_page_size=20)

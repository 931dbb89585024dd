"""How a service process reports a bad configuration: names and reasons, never the values."""

import pytest
from pydantic import ValidationError

from taskyard_common.service import describe_invalid_settings
from taskyard_common.settings import AmqpSettings, DbSettings


def test_invalid_settings_are_described_without_their_values(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TASKYARD_DB_POOL_MAX_SIZE", "zero")
    monkeypatch.setenv("TASKYARD_AMQP_URL", "amqp://user:s3cret-password@host/")
    monkeypatch.setenv("TASKYARD_AMQP_PREFIX", "bad prefix with s3cret-password")
    errors = []
    for settings in (DbSettings, AmqpSettings):
        with pytest.raises(ValidationError) as caught:
            settings()
        errors.append(describe_invalid_settings(caught.value))
    text = "\n".join(errors)
    assert "pool_max_size" in text and "prefix" in text
    assert "s3cret" not in text and "zero" not in text

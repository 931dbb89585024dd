import pytest

from taskyard_common.settings import AmqpSettings, DbSettings, LlmSettings


def test_openai_variables_configure_the_llm(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.local/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = LlmSettings()
    assert settings.enabled
    assert settings.base_url == "http://llm.local/v1"
    assert "sk-test" not in repr(settings)


def test_taskyard_variables_win_over_generic_ones(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AMQP_URL", "amqp://generic/")
    monkeypatch.setenv("TASKYARD_AMQP_URL", "amqp://specific/")
    monkeypatch.delenv("TASKYARD_DB_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://generic/db")
    assert AmqpSettings().url.get_secret_value() == "amqp://specific/"
    assert DbSettings().url.get_secret_value() == "postgresql://generic/db"


def test_no_llm_configured_means_disabled(monkeypatch: pytest.MonkeyPatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TASKYARD_LLM_BASE_URL", "TASKYARD_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert not LlmSettings().enabled


def test_schema_name_is_validated():
    with pytest.raises(ValueError):
        DbSettings(db_schema='x"; DROP TABLE tasks; --')

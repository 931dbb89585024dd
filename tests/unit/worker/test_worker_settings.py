"""Worker settings from the environment, as the Helm chart sets them."""

import pytest
from pydantic import ValidationError

from taskyard_worker.settings import WorkerSettings, get_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HTTP_ALLOWLIST",
        "HTTP_MAX_BYTES",
        "HTTP_TIMEOUT_SECONDS",
        "SHUTDOWN_GRACE_SECONDS",
        "MAX_TOOL_OUTPUT_CHARS",
        "LEASE_SECONDS",
        "SETTLE_AFTER_SECONDS",
        "QUARANTINE",
        "SUPERVISOR",
        "QUARANTINE_CHILDREN",
        "MAIN_CHILDREN",
        "SPLIT_AFTER_CRASH",
        "SPLIT_CALM_SECONDS",
    ):
        monkeypatch.delenv(f"TASKYARD_WORKER_{name}", raising=False)
    settings = WorkerSettings()
    assert settings.http_allowlist == []
    assert settings.http_max_bytes == 200_000
    assert settings.http_timeout_seconds == 10
    assert settings.shutdown_grace_seconds == 30
    assert settings.max_tool_output_chars == 8000
    assert settings.lease_seconds == 30
    assert settings.settle_after_seconds == 600
    assert settings.quarantine is True
    assert settings.supervisor is True and settings.quarantine_children == 2
    assert settings.main_children == 1
    assert settings.split_after_crash == 4 and settings.split_calm_seconds == 300


@pytest.mark.parametrize(
    ("raw", "hosts"),
    [
        ("python.org", ["python.org"]),
        ("python.org, Docs.Example.COM ,127.0.0.1", ["python.org", "docs.example.com", "127.0.0.1"]),
        ("python.org,,", ["python.org"]),
        (".example.com.", [".example.com"]),
        ("python.org:8443", ["python.org:8443"]),
        ("", []),
        ('["python.org", "example.com"]', ["python.org", "example.com"]),
    ],
)
def test_allowlist_from_a_comma_separated_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str, hosts: list[str]
):
    monkeypatch.setenv("TASKYARD_WORKER_HTTP_ALLOWLIST", raw)
    assert WorkerSettings().http_allowlist == hosts


def test_numbers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_WORKER_HTTP_MAX_BYTES", "5000")
    monkeypatch.setenv("TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS", "2.5")
    monkeypatch.setenv("TASKYARD_WORKER_MAX_TOOL_OUTPUT_CHARS", "300")
    settings = WorkerSettings()
    assert (settings.http_max_bytes, settings.shutdown_grace_seconds, settings.max_tool_output_chars) == (
        5000,
        2.5,
        300,
    )


def test_reliability_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_WORKER_LEASE_SECONDS", "2")
    monkeypatch.setenv("TASKYARD_WORKER_SETTLE_AFTER_SECONDS", "120")
    monkeypatch.setenv("TASKYARD_WORKER_QUARANTINE", "false")
    settings = WorkerSettings()
    assert (settings.lease_seconds, settings.settle_after_seconds, settings.quarantine) == (2, 120, False)


@pytest.mark.parametrize("name", ["LEASE_SECONDS", "SETTLE_AFTER_SECONDS"])
def test_durations_must_be_positive(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(f"TASKYARD_WORKER_{name}", "0")
    with pytest.raises(ValidationError):
        WorkerSettings()


def test_get_settings_composes_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKYARD_WORKER_HTTP_ALLOWLIST", "example.com")
    monkeypatch.setenv("TASKYARD_LLM_MODEL", "some-model")
    monkeypatch.setenv("TASKYARD_HEALTH_PORT", "0")
    settings = get_settings()
    assert settings.worker.http_allowlist == ["example.com"]
    assert settings.llm.model == "some-model"
    assert settings.health.port == 0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAIN_CHILDREN", "0"),
        ("MAIN_CHILDREN", "65"),
        ("SPLIT_AFTER_CRASH", "0"),
        ("SPLIT_CALM_SECONDS", "0"),
    ],
)
def test_main_children_and_the_split_reject_values_out_of_range(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"TASKYARD_WORKER_{name}", value)
    with pytest.raises(ValidationError, match=name.lower()):
        WorkerSettings()

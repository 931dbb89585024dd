"""The command line without an API: help, usage errors, the SDK importable without the command line, and
an unreachable API as exit code 1 (the integration suite drives it against a real one)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from taskyard_client.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["submit"],
        ["status"],
        ["result"],
        ["watch"],
        ["cancel"],
        ["list"],
        ["specialists"],
        ["dead-letters"],
        ["dead-letters", "list"],
        ["dead-letters", "replay"],
        ["dead-letters", "discard"],
    ],
)
def test_every_command_has_help(command: list[str]):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    if command and command != ["dead-letters"]:
        assert "--json" in result.output


def test_usage_mistakes_exit_2():
    assert runner.invoke(app, ["submit"]).exit_code == 2, "neither TEXT nor --file"
    assert runner.invoke(app, ["submit", "x", "--file", "f"]).exit_code == 2
    assert runner.invoke(app, ["submit", "x", "--metadata", "novalue"]).exit_code == 2
    assert runner.invoke(app, ["nonsense"]).exit_code == 2


def test_an_unreachable_api_exits_1_with_a_message(tmp_path):
    env = {"TASKYARD_CONFIG": str(tmp_path / "none.toml")}
    result = runner.invoke(app, ["--url", "http://127.0.0.1:9", "specialists"], env=env)
    assert result.exit_code == 1
    assert "cannot reach the API" in result.output


def test_a_missing_profile_exits_2(tmp_path):
    result = runner.invoke(
        app, ["--profile", "prod", "list"], env={"TASKYARD_CONFIG": str(tmp_path / "none.toml")}
    )
    assert result.exit_code == 2 and "no profile file" in result.output


def test_the_sdk_does_not_import_the_command_line():
    # (rich may still come in: httpx imports it for its own command line when it is installed.)
    code = "import sys, taskyard_client; assert not {'typer', 'taskyard_client.cli'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)

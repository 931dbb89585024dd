"""Where the endpoint and the key come from: arguments, then the environment, then the profile file."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard_client.config import DEFAULT_URL, ConfigError, config_path, resolve

PROFILES = """
[default]
url = "http://profile.example:8000/"

[prod]
url = "https://prod.example"
api_key = "tyk_prod_secret"
"""


@pytest.fixture
def config(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text(PROFILES)
    return {"TASKYARD_CONFIG": str(path)}


def test_defaults_without_anything(tmp_path: Path):
    endpoint = resolve(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert (endpoint.url, endpoint.api_key) == (DEFAULT_URL, None)


def test_the_default_profile_then_environment_then_arguments(config: dict[str, str]):
    assert resolve(env=config).url == "http://profile.example:8000"
    env = {**config, "TASKYARD_URL": "http://env.example", "TASKYARD_API_KEY": "tyk_env"}
    assert (resolve(env=env).url, resolve(env=env).api_key) == ("http://env.example", "tyk_env")
    chosen = resolve("http://arg.example", "tyk_arg", env=env)
    assert (chosen.url, chosen.api_key) == ("http://arg.example", "tyk_arg")


def test_a_named_profile(config: dict[str, str]):
    for endpoint in (
        resolve(profile="prod", env=config),
        resolve(env={**config, "TASKYARD_PROFILE": "prod"}),
    ):
        assert (endpoint.url, endpoint.api_key) == ("https://prod.example", "tyk_prod_secret")


def test_naming_a_missing_profile_or_file_is_an_error(config: dict[str, str], tmp_path: Path):
    with pytest.raises(ConfigError, match=r"no profile \[staging\]"):
        resolve(profile="staging", env=config)
    with pytest.raises(ConfigError, match="no profile file"):
        resolve(profile="prod", env={"TASKYARD_CONFIG": str(tmp_path / "absent.toml")})
    broken = tmp_path / "broken.toml"
    broken.write_text("[default\nurl=")
    with pytest.raises(ConfigError, match="cannot read"):
        resolve(env={"TASKYARD_CONFIG": str(broken)})


def test_where_the_profile_file_is(tmp_path: Path):
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "taskyard" / "config.toml"
    assert config_path({}) == Path.home() / ".config" / "taskyard" / "config.toml"

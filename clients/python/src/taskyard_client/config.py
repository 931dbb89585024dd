"""Where the API is and which key to send: arguments first, then the environment (``TASKYARD_URL``,
``TASKYARD_API_KEY``), then a profile of the profile file, then ``http://127.0.0.1:8000`` without a key.

The profile file is TOML, one table per profile (``TASKYARD_CONFIG``, else
``$XDG_CONFIG_HOME/taskyard/config.toml``, else ``~/.config/taskyard/config.toml``)::

    [default]
    url = "http://127.0.0.1:8000"

    [prod]
    url = "https://taskyard.example.com"
    api_key = "tyk_..."

The profile is the one named by the argument, else ``TASKYARD_PROFILE``, else ``default``; naming one that
the file lacks is an error, a missing ``default`` is not. Read when a client is made, never at import.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROFILE = "default"


class ConfigError(ValueError):
    """The profile file cannot be read, or names no such profile."""


@dataclass(frozen=True)
class Endpoint:
    url: str
    api_key: str | None


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("TASKYARD_CONFIG"):
        return Path(env["TASKYARD_CONFIG"])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "taskyard" / "config.toml"


def _profile(path: Path, name: str, *, required: bool) -> Mapping[str, object]:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise ConfigError(f"profile {name!r} asked for, but there is no profile file at {path}") from None
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the profile file {path}: {exc}") from None
    profile = document.get(name)
    if profile is None:
        if required:
            raise ConfigError(f"the profile file {path} has no profile [{name}]")
        return {}
    if not isinstance(profile, dict):
        raise ConfigError(f"[{name}] in {path} is not a table")
    return profile


def _text(profile: Mapping[str, object], key: str, where: str) -> str | None:
    value = profile.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{key} of {where} must be a string")
    return value


def resolve(
    url: str | None = None,
    api_key: str | None = None,
    *,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    env = os.environ if env is None else env
    chosen = profile or env.get("TASKYARD_PROFILE") or None
    path = config_path(env)
    stored = _profile(path, chosen or DEFAULT_PROFILE, required=chosen is not None)
    where = f"[{chosen or DEFAULT_PROFILE}] in {path}"
    found_url = url or env.get("TASKYARD_URL") or _text(stored, "url", where) or DEFAULT_URL
    found_key = api_key or env.get("TASKYARD_API_KEY") or _text(stored, "api_key", where)
    return Endpoint(url=found_url.rstrip("/"), api_key=found_key or None)

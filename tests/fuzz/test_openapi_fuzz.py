"""Schemathesis against the live API: every operation of its own OpenAPI document, valid and invalid input.

Each operation gets a bounded, derandomized run (the same cases every time), in positive mode (data that
fits the schema) and negative mode (data that does not). A response must never be a 5xx, its status must be
documented for the operation, and its content type and body must match what the document says.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from taskyard_api.settings import ApiSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.process import BIN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Per operation and mode; raise it for a deeper search (e.g. TASKYARD_FUZZ_MAX_EXAMPLES=500).
MAX_EXAMPLES = int(os.environ.get("TASKYARD_FUZZ_MAX_EXAMPLES", "25"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    # The documented headers (X-Request-ID on every answer, Location, Retry-After) are really sent.
    response_headers_conformance,
]
# Reproducible: a fixed seed, no example database, no shrinking (a failure is reported as found).
FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@dataclass
class Fuzzed:
    failures: list[str]  # one line per failing operation and mode
    statuses: dict[str, dict[int, int]]  # per operation label: how many answers of each status


def fuzz(api_url: str, headers: Mapping[str, str] | None = None) -> Fuzzed:
    """Run every operation in both modes; every failure is collected, so one run reports them all."""
    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json", timeout=10)
    failures: list[str] = []
    statuses: dict[str, dict[int, int]] = {}
    operations = 0
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @FUZZ_SETTINGS
                @given(case=operation.as_strategy(generation_mode=mode))
                def run(case: schemathesis.Case) -> None:
                    response = case.call_and_validate(
                        base_url=api_url,
                        session=session,
                        headers=dict(headers or {}),
                        checks=CHECKS,
                        timeout=10,
                    )
                    seen = statuses.setdefault(case.operation.label, {})
                    seen[response.status_code] = seen.get(response.status_code, 0) + 1

                try:
                    run()
                except Unsatisfiable:
                    # Nothing to get wrong: no parameters and no body (the probes, /metrics).
                    assert mode is GenerationMode.NEGATIVE, operation.label
                except Exception as exc:
                    failures.append(f"{operation.label} [{mode.value}]: {exc}")
    assert operations >= 13, f"only {operations} operations in the document"
    # Shown with -s, or when the test fails: what the cases exercised.
    print("\n".join(f"{label}: {dict(sorted(seen.items()))}" for label, seen in statuses.items()))
    return Fuzzed(failures, statuses)


def report(failures: list[str]) -> str:
    return f"{len(failures)} failing operation(s):\n\n" + "\n\n".join(failures)


async def test_fuzz_without_auth(cluster: Cluster):
    await cluster.start_api(TASKYARD_API_AUTH_ENABLED="false")
    fuzzed = await asyncio.to_thread(fuzz, cluster.api_url)
    assert not fuzzed.failures, report(fuzzed.failures)


def _auth_missing() -> str | None:
    if "auth_enabled" not in ApiSettings.model_fields:
        return "the API has no TASKYARD_API_AUTH_ENABLED setting yet"
    if not (BIN / "taskyard-admin").exists():
        return "taskyard-admin (API key administration) does not exist yet"
    return None


def create_admin_key(cluster: Cluster) -> str:
    """``taskyard-admin keys create --tenant fuzz --role admin``, against the test's schema."""
    done = subprocess.run(
        [str(BIN / "taskyard-admin"), "keys", "create", "--tenant", "fuzz", "--role", "admin"],
        env={**os.environ, **cluster.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The key is the one token on stdout that looks like one (tyk_<id>_<secret>).
    keys = [word for word in done.stdout.split() if word.startswith("tyk_")]
    assert len(keys) == 1, done.stdout
    return keys[0]


async def test_fuzz_with_auth(cluster: Cluster):
    missing = _auth_missing()
    if missing is not None:
        pytest.skip(missing)
    await cluster.start_api(TASKYARD_API_AUTH_ENABLED="true")
    key = await asyncio.to_thread(create_admin_key, cluster)
    # With an admin key (negative mode also drops or spoils it, expecting the documented 401).
    admin = await asyncio.to_thread(fuzz, cluster.api_url, {"Authorization": f"Bearer {key}"})
    anonymous = await asyncio.to_thread(fuzz, cluster.api_url)
    assert not admin.failures + anonymous.failures, report(admin.failures + anonymous.failures)
    # Without a key every /v1 answer is a 401, except a body FastAPI cannot parse, which it refuses (400, 422)
    # before any dependency, authentication included, runs. The probes stay open.
    for label, seen in anonymous.statuses.items():
        method, path = label.split(" ", 1)
        if not path.startswith("/v1/"):
            assert set(seen) == {200}, (label, seen)
        elif (method, path) in {
            ("POST", "/v1/tasks"),
            ("POST", "/v1/task-groups"),
            ("POST", "/v1/schedules"),
            ("POST", "/v1/dead-letters/{task_id}/replay"),
            ("PUT", "/v1/tenants/{tenant}/limits"),
        }:
            assert set(seen) <= {400, 401, 422} and seen.get(401, 0) > 0, (label, seen)
        else:
            assert set(seen) == {401}, (label, seen)

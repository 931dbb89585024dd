"""The ``taskyard`` command as users run it (a subprocess of the installed console script) against the API,
the broker agent and a streaming worker as processes: a submission followed to its answer, and the exit
code of every way a task ends; then keys from the environment and from a profile file."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from taskyard_client import AsyncClient
from taskyard_common.catalog import Catalog
from taskyard_common.model_specs import ModelSpec
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.keys import KeyStore, Role
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.process import BIN
from tests.support.catalogs import write_catalog
from tests.support.dead_letters import reject_work_messages
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

ANSWER = "A streamed answer for the command line: " + " ".join(f"w{i}" for i in range(16)) + "."


class Run:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __repr__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


async def taskyard(*args: str, env: dict[str, str], timeout: float = 60) -> Run:
    """``taskyard ARGS`` with a clean environment but for ``env`` (no profile file of the machine's)."""
    process = await asyncio.create_subprocess_exec(
        str(BIN / "taskyard"),
        *args,
        env={"PATH": os.environ["PATH"], "HOME": env.get("HOME", "/nonexistent"), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def test_submit_wait_and_the_exit_code_of_every_ending(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog, amqp_settings: AmqpSettings, tmp_path: Path
) -> None:
    await devllm.script(
        cluster.model, [{"status": 400, "error_message": "refused on purpose"}], by_turn=True, when="FAIL-ME"
    )
    await devllm.script(
        cluster.model, [{"delay_seconds": 60, "content": "too late"}], by_turn=True, when="SLOW-ME"
    )
    await devllm.script(cluster.model, [{"content": ANSWER, "chunk_delay_seconds": 0.03}], by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    # The worker's model priced (per million tokens): each task's cost, and taskyard usage, show it.
    priced = ModelSpec(name=cluster.model, input_price_per_mtok=1000, output_price_per_mtok=3000)
    await cluster.start_worker(
        "general", TASKYARD_CATALOG_PATH=str(write_catalog(catalog, tmp_path, stream=True, models=(priced,)))
    )
    env = {"TASKYARD_URL": cluster.api_url, "TASKYARD_CONFIG": str(tmp_path / "none.toml")}

    # The developer's flow: submit, watch it live, get the answer on stdout, exit 0.
    done = await taskyard("submit", "Summarize: the command line works.", "--wait", "-s", "general", env=env)
    assert done.code == 0, done
    assert done.stdout == ANSWER + "\n", done
    assert "routed to general" in done.stderr and "completed in" in done.stderr
    task_id = done.stderr.split("submitted ", 1)[1].split()[0]

    status = await taskyard("status", task_id, "--json", env=env)
    assert status.code == 0 and status.json()["status"] == "completed" and status.json()["links"]["self"]
    result = await taskyard("result", task_id, env=env)
    assert (result.code, result.stdout) == (0, ANSWER + "\n")
    watched = await taskyard("watch", task_id, "--json", env=env)
    lines = [json.loads(line) for line in watched.stdout.splitlines()]
    assert watched.code == 0 and lines[0]["type"] == "accepted" and lines[-1]["type"] == "completed"
    listed = await taskyard("list", "--status", "completed", "--json", env=env)
    assert [t["id"] for t in listed.json()] == [task_id]
    specialists = await taskyard("specialists", "--json", env=env)
    assert {s["name"] for s in specialists.json()} == set(catalog.names)
    from_file = tmp_path / "task.json"
    from_file.write_text(json.dumps({"question": "FAIL-ME please"}))

    # Failed: exit 3, and --json --wait prints the final document.
    failed = await taskyard("submit", "--file", str(from_file), "-s", "general", "--wait", "--json", env=env)
    assert failed.code == 3, failed
    assert failed.json()["status"] == "failed" and failed.json()["error"]["type"] == "llm_error"
    assert failed.json()["input"] == {"question": "FAIL-ME please"}

    # Cancelled while it runs: the waiting command ends with exit 4.
    slow = await taskyard("submit", "SLOW-ME: take your time", "-s", "general", "--json", env=env)
    slow_id = slow.json()["id"]
    waiting = asyncio.create_task(taskyard("watch", slow_id, env=env))
    async with AsyncClient(cluster.api_url) as sdk:
        await eventually(lambda: _status_is(sdk, slow_id, "running"), what="the slow task to run")
        cancel = await taskyard("cancel", slow_id, env=env)
        assert cancel.code == 0 and "cancel requested" in cancel.stdout
        cancelled = await waiting
        assert cancelled.code == 4, cancelled

        # Not finished in time: exit 6 (nobody runs the summarizer); its result: exit 6 too.
        queued = await taskyard("submit", "Summarize: nobody runs me", "-s", "summarizer", env=env)
        queued_id = queued.stdout.strip()
        late = await taskyard("watch", queued_id, "--timeout", "1", env=env)
        assert late.code == 6 and "still running after 1 s" in late.stderr, late
        no_result = await taskyard("result", queued_id, env=env)
        assert no_result.code == 6 and "the task is" in no_result.stderr

        # Dead-lettered: exit 5; an operator finds it, replays it elsewhere, and it completes.
        await reject_work_messages(amqp_settings, "summarizer", 1)
        await eventually(lambda: _status_is(sdk, queued_id, "dead_lettered"), what="the dead letter")
    dead = await taskyard("watch", queued_id, env=env)
    assert dead.code == 5 and "dead-letters replay" in dead.stderr, dead
    letters = await taskyard("dead-letters", "list", "--json", env=env)
    assert [letter["task_id"] for letter in letters.json()] == [queued_id]
    replay = await taskyard("dead-letters", "replay", queued_id, "--specialist", "general", env=env)
    assert replay.code == 0 and "replayed" in replay.stdout, replay
    after = await taskyard("watch", queued_id, env=env)
    assert (after.code, after.stdout) == (0, ANSWER + "\n"), after
    again = await taskyard("dead-letters", "discard", queued_id, env=env)
    assert again.code == 1 and "404" in again.stderr, "no open dead letter any more"

    unknown = await taskyard("status", "0b7d9a0e-3d55-4bd4-9d0c-4a51c5a3c5a1", env=env)
    assert unknown.code == 1 and "404 Not found" in unknown.stderr

    # What it all cost: GET /v1/usage, the sum of the task documents.
    documents = (await taskyard("list", "--json", env=env)).json()
    spent = await taskyard("usage", "--group-by", "specialist", "--json", env=env)
    assert spent.code == 0, spent
    report = spent.json()
    assert report["total"]["tasks"] == len(documents) and report["group_by"] == "specialist"
    assert report["total"]["cost"] > 0
    assert report["total"]["cost"] == pytest.approx(sum(d["cost"] for d in documents))
    general = next(g for g in report["groups"] if g["key"] == "general")
    assert general["cost"] == pytest.approx(sum(d["cost"] for d in documents if d["specialist"] == "general"))
    shown = await taskyard("usage", env=env)
    assert shown.code == 0 and f"{report['total']['cost']:.6f}" in shown.stdout, shown


async def _status_is(sdk: AsyncClient, task_id: str, status: str) -> bool:
    return (await sdk.get(task_id)).status == status


async def test_keys_from_flags_environment_or_a_profile(
    cluster: Cluster, db_settings: DbSettings, tmp_path: Path
) -> None:
    keys = await KeyStore.open(db_settings)
    try:
        _, reader = await keys.create(tenant="acme", role=Role.READER, name="cli test")
        _, submitter = await keys.create(tenant="acme", role=Role.SUBMITTER, name="cli test")
    finally:
        await keys.close()
    await cluster.start_api(TASKYARD_API_AUTH_ENABLED="true", TASKYARD_API_AUTH_CACHE_SECONDS="0")
    profiles = tmp_path / "config.toml"
    profiles.write_text(
        f'[default]\nurl = "{cluster.api_url}"\n\n[submit]\nurl = "{cluster.api_url}"\napi_key = "{submitter}"\n'
    )
    profiles.chmod(0o600)
    env = {"TASKYARD_CONFIG": str(profiles)}

    no_key = await taskyard("list", env=env)
    assert no_key.code == 1 and "401" in no_key.stderr and "TASKYARD_API_KEY" in no_key.stderr
    read_only = await taskyard("submit", "hello", "--json", env={**env, "TASKYARD_API_KEY": reader})
    assert read_only.code == 1 and read_only.json()["error"]["type"].endswith("/forbidden")
    submitted = await taskyard("--profile", "submit", "submit", "hello", env=env)
    assert submitted.code == 0, submitted
    listed = await taskyard("--api-key", reader, "list", "--json", env=env)
    assert [t["id"] for t in listed.json()] == [submitted.stdout.strip()]
    dead_letters = await taskyard("dead-letters", "list", env={**env, "TASKYARD_PROFILE": "submit"})
    assert dead_letters.code == 1 and "403" in dead_letters.stderr

"""End to end: a task submitted with a webhook completes, and a local receiver gets exactly one signed
``completed`` delivery from the broker agent, verified with the secret ``taskyard-admin`` prints."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.process import BIN
from tests.support.api_client import submit, wait_for_status
from tests.support.polling import eventually
from tests.support.webhook_receiver import verifies, webhook_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# What `make up` sets: a receiver on this machine is allowed (everywhere else loopback is refused).
LOOPBACK = {"TASKYARD_WEBHOOK_ALLOW_LOOPBACK": "true", "TASKYARD_WEBHOOK_POLL_SECONDS": "0.2"}


async def test_a_task_with_a_webhook_completes_and_the_receiver_gets_one_signed_delivery(cluster: Cluster):
    async with webhook_receiver() as receiver:
        await cluster.start_api(**LOOPBACK)
        await cluster.start_broker_agent(**LOOPBACK)
        await cluster.start_worker("general")
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
            body = {"input": "Explain why the sky looks blue, briefly.", "specialist": "general"}
            submitted = await submit(
                client, {**body, "webhook": {"url": receiver.url, "events": ["completed"]}}
            )
            assert submitted["webhook"] == {"url": receiver.url, "events": ["completed"]}
            done = await wait_for_status(client, submitted["id"], {"completed", "failed"})
            assert done["status"] == "completed"
            path = f"/v1/tasks/{submitted['id']}/webhook-deliveries"

            async def delivered() -> bool:
                items = (await client.get(path)).json()["items"]
                return len(items) == 1 and items[0]["status"] == "delivered"

            await eventually(delivered, timeout=60, what="the delivery to be recorded delivered")
            (delivery,) = (await client.get(path)).json()["items"]
    admin = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "taskyard-admin"), "webhooks", "secret", "--tenant", "default"],
        env={**os.environ, **cluster.env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert admin.returncode == 0, admin.stderr
    (request,) = receiver.requests
    assert request.webhook_id == delivery["id"] and delivery["attempts"] == 1
    assert verifies(admin.stdout.strip(), request), "signed with the tenant's secret"
    payload = json.loads(request.body)
    assert payload["type"] == "task.completed"
    assert payload["data"]["task_id"] == submitted["id"] and payload["data"]["result"] == done["result"]

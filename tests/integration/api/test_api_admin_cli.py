"""``taskyard-admin``: create, list and revoke API keys, and show or rotate a tenant's webhook secret, from
the command line, as an operator would."""

from __future__ import annotations

import os
import re
import subprocess

import httpx

from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.webhook_secrets import WebhookSecretStore, signing_key
from taskyard_devkit.process import BIN
from tests.integration.api.conftest import MakeSettings, assert_problem, serve


def admin(*argv: str, db: DbSettings) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TASKYARD_DB_URL": db.url.get_secret_value(), "TASKYARD_DB_SCHEMA": db.db_schema}
    return subprocess.run(
        [str(BIN / "taskyard-admin"), *argv], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_admin_script_explains_itself():
    for argv in (["--help"], ["keys", "--help"], ["keys", "create", "--help"]):
        done = subprocess.run(
            [str(BIN / "taskyard-admin"), *argv], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: taskyard-admin")


async def test_keys_are_created_listed_and_revoked_from_the_cli(
    db_settings: DbSettings, make_settings: MakeSettings
):
    made = admin(
        "keys", "create", "--tenant", "acme", "--role", "submitter", "--name", "ci bot", db=db_settings
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    match = re.fullmatch(r"(tyk_[0-9a-f]{8})_([A-Za-z0-9_-]{43,})", key)
    assert match, made.stdout
    key_id, secret = match.groups()
    assert secret not in made.stderr and key_id in made.stderr

    other = admin("keys", "create", "--tenant", "globex", "--role", "reader", db=db_settings)
    assert other.returncode == 0, other.stderr
    listed = admin("keys", "list", db=db_settings)
    assert listed.returncode == 0, listed.stderr
    assert key_id in listed.stdout and "ci bot" in listed.stdout and "globex" in listed.stdout
    assert secret not in listed.stdout and secret not in listed.stderr
    assert other.stdout.strip().split("_", 2)[2] not in listed.stdout
    only_acme = admin("keys", "list", "--tenant", "acme", db=db_settings)
    assert key_id in only_acme.stdout and "globex" not in only_acme.stdout

    bad = admin("keys", "create", "--tenant", "acme", "--role", "root", db=db_settings)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr

    # Without the API's key cache (auth_cache_seconds=0), a revocation applies from the very next request.
    async with serve(make_settings(auth_enabled=True, auth_cache_seconds=0)) as api:
        headers = {"Authorization": f"Bearer {key}"}
        accepted = await api.post("/v1/tasks", json={"input": "from the ci bot"}, headers=headers)
        assert accepted.status_code == 202, accepted.text

        revoked = admin("keys", "revoke", key_id, db=db_settings)
        assert revoked.returncode == 0 and f"revoked {key_id}" in revoked.stdout
        # The very next request is refused.
        refused: httpx.Response = await api.get("/v1/tasks", headers=headers)
        assert_problem(refused, 401, "unauthorized")

    again = admin("keys", "revoke", key_id, db=db_settings)
    assert again.returncode == 1 and "already revoked" in again.stderr
    listed = admin("keys", "list", "--tenant", "acme", db=db_settings)
    row = next(line for line in listed.stdout.splitlines() if line.startswith(key_id))
    assert row.split("\t")[4] != "-"  # revoked_at


async def test_the_admin_cli_prints_a_tenants_secret_and_rotates_it(
    db_settings: DbSettings, store: PostgresTaskStore
):
    shown = admin("webhooks", "secret", "--tenant", "acme", db=db_settings)
    assert shown.returncode == 0, shown.stderr
    secret = shown.stdout.strip()
    assert secret.startswith("whsec_") and len(signing_key(secret)) == 32
    assert admin("webhooks", "secret", "--tenant", "acme", db=db_settings).stdout.strip() == secret, "stable"
    assert await WebhookSecretStore(store.pool).secret("acme") == secret, "the one the dispatcher signs with"
    rotated = admin("webhooks", "secret", "--tenant", "acme", "--rotate", db=db_settings)
    assert rotated.returncode == 0 and rotated.stdout.strip() not in ("", secret)
    assert await WebhookSecretStore(store.pool).secret("acme") == rotated.stdout.strip()
    default = admin("webhooks", "secret", db=db_settings).stdout.strip()
    assert default.startswith("whsec_") and default not in (secret, rotated.stdout.strip()), "per tenant"
    assert admin("webhooks", "secret", "--tenant", "Not A Tenant", db=db_settings).returncode == 2


def test_a_tenants_retention_is_set_shown_and_cleared(db_settings: DbSettings):
    assert admin("tenants", "retention", "--tenant", "acme", "--days", "7", db=db_settings).returncode == 0
    assert (
        admin("tenants", "retention", "--tenant", "globex", "--days", "400", db=db_settings).returncode == 0
    )
    shown = admin("tenants", "retention", db=db_settings)
    assert shown.returncode == 0 and shown.stdout.splitlines() == ["tenant\tdays", "acme\t7", "globex\t400"]
    assert admin("tenants", "retention", "--tenant", "acme", "--clear", db=db_settings).returncode == 0
    assert admin("tenants", "retention", db=db_settings).stdout.splitlines()[1:] == ["globex\t400"]
    refused = admin("tenants", "retention", "--tenant", "acme", "--days", "0", db=db_settings)
    assert refused.returncode == 2 and "1 to 36500" in refused.stderr
    assert admin("tenants", "retention", "--days", "3", db=db_settings).returncode == 2, "which tenant?"


def test_tenant_limits_are_set_shown_listed_and_dropped_from_the_cli(db_settings: DbSettings):
    header = "tenant\tmax_running\trunning\tupdated_at"
    shown = admin("tenants", "show", "--tenant", "acme", db=db_settings)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [header, "acme\tunlimited\t0\t-"]
    made = admin("tenants", "set", "--tenant", "acme", "--max-running", "20", db=db_settings)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[1].startswith("acme\t20\t0\t")
    listed = admin("tenants", "list", db=db_settings).stdout.splitlines()
    assert [line.split("\t")[:2] for line in listed] == [header.split("\t")[:2], ["acme", "20"]]
    refused = admin("tenants", "set", "--tenant", "acme", "--max-running", "0", db=db_settings)
    assert refused.returncode == 2 and "unlimited" in refused.stderr
    dropped = admin("tenants", "unset", "--tenant", "acme", db=db_settings)
    assert dropped.returncode == 0 and dropped.stdout.splitlines()[1] == "acme\tunlimited\t0\t-"

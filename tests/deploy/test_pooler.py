"""The CloudNativePG Pooler (PgBouncer, transaction mode) behind postgresql.cluster.pooler.enabled: the object
CloudNativePG needs, the services pointed at it with the settings asyncpg needs there, the migration job
left on the primary, and the values that cannot work refused. No schema package for CloudNativePG's CRDs
exists here, so the Pooler's fields are checked against its documented API."""

from __future__ import annotations

import pytest

from tests.deploy.conftest import CHART, of_kind, pod_specs, render, run, tool

pytestmark = pytest.mark.deploy

POOLER_VALUES = CHART / "ci" / "pooler-values.yaml"
# The PgBouncer parameters CloudNativePG lets a Pooler set (its connection-pooling documentation; it
# rejects others), max_prepared_statements included since CloudNativePG 1.19.6/1.20.4/1.21.1 (PR 3174).
CNPG_PGBOUNCER_PARAMETERS = {
    "application_name_add_host", "autodb_idle_timeout", "client_idle_timeout", "client_login_timeout",
    "default_pool_size", "disable_pqexec", "idle_transaction_timeout", "ignore_startup_parameters",
    "log_connections", "log_disconnections", "log_pooler_errors", "log_stats", "max_client_conn",
    "max_db_connections", "max_prepared_statements", "max_user_connections", "min_pool_size", "query_timeout",
    "query_wait_timeout", "reserve_pool_size", "reserve_pool_timeout", "server_check_delay",
    "server_check_query", "server_connect_timeout", "server_fast_close", "server_idle_timeout",
    "server_lifetime", "server_login_retry", "server_reset_query", "server_reset_query_always",
    "server_round_robin", "stats_period", "verbose",
}  # fmt: skip
POOLER_SPEC_FIELDS = {
    "cluster",
    "instances",
    "type",
    "pgbouncer",
    "template",
    "monitoring",
    "serviceTemplate",
}


def _env(objects: list[dict], name: str) -> dict[str, dict]:
    (spec,) = [s for n, s in pod_specs(objects) if n == name]
    return {e["name"]: e for e in spec["containers"][0]["env"]}


def test_no_pooler_unless_enabled():
    assert not of_kind(render(sets=("postgresql.cluster.enabled=true",)), "Pooler")


def test_the_pooler_is_pgbouncer_in_transaction_mode_in_front_of_the_primary():
    objects = render(POOLER_VALUES)
    (cluster,) = of_kind(objects, "Cluster")
    (pooler,) = of_kind(objects, "Pooler")
    spec = pooler["spec"]
    assert pooler["apiVersion"] == "postgresql.cnpg.io/v1"
    assert set(spec) <= POOLER_SPEC_FIELDS
    assert pooler["metadata"]["name"] != cluster["metadata"]["name"], "CloudNativePG refuses a shared name"
    assert spec["cluster"] == {"name": cluster["metadata"]["name"]}
    assert (spec["type"], spec["instances"], spec["pgbouncer"]["poolMode"]) == ("rw", 2, "transaction")
    parameters = spec["pgbouncer"]["parameters"]
    assert set(parameters) <= CNPG_PGBOUNCER_PARAMETERS
    assert all(isinstance(v, str) for v in parameters.values()), "CloudNativePG takes strings"
    # Prepared statements tracked by PgBouncer (>= 1.21): asyncpg's statement cache can stay on.
    assert int(parameters["max_prepared_statements"]) > 0


@pytest.mark.parametrize("name", ["taskyard-api", "taskyard-broker-agent", "taskyard-worker-general"])
def test_the_services_connect_through_the_pooler(name):
    env = _env(render(POOLER_VALUES), name)
    assert env["TASKYARD_DB_URL"]["value"] == (
        "postgresql://taskyard@taskyard-postgresql-pooler.taskyard.svc:5432/taskyard"
    )
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "taskyard-postgresql-app",
        "key": "password",
    }
    assert env["TASKYARD_DB_POOLED"]["value"] == "true"
    assert "TASKYARD_DB_STATEMENT_CACHE_SIZE" not in env, (
        "asyncpg's default cache: PgBouncer tracks statements"
    )


def test_without_prepared_statement_tracking_the_services_turn_their_cache_off():
    objects = render(POOLER_VALUES, sets=("postgresql.cluster.pooler.parameters.max_prepared_statements=0",))
    assert _env(objects, "taskyard-api")["TASKYARD_DB_STATEMENT_CACHE_SIZE"]["value"] == "0"


def test_the_migration_job_stays_on_the_primary():
    env = _env(render(POOLER_VALUES), "taskyard-migrate")
    # Its session-level advisory lock and SET search_path need a session of their own.
    assert env["TASKYARD_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "taskyard-postgresql-app",
        "key": "uri",
    }
    assert "TASKYARD_DB_POOLED" not in env and "PGPASSWORD" not in env


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (["postgresql.cluster.pooler.enabled=true"], "needs postgresql.cluster.enabled"),
        (
            [
                "postgresql.cluster.enabled=true",
                "postgresql.cluster.pooler.enabled=true",
                "config.dbSchema=other",
            ],
            "must equal postgresql.cluster.owner",
        ),
    ],
)
def test_a_pooler_that_cannot_work_is_refused(sets, error):
    args = [tool("helm"), "template", "t", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = run(args, check=False)
    assert proc.returncode != 0 and error in proc.stderr

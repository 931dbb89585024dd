"""The kopf handlers: thin. Each calls actions.py and maps its failures onto kopf's errors:
``PermanentError`` when retrying cannot help until the Specialist changes (an invalid spec, queues that exist
with other arguments, an object the API server rejects), ``TemporaryError`` otherwise (broker, database or
API server unavailable, a conflict), which kopf retries after ``delay``.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Iterator
from typing import Any

import aiormq
import kopf

from taskyard_common.errors import BrokerUnavailable, TopologyMismatch
from taskyard_operator import actions
from taskyard_operator.kube import KubeError
from taskyard_operator.model import API_GROUP, API_VERSION, DELETE_QUEUES_ANNOTATION, PLURAL, SpecError
from taskyard_operator.resources import Resources
from taskyard_operator.settings import Settings
from taskyard_operator.status import status as build_status

RESOURCE = (API_GROUP, API_VERSION, PLURAL)
FINALIZER = f"{API_GROUP}/operator"
RETRY_DELAY_SECONDS = 15


@contextlib.contextmanager
def kopf_errors() -> Iterator[None]:
    try:
        yield
    except (SpecError, TopologyMismatch) as exc:
        raise kopf.PermanentError(str(exc)) from exc
    except KubeError as exc:
        if exc.retriable:
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY_SECONDS) from exc
        raise kopf.PermanentError(str(exc)) from exc
    except (BrokerUnavailable, aiormq.exceptions.AMQPError, ConnectionError, TimeoutError) as exc:
        raise kopf.TemporaryError(
            f"RabbitMQ: {type(exc).__name__}: {exc}", delay=RETRY_DELAY_SECONDS
        ) from exc


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _refresh_status(
    resources: Resources, name: str, namespace: str, body: kopf.Body, patch: kopf.Patch
) -> None:
    observation = await actions.observe(
        resources, name, namespace, body.spec, body.metadata.get("generation")
    )
    patch.status.update(build_status(observation, body.status, _now()))


def build_registry(status_interval_seconds: float) -> kopf.OperatorRegistry:
    """A registry of its own (not kopf's default), so the tests can run the operator in-process."""
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
        # Progress and the last handled spec in annotations of taskyard's own; the status stays ours.
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=API_GROUP, key="last-handled-configuration"
        )
        # One replica in one namespace: no peering, no cluster-wide scanning (and no RBAC for them).
        settings.peering.standalone = True
        settings.scanning.disabled = True
        settings.posting.level = logging.INFO
        config: Settings = memo.settings
        memo.resources = await Resources.open(config)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: kopf.Memo, **_: Any) -> None:
        resources: Resources | None = memo.get("resources")
        if resources is not None:
            await resources.close()

    @kopf.on.login(registry=registry)
    def login(memo: kopf.Memo, settings: kopf.OperatorSettings, **kwargs: Any) -> kopf.ConnectionInfo | None:
        config: Settings = memo.settings
        if config.operator.kube_api_url:
            return kopf.ConnectionInfo(
                server=config.operator.kube_api_url, default_namespace=config.operator.namespace
            )
        return kopf.login_with_service_account(settings=settings, **kwargs) or kopf.login_with_kubeconfig(
            settings=settings, **kwargs
        )

    @kopf.on.resume(*RESOURCE, registry=registry)
    @kopf.on.create(*RESOURCE, registry=registry)
    @kopf.on.update(*RESOURCE, registry=registry)
    async def reconcile(
        name: str, namespace: str | None, uid: str, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo,
        logger: kopf.Logger, **_: Any,
    ) -> None:  # fmt: skip
        resources: Resources = memo.resources
        namespace = namespace or resources.settings.operator.namespace
        with kopf_errors():
            the_plan = await actions.apply(resources, name, namespace, uid, body.spec)
        logger.info("applied %s", ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in the_plan.objects))
        await _refresh_status(resources, name, namespace, body, patch)

    @kopf.timer(
        *RESOURCE, interval=status_interval_seconds, initial_delay=status_interval_seconds, registry=registry
    )
    async def refresh(
        name: str, namespace: str | None, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any
    ) -> None:
        resources: Resources = memo.resources
        await _refresh_status(
            resources, name, namespace or resources.settings.operator.namespace, body, patch
        )

    @kopf.on.delete(*RESOURCE, registry=registry)
    async def delete(
        name: str,
        body: kopf.Body,
        annotations: kopf.Annotations,
        memo: kopf.Memo,
        logger: kopf.Logger,
        **_: Any,
    ) -> None:
        with kopf_errors():
            deletion = await actions.delete_queues(memo.resources, name, body.spec, annotations)
        if deletion is None:
            return
        if deletion.deleted:
            logger.info("deleted queues %s", ", ".join(deletion.deleted))
        if deletion.kept:
            logger.warning(
                "kept queues %s: they hold messages or consumers, or tasks of %s are unfinished (annotate %s=true to delete them anyway)",
                ", ".join(deletion.kept),
                name,
                DELETE_QUEUES_ANNOTATION,
            )

    return registry

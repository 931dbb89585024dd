"""The catalog as ``Specialist`` resources (``TASKYARD_CATALOG_SOURCE=kubernetes``): listed from the API
server and watched, over HTTP with the pod's service account (it needs get, list and watch on
``specialists.taskyard.dev`` in its namespace).

``read`` lists the resources (so a read is always current, whatever the watch missed); a background watch
from the list's ``resourceVersion`` says when to read again. A watch that ends, breaks or is told its
version is too old (410) starts over from a new list, and counts as a change. Each resource's spec is its
catalog entry plus ``scaling`` and ``pod`` (the operator's); its name is ``metadata.name``; the catalog-wide
fields (``multi_route``, ``combine_specialist``, ``models``) are the mounted catalog file's, when there is one. A resource whose
entry is not valid (the CRD's schema should have refused it) is left out, with a warning; one being deleted
(``deletionTimestamp``: the operator's finalizer still holds it) is left out too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import ValidationError

from taskyard_common.catalog import Catalog, CatalogError, SpecialistSpec
from taskyard_common.catalog_sources.live import CatalogSource, CatalogUnavailable

log = logging.getLogger(__name__)

GROUP_VERSION = "taskyard.dev/v1alpha1"
# The parts of a Specialist's spec that are the operator's, not the catalog's.
NOT_CATALOG = ("scaling", "pod")
_WATCH_SECONDS = 300
_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def spec_of(resource: dict[str, Any]) -> SpecialistSpec:
    """A Specialist resource's catalog entry (``ValidationError`` when not valid)."""
    entry = {k: v for k, v in (resource.get("spec") or {}).items() if k not in NOT_CATALOG}
    return SpecialistSpec.model_validate({**entry, "name": resource["metadata"]["name"]})


def catalog_of(resources: list[dict[str, Any]], fallback: str, wide: dict[str, Any] | None = None) -> Catalog:
    """The catalog of these resources, with ``wide``'s catalog-wide fields (see ``catalog_wide``)."""
    specs = []
    for resource in sorted(resources, key=lambda r: str(r.get("metadata", {}).get("name", ""))):
        if resource.get("metadata", {}).get("deletionTimestamp"):
            continue
        try:
            specs.append(spec_of(resource))
        except (ValidationError, KeyError) as exc:
            log.warning(
                "Specialist %s left out of the catalog: %s", resource.get("metadata", {}).get("name"), exc
            )
    try:
        return Catalog(**(wide or {}), fallback=fallback, specialists=tuple(specs))
    except ValidationError as exc:
        raise CatalogError(f"the Specialist resources are not a valid catalog:\n{exc}") from None


def in_cluster_url() -> str | None:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def in_cluster_namespace() -> str:
    try:
        return _NAMESPACE_FILE.read_text().strip() or "default"
    except OSError:
        return "default"


class KubernetesSource(CatalogSource):
    kind = "kubernetes"

    def __init__(
        self,
        url: str,
        namespace: str,
        *,
        fallback: str,
        token_path: Path,
        ca_path: Path,
        retry_seconds: float = 1.0,
        wide: dict[str, Any] | None = None,
    ) -> None:
        self._wide = wide or {}
        self._path = f"{url.rstrip('/')}/apis/{GROUP_VERSION}/namespaces/{namespace}/specialists"
        self._fallback = fallback
        self._token_path = token_path
        self._retry = retry_seconds
        ssl_context: ssl.SSLContext | bool = True
        if url.startswith("https") and ca_path.exists():
            ssl_context = ssl.create_default_context(cafile=str(ca_path))
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._event = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None

    def _headers(self) -> dict[str, str]:
        # Read at each request: a projected service account token is rotated on disk.
        try:
            return {"Authorization": f"Bearer {self._token_path.read_text().strip()}"}
        except OSError:
            return {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=10))
        return self._session

    async def _list(self) -> dict[str, Any]:
        try:
            async with (
                asyncio.timeout(30),
                self._client().get(self._path, headers=self._headers(), ssl=self._ssl) as response,
            ):
                if response.status >= 400:
                    raise CatalogUnavailable(f"listing Specialists answered {response.status}")
                body: dict[str, Any] = await response.json()
                return body
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise CatalogUnavailable(f"cannot list Specialists: {type(exc).__name__}") from exc

    async def read(self) -> Catalog:
        return catalog_of(list((await self._list()).get("items") or []), self._fallback, self._wide)

    async def changed(self) -> None:
        if self._watch is None:
            self._watch = asyncio.create_task(self._watching(), name="watch Specialists")
        await self._event.wait()
        self._event.clear()

    async def _watching(self) -> None:
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = (await self._list()).get("metadata", {}).get("resourceVersion")
                    self._event.set()  # what happened between two watches is only in the new list
                version = await self._watch_once(version)
            except asyncio.CancelledError:
                raise
            except (CatalogUnavailable, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                log.warning("watching Specialists failed (%s); listing again", type(exc).__name__)
                version = None
                await asyncio.sleep(self._retry)

    async def _watch_once(self, version: str | None) -> str | None:
        """One watch request until the server ends it; the version to go on from (None: list again)."""
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(_WATCH_SECONDS)}
        if version:
            params["resourceVersion"] = version
        async with self._client().get(
            self._path, params=params, headers=self._headers(), ssl=self._ssl
        ) as response:
            if response.status == 410:
                return None
            if response.status >= 400:
                raise CatalogUnavailable(f"watching Specialists answered {response.status}")
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return None  # mostly 410 Gone: the version is too old
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind != "BOOKMARK":
                    self._event.set()
        return version

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._session is not None:
            await self._session.close()

"""The few Kubernetes API calls the operator makes for a Specialist's children: get, apply, delete.

kopf watches the Specialists and patches them; it has no client for other objects, so this small one talks
to the same API server with the pod's service account (or to ``kube_api_url``, e.g. ``kubectl proxy`` or
the tests' emulator). Children are written with server-side apply (field manager ``taskyard-operator``,
forced): one request creates or updates, a retried handler never duplicates, and fields other controllers
own (the replicas KEDA's HPA sets) are left alone.
"""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path
from typing import Any

import aiohttp

from taskyard_operator.reconcile import Kind

FIELD_MANAGER = "taskyard-operator"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(Exception):
    """An answer other than success from the API server (``status`` 0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status

    @property
    def retriable(self) -> bool:
        """Worth trying again as it is: no answer, a conflict, throttling, a server error. A 4xx that
        rejects the object itself (400, 403, 404, 422) needs a change first."""
        return self.status in (0, 409, 429) or self.status >= 500


def path(kind: Kind, namespace: str, name: str | None = None) -> str:
    base = f"/apis/{kind.api_version}/namespaces/{namespace}/{kind.plural}"
    return f"{base}/{name}" if name else base


class KubeClient:
    def __init__(self, server: str, *, token_path: Path | None, ca_path: Path | None, timeout: float) -> None:
        self._server = server.rstrip("/")
        self._token_path = token_path
        ssl_context: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(ca_path)) if ca_path else True
        )
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout),
            connector=aiohttp.TCPConnector(ssl=ssl_context),
        )

    @classmethod
    def connect(cls, api_url: str | None, timeout: float) -> KubeClient:
        """``api_url`` as given (no credentials), else the in-cluster service account."""
        if api_url:
            return cls(api_url, token_path=None, ca_path=None, timeout=timeout)
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise RuntimeError(
                "not in a cluster: set TASKYARD_OPERATOR_KUBE_API_URL (e.g. `kubectl proxy`'s http://127.0.0.1:8001)"
            )
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(
            server, token_path=SERVICE_ACCOUNT / "token", ca_path=SERVICE_ACCOUNT / "ca.crt", timeout=timeout
        )

    async def close(self) -> None:
        await self._session.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self._token_path is not None:
            # Re-read on every request: projected service-account tokens are rotated.
            headers["Authorization"] = f"Bearer {self._token_path.read_text().strip()}"
        return headers

    async def _request(
        self,
        method: str,
        url: str,
        *,
        body: dict[str, Any] | None = None,
        content_type: str | None = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        try:
            async with self._session.request(
                method,
                self._server + url,
                data=json.dumps(body) if body is not None else None,
                headers=self._headers(content_type if body is not None else None),
                params=params,
            ) as response:
                text = await response.text()
                try:
                    data = json.loads(text) if text else {}
                except ValueError:
                    data = {"message": text[:200]}
                return response.status, data if isinstance(data, dict) else {}
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeError(0, f"{method} {url}: {type(exc).__name__}") from exc

    @staticmethod
    def _fail(status: int, method: str, url: str, data: dict[str, Any]) -> KubeError:
        return KubeError(status, f"{method} {url}: {data.get('message') or data.get('reason') or 'failed'}")

    async def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        url = path(kind, namespace, name)
        status, data = await self._request("GET", url)
        if status == 404:
            return None
        if status >= 300:
            raise self._fail(status, "GET", url, data)
        return data

    async def apply(self, kind: Kind, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or update ``obj`` to exactly what it says (server-side apply, forced)."""
        name = obj["metadata"]["name"]
        url = path(kind, namespace, name)
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        # JSON is YAML: the apply content type takes it as it is.
        status, data = await self._request(
            "PATCH", url, body=obj, content_type="application/apply-patch+yaml", params=params
        )
        if status == 404:
            # A real API server creates on apply; an API without server-side apply (the test emulator)
            # answers 404 for an object that does not exist yet: create it.
            status, data = await self._request(
                "POST",
                path(kind, namespace),
                body=obj,
                content_type="application/json",
                params={"fieldManager": FIELD_MANAGER},
            )
        if status >= 300:
            raise self._fail(status, "apply", url, data)
        return data

    async def delete(self, kind: Kind, namespace: str, name: str) -> bool:
        """Delete one object (its own children go in the background); False when it was not there."""
        url = path(kind, namespace, name)
        status, data = await self._request(
            "DELETE", url, body={"propagationPolicy": "Background"}, content_type="application/json"
        )
        if status == 404:
            return False
        if status >= 300:
            raise self._fail(status, "DELETE", url, data)
        return True

"""Who is calling: the API key in ``Authorization: Bearer``, its tenant and its role.

Every ``/v1`` route depends on one of ``Reader``, ``Submitter`` or ``Admin``. The key is looked up in the
database (one indexed query) and the answer kept for ``TASKYARD_API_AUTH_CACHE_SECONDS`` (5 s; see
``key_cache``), so a revoked key is refused within that long; with 0, from the very next request. A missing,
malformed, unknown or revoked key answers 401 with ``WWW-Authenticate: Bearer``; a key whose role may not do
the thing answers 403. Tenants never learn about each other: another tenant's task is simply not found.

With ``TASKYARD_API_AUTH_ENABLED=false`` every request acts as an admin of tenant ``default``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.problems import FORBIDDEN, READ_RATE_LIMITED, UNAUTHORIZED, ProblemException
from taskyard_api.resources import Resources
from taskyard_api.submission.rate_limit import rate_limit_headers
from taskyard_api.tenancy.body_auth import CHALLENGE, INVALID, INVALID_KEY, MISSING_KEY, PRE_AUTHENTICATED
from taskyard_api.tenancy.read_limit import ReadLimiter
from taskyard_common.store import DEFAULT_TENANT
from taskyard_common.store.keys import Role

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="tyk_<id>_<secret>",
    description="An API key made with `taskyard-admin keys create --tenant T --role R`.",
)


@dataclass(frozen=True)
class Principal:
    tenant: str
    role: Role
    key_id: str | None  # None when authentication is disabled

    def owns(self, tenant: str) -> bool:
        return tenant == self.tenant


READ_ROLES = frozenset({Role.READER, Role.SUBMITTER, Role.ADMIN})
SUBMIT_ROLES = frozenset({Role.SUBMITTER, Role.ADMIN})
ADMIN_ROLES = frozenset({Role.ADMIN})

_READ_METHODS = frozenset({"GET", "HEAD"})
READ_POLICY = "read"


def authorize(roles: frozenset[Role]) -> Callable[..., Awaitable[Principal]]:
    async def principal(
        request: Request,
        resources: ResourcesDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> Principal:
        found = await _authenticate(resources, credentials, roles, request)
        if request.method in _READ_METHODS:
            limit_reads(resources.reads, found.tenant)
        return found

    return principal


async def _authenticate(
    resources: Resources,
    credentials: HTTPAuthorizationCredentials | None,
    roles: frozenset[Role],
    request: Request,
) -> Principal:
    if not resources.settings.api.auth_enabled:
        return Principal(DEFAULT_TENANT, Role.ADMIN, None)
    if credentials is None:
        raise ProblemException(UNAUTHORIZED(MISSING_KEY), headers=CHALLENGE)
    # Looked up already, before the body was read (``body_auth``): the same key is not looked up twice.
    earlier = getattr(request.state, PRE_AUTHENTICATED, None)
    if earlier is not None and earlier[0] == credentials.credentials:
        key = earlier[1]
    else:
        key = await resources.keys.authenticate(credentials.credentials)
    if key is None:
        raise ProblemException(UNAUTHORIZED(INVALID_KEY), headers=INVALID)
    if key.role not in roles:
        allowed = ", ".join(sorted(r.value for r in roles))
        raise ProblemException(FORBIDDEN(f"This needs one of the roles: {allowed}; the key is {key.role}."))
    return Principal(key.tenant, key.role, key.id)


def limit_reads(limiter: ReadLimiter, tenant: str) -> None:
    """Take one read token of ``tenant``; 429 with ``Retry-After`` when none is left."""
    if not limiter.enabled:
        return
    taken = limiter.take(tenant)
    if taken.allowed:
        return
    retry_after = max(1, math.ceil((1 - taken.tokens) / limiter.per_second))
    headers = rate_limit_headers(
        taken.tokens, per_second=limiter.per_second, burst=limiter.burst, policy=READ_POLICY
    )
    raise ProblemException(
        READ_RATE_LIMITED(
            f"This tenant may read {limiter.per_second:g} times per second from each API process (bursts "
            f"of {limiter.burst}); retry after {retry_after} s."
        ),
        headers={**headers, "Retry-After": str(retry_after)},
    )


Reader = Annotated[Principal, Depends(authorize(READ_ROLES))]
Submitter = Annotated[Principal, Depends(authorize(SUBMIT_ROLES))]
Admin = Annotated[Principal, Depends(authorize(ADMIN_ROLES))]

"""API keys: who may call the API, for which tenant, with which role.

A key is shown once, as ``tyk_<id>_<secret>``: ``tyk_<8 hex>`` is its public id (listed, logged, revoked
by), the secret is 32 random bytes. Only the SHA-256 of the secret is stored. A fast hash is enough because
the secret is random and long (see migration 0004), and it keeps authentication to one indexed look-up by
id plus a constant-time compare. This store caches nothing; the API keeps each answer for a few seconds
(``TASKYARD_API_AUTH_CACHE_SECONDS``), which bounds how long a revocation takes to apply there.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from enum import StrEnum

import asyncpg
from pydantic import BaseModel, ConfigDict

from taskyard_common.errors import StoreUnavailable
from taskyard_common.settings import DbSettings
from taskyard_common.store._pg import UNAVAILABLE, PoolStore
from taskyard_common.store.connecting import connection_options

KEY_PREFIX = "tyk_"
_KEY = re.compile(r"^(tyk_[0-9a-f]{8})_([A-Za-z0-9_-]{43,})$")
# Tenant names end up in URLs of dashboards and in logs: keep them plain.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_KEY_COLUMNS = "id, tenant, role, name, created_at, revoked_at"


class Role(StrEnum):
    SUBMITTER = "submitter"  # submit, cancel and read its tenant's tasks
    READER = "reader"  # read its tenant's tasks
    ADMIN = "admin"  # everything in its tenant, dead letters included


class ApiKey(BaseModel):
    """A key as stored, without its secret."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str
    role: Role
    name: str
    created_at: datetime
    revoked_at: datetime | None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(key: str) -> tuple[str, str] | None:
    """(public id, secret) of a well-formed key, else None."""
    match = _KEY.match(key)
    return (match.group(1), match.group(2)) if match else None


def new_key() -> tuple[str, str]:
    """A fresh (public id, full key to hand out once)."""
    key_id = KEY_PREFIX + secrets.token_hex(4)
    return key_id, f"{key_id}_{secrets.token_urlsafe(32)}"


class KeyStore(PoolStore):
    """API keys in PostgreSQL. Separate from the task store; it may share its connection pool."""

    @classmethod
    async def open(cls, settings: DbSettings) -> KeyStore:
        """With a small pool of its own (the admin CLI)."""
        try:
            pool = await asyncpg.create_pool(
                settings.url.get_secret_value(),
                min_size=0,
                max_size=2,
                command_timeout=settings.command_timeout_seconds,
                timeout=settings.command_timeout_seconds,
                **connection_options(settings, "taskyard-admin"),
            )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        return cls(pool, acquire_timeout=settings.command_timeout_seconds)

    async def create(self, *, tenant: str, role: Role, name: str = "") -> tuple[ApiKey, str]:
        """Store a new key; returns it and the full key, which exists nowhere else afterwards."""
        while True:
            key_id, key = new_key()
            parsed = parse_key(key)
            assert parsed is not None
            try:
                row = await self._fetchrow(
                    "INSERT INTO api_keys (id, tenant, role, name, key_hash) VALUES ($1, $2, $3, $4, $5)"
                    f" RETURNING {_KEY_COLUMNS}",
                    key_id,
                    tenant,
                    role.value,
                    name,
                    hash_secret(parsed[1]),
                )
            except asyncpg.UniqueViolationError:
                continue  # 32-bit public ids may collide, rarely: draw another
            assert row is not None
            return ApiKey.model_validate(dict(row)), key

    async def list(self, tenant: str | None = None) -> list[ApiKey]:
        if tenant is None:
            rows = await self._fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY tenant, created_at")
        else:
            rows = await self._fetch(
                f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at", tenant
            )
        return [ApiKey.model_validate(dict(r)) for r in rows]

    async def revoke(self, key_id: str) -> bool:
        """True when the key existed and was not revoked yet."""
        row = await self._fetchrow(
            "UPDATE api_keys SET revoked_at = clock_timestamp() WHERE id = $1 AND revoked_at IS NULL"
            " RETURNING id",
            key_id,
        )
        return row is not None

    async def authenticate(self, key: str) -> ApiKey | None:
        """The live key ``key`` is, or None (malformed, unknown, wrong secret or revoked)."""
        parsed = parse_key(key)
        if parsed is None:
            return None
        key_id, secret = parsed
        row = await self._fetchrow(f"SELECT {_KEY_COLUMNS}, key_hash FROM api_keys WHERE id = $1", key_id)
        if row is None or row["revoked_at"] is not None:
            return None
        if not hmac.compare_digest(hash_secret(secret), row["key_hash"]):
            return None
        data = dict(row)
        del data["key_hash"]
        return ApiKey.model_validate(data)

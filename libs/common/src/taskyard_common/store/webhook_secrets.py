"""Each tenant's webhook signing secret (Standard Webhooks): ``whsec_`` and the base64 of 32 random bytes.

The secret is created on first use (the dispatcher's first delivery for the tenant, or ``taskyard-admin
webhooks secret``) and replaced by ``--rotate``. It is stored as is: the dispatcher needs it to sign, and a
receiver needs the same text to verify (unlike an API key, a hash would not do).
"""

from __future__ import annotations

import base64
import secrets

from taskyard_common.store._pg import PoolStore

SECRET_PREFIX = "whsec_"

# One statement: a new secret unless the tenant has one, then the tenant's. A secret another transaction
# inserted after this statement's snapshot is not visible to it: ``secret`` then asks again.
_ENSURE = (
    "WITH made AS (INSERT INTO webhook_secrets (tenant, secret) VALUES ($1, $2)"
    " ON CONFLICT (tenant) DO NOTHING RETURNING secret)"
    " SELECT secret FROM made UNION ALL SELECT secret FROM webhook_secrets WHERE tenant = $1 LIMIT 1"
)


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signing_key(secret: str) -> bytes:
    """The HMAC key of a secret: the base64-decoded part after ``whsec_``."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


class WebhookSecretStore(PoolStore):
    """Shares a pool with the task store (the broker agent) or the admin CLI's key store."""

    async def secret(self, tenant: str) -> str:
        """The tenant's secret, created now if it has none."""
        for _ in range(3):
            row = await self._fetchrow(_ENSURE, tenant, new_secret())
            if row is not None:
                return str(row["secret"])
        raise RuntimeError(f"no webhook secret for tenant {tenant!r} after three tries")

    async def rotate(self, tenant: str) -> str:
        """Replace the tenant's secret (or create it); returns the new one."""
        row = await self._fetchrow(
            "INSERT INTO webhook_secrets (tenant, secret) VALUES ($1, $2) ON CONFLICT (tenant)"
            " DO UPDATE SET secret = EXCLUDED.secret, created_at = clock_timestamp() RETURNING secret",
            tenant,
            new_secret(),
        )
        assert row is not None
        return str(row["secret"])

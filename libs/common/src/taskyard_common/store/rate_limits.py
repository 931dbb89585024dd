"""A token bucket per tenant in PostgreSQL, so that every API replica draws on the same budget.

One statement refills the bucket by the time elapsed since it last changed (the database's clock, the same
for every replica) and takes a token only if a whole one is there (or N tokens only if N are there: a group
of N tasks is charged all at once, or not at all). The row lock of ``ON CONFLICT DO UPDATE``
serialises concurrent takers, so replicas never hand out the same token twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskyard_common.store._pg import PoolStore

# $1 tenant, $2 tokens per second, $3 burst (bucket size), $4 tokens to take (at most the burst).
_REFILLED = "least($3::float8, r.tokens + $2::float8 * extract(epoch FROM clock_timestamp() - r.updated_at))"
_TAKE = (
    "WITH taken AS ("
    " INSERT INTO rate_limits AS r (tenant, tokens, updated_at)"
    " VALUES ($1, $3::float8 - $4::float8, clock_timestamp())"
    f" ON CONFLICT (tenant) DO UPDATE SET tokens = {_REFILLED} - $4::float8, updated_at = clock_timestamp()"
    f" WHERE {_REFILLED} >= $4::float8"
    " RETURNING tokens)"
    " SELECT true AS allowed, tokens FROM taken"
    " UNION ALL"
    # Refused: the bucket as of this statement's snapshot, only to tell the client how long to wait.
    f" SELECT false, {_REFILLED} FROM rate_limits r"
    " WHERE r.tenant = $1 AND NOT EXISTS (SELECT 1 FROM taken)"
)


# Up to $4 tokens at once (at least one when the bucket holds one), for an API process that serves many
# requests of a tenant at the same time: one statement, and one row lock, for the lot. The row is locked
# first (FOR UPDATE), so the refill is computed from the latest committed state. No row: nothing returned.
_TAKE_UP_TO = (
    "UPDATE rate_limits AS r SET tokens = b.refilled - b.granted, updated_at = b.at"
    " FROM (SELECT tenant, at, refilled, least($4::float8, floor(refilled)) AS granted FROM ("
    " SELECT tenant, clock_timestamp() AS at,"
    " least($3::float8, tokens + $2::float8 * extract(epoch FROM clock_timestamp() - updated_at)) AS refilled"
    " FROM rate_limits WHERE tenant = $1 FOR UPDATE) AS locked) AS b"
    " WHERE r.tenant = b.tenant RETURNING b.granted, r.tokens"
)


@dataclass(frozen=True)
class TokensGranted:
    granted: int  # 0: refused
    tokens: float  # left in the shared bucket after this take


@dataclass(frozen=True)
class TokenTaken:
    allowed: bool
    # Tokens left after this request (fractional: the bucket refills continuously).
    tokens: float


class RateLimitStore(PoolStore):
    async def take(self, tenant: str, *, per_second: float, burst: int, count: int = 1) -> TokenTaken:
        """Take ``count`` tokens (1 to ``burst``) if the bucket holds them all, else none."""
        if not 1 <= count <= burst:
            raise ValueError(f"cannot take {count} tokens from a bucket of {burst}")
        row = await self._fetchrow(_TAKE, tenant, float(per_second), float(burst), float(count))
        if row is None:
            # Refused, and the row was created by a concurrent first request after our snapshot.
            return TokenTaken(allowed=False, tokens=0.0)
        allowed, tokens = bool(row["allowed"]), max(0.0, float(row["tokens"]))
        if not allowed and tokens >= count:
            # The snapshot predates concurrent takers that emptied the bucket: it holds less than asked.
            tokens = 0.0
        return TokenTaken(allowed=allowed, tokens=tokens)

    async def take_up_to(self, tenant: str, count: int, *, per_second: float, burst: int) -> TokensGranted:
        """Take as many tokens as the bucket holds, at most ``count`` (and at least one, or none)."""
        if count > 1:
            row = await self._fetchrow(_TAKE_UP_TO, tenant, float(per_second), float(burst), float(count))
            if row is not None:
                return TokensGranted(int(row["granted"]), max(0.0, float(row["tokens"])))
        # One token, or the tenant's first request (the one-token statement creates its bucket).
        taken = await self.take(tenant, per_second=per_second, burst=burst)
        return TokensGranted(1 if taken.allowed else 0, taken.tokens)

    async def shrink(self, key: str, at_most: float) -> None:
        """Never more than ``at_most`` tokens in the bucket (a provider said how much it has left)."""
        await self._fetchrow(
            "UPDATE rate_limits SET tokens = $2::float8, updated_at = clock_timestamp()"
            " WHERE tenant = $1 AND tokens > $2::float8",
            key,
            float(at_most),
        )

    async def buckets(self, prefix: str) -> dict[str, tuple[float, float]]:
        """``{key: (tokens, seconds since it last changed)}`` of the buckets whose key starts with ``prefix``."""
        rows = await self._fetch(
            "SELECT tenant, tokens, extract(epoch FROM clock_timestamp() - updated_at)::float8 AS age"
            " FROM rate_limits WHERE starts_with(tenant, $1)",
            prefix,
        )
        return {r["tenant"]: (float(r["tokens"]), float(r["age"])) for r in rows}

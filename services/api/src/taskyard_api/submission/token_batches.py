"""Per-tenant rate-limit tokens taken from the shared bucket in batches when requests arrive together.

The bucket lives in PostgreSQL so that every replica draws on one budget, and all of a tenant's takes lock
the same row until they commit: one statement per submission would queue a busy tenant's submissions on
that lock. So the requests of one tenant that arrive while a take is in flight wait for it and are then
served together: the next take asks for as many tokens as there are waiting requests (capped at a tenth of
the burst, so one replica never hoards a tenant's budget), in one statement. A lone request takes exactly
one token, and the tokens a take hands out are used at once by the requests that asked for them: nothing
is kept in reserve beyond that moment, so the limit holds exactly.

A group of N tasks takes its N tokens in a statement of its own, all or none, in turn with the batches.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from taskyard_common.store.rate_limits import RateLimitStore, TokenTaken

MAX_BATCH = 100


@dataclass
class _Tenant:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0
    reserve: int = 0  # granted to the waiting requests, not yet handed to them
    left: float = 0.0  # in the shared bucket after the last take


class BatchedBuckets:
    def __init__(self, store: RateLimitStore) -> None:
        self._store = store
        self._tenants: dict[str, _Tenant] = {}

    async def take(self, tenant: str, *, per_second: float, burst: int, count: int = 1) -> TokenTaken:
        """One token of ``tenant``'s bucket (``RateLimitStore.take``), batched with concurrent takers; or
        ``count`` (at most ``burst``) all at once, or none."""
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant()
        state.waiting += 1
        counted = True
        try:
            async with state.lock:
                state.waiting -= 1
                counted = False
                if count > 1:
                    # The reserve belongs to the single requests waiting: a group takes its own.
                    taken = await self._store.take(tenant, per_second=per_second, burst=burst, count=count)
                    state.left = taken.tokens
                    return TokenTaken(allowed=taken.allowed, tokens=state.left + state.reserve)
                if state.reserve < 1:
                    count = max(1, min(MAX_BATCH, burst // 10, state.waiting + 1))
                    granted = await self._store.take_up_to(tenant, count, per_second=per_second, burst=burst)
                    state.left = granted.tokens
                    if granted.granted < 1:
                        return TokenTaken(allowed=False, tokens=granted.tokens)
                    state.reserve = granted.granted
                state.reserve -= 1
                # What this request may report: the shared bucket plus what its fellow waiters still hold.
                return TokenTaken(allowed=True, tokens=state.left + state.reserve)
        finally:
            if counted:
                # Cancelled (the client left) while waiting for the lock: no longer waiting. Left counted,
                # every later take would ask for a token too many, and the tenant's entry would never go.
                state.waiting -= 1
            if state.waiting == 0 and not state.lock.locked() and state.reserve == 0:
                self._tenants.pop(tenant, None)

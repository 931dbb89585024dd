"""Routing decisions remembered for identical requests: bounded (LRU), with a time to live, per process.

The key is a digest of the tenant and the normalized request (case, accents, width and whitespace folded;
a JSON object with sorted keys), so "Summarize THIS  report" and "summarize this report" of one tenant share
one LLM call. The tenant is part of the key: a decision served from the cache says so (``cached``, no
tokens, a short latency), which would tell a tenant that another one sent the same text within the TTL.
Only the digest and the decision are held, never the request. A cache belongs to one ``Router``, i.e. one
catalog and one model: when the catalog changes, the router starts over with an empty cache (``emptied``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from taskyard_broker_agent.routing.text import normalize
from taskyard_common.messages import RoutingDecision, TaskInput


def _normalized(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(normalize(value).split())
    if isinstance(value, dict):
        return {_normalized(str(k)): _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def cache_key(task_input: TaskInput, tenant: str | None = None) -> bytes:
    """The digest of ``[tenant, normalized request]`` (a JSON array: no tenant name can forge another's key)."""
    text = json.dumps(
        [tenant, _normalized(task_input)], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class DecisionCache:
    """``get``/``put`` by ``cache_key``; ``max_entries=0`` or ``ttl_seconds=0`` turns it off."""

    def __init__(
        self, max_entries: int, ttl_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._max = max_entries
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, RoutingDecision]] = OrderedDict()

    def emptied(self) -> DecisionCache:
        """A new, empty cache with the same limits (a decision for another catalog must not be served)."""
        return DecisionCache(self._max, self._ttl, clock=self._clock)

    @property
    def enabled(self) -> bool:
        return self._max > 0 and self._ttl > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> RoutingDecision | None:
        if not self.enabled:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, decision = entry
        if expires <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return decision

    def put(self, key: bytes, decision: RoutingDecision) -> None:
        if not self.enabled:
            return
        self._entries[key] = (self._clock() + self._ttl, decision)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

"""The routing decision cache: normalized keys, a time to live, a bound, and nothing of the request kept."""

from taskyard_broker_agent.routing.cache import DecisionCache, cache_key
from taskyard_common.messages import RoutingDecision, RoutingMethod

DECISION = RoutingDecision(method=RoutingMethod.LLM, specialist="summarizer", reason="r", confidence=0.9)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_identical_normalized_requests_share_a_key():
    assert cache_key("Summarize  THIS report ") == cache_key("summarize this report")
    assert cache_key("Résumé du rapport") == cache_key("resume du rapport")
    assert cache_key({"b": 1, "a": "X  y"}) == cache_key({"a": "x y", "b": 1})
    assert cache_key("summarize this report") != cache_key("summarize that report")
    assert cache_key({"a": 1}) != cache_key({"a": 2})
    assert len(cache_key("x" * 100_000)) == 16  # a digest: the request itself is never held


def test_the_key_is_per_tenant():
    """A hit tells the caller someone sent the same text: only the same tenant may share a decision."""
    assert cache_key("summarize this", "acme") == cache_key("Summarize  THIS", "acme")
    assert cache_key("summarize this", "acme") != cache_key("summarize this", "globex")
    assert cache_key("summarize this", "acme") != cache_key("summarize this")
    # The tenant and the request cannot run into each other.
    assert cache_key("b", "a") != cache_key("", "ab") and cache_key(["b"], "a") != cache_key("b", "a")


def test_hits_until_the_ttl_passes():
    clock = Clock()
    cache = DecisionCache(10, 60, clock=clock)
    assert cache.get(cache_key("summarize this")) is None
    cache.put(cache_key("summarize this"), DECISION)
    assert cache.get(cache_key("Summarize   this")) == DECISION
    clock.now += 59.9
    assert cache.get(cache_key("summarize this")) == DECISION
    clock.now += 0.2
    assert cache.get(cache_key("summarize this")) is None
    assert len(cache) == 0


def test_bounded_least_recently_used_first():
    cache = DecisionCache(2, 60)
    cache.put(cache_key("a"), DECISION)
    cache.put(cache_key("b"), DECISION)
    assert cache.get(cache_key("a")) == DECISION  # "a" is now the most recently used
    cache.put(cache_key("c"), DECISION)
    assert len(cache) == 2
    assert cache.get(cache_key("b")) is None
    assert cache.get(cache_key("a")) == cache.get(cache_key("c")) == DECISION


def test_size_or_ttl_zero_turns_it_off():
    for cache in (DecisionCache(0, 60), DecisionCache(10, 0)):
        cache.put(cache_key("a"), DECISION)
        assert not cache.enabled and cache.get(cache_key("a")) is None


def test_an_emptied_cache_keeps_its_limits_and_nothing_else():
    cache = DecisionCache(2, 60.0)
    decision = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.9)
    cache.put(cache_key("a request"), decision)
    emptied = cache.emptied()
    assert emptied.get(cache_key("a request")) is None and len(emptied) == 0 and emptied.enabled
    assert (
        cache.get(cache_key("a request")) is not None
    )  # the old one is untouched (a call in flight may still use it)

"""The worker's LLM clients: sized for its concurrency, each call on the least busy client."""

from __future__ import annotations

from taskyard_common.llm import CONNECTIONS_PER_CLIENT, ClientPool, make_client
from taskyard_common.settings import LlmSettings

SETTINGS = LlmSettings(base_url="http://127.0.0.1:9/v1")


def test_a_pool_has_a_client_per_share_of_the_concurrency() -> None:
    assert len(ClientPool.create(SETTINGS, concurrency=1)) == 1
    assert len(ClientPool.create(SETTINGS, concurrency=CONNECTIONS_PER_CLIENT)) == 1
    assert len(ClientPool.create(SETTINGS, concurrency=500)) == -(-500 // CONNECTIONS_PER_CLIENT)


def test_each_call_takes_the_least_busy_client() -> None:
    clients = [make_client(SETTINGS) for _ in range(3)]
    pool = ClientPool(clients)
    with pool.client() as first, pool.client() as second, pool.client() as third:
        assert {id(first), id(second), id(third)} == {id(c) for c in clients}
        with pool.client() as fourth:
            assert fourth is clients[0]
    # All free again: the first client is taken first, as at the start.
    with pool.client() as again:
        assert again is clients[0]


def test_clients_use_the_aiohttp_transport_with_the_pool_size() -> None:
    # aiohttp's transport: about half httpx/httpcore's CPU per call (see make_client).
    client = make_client(SETTINGS, max_connections=7)
    transport = client._client._transport  # the SDK's http client, then its transport
    assert type(transport).__name__ == "AiohttpTransport"
    assert transport.limits.max_connections == 7 and transport.limits.max_keepalive_connections == 7

"""The RabbitMQ server's version, read off a connection or a channel: what the topology and the publisher
switch on (quorum-queue priorities and delivery-limit defaults differ between 3.x and 4.x). A module of its
own so that both can import it without importing each other."""

from __future__ import annotations

from aio_pika.abc import AbstractChannel, AbstractConnection


def server_version(connection: AbstractConnection) -> tuple[int, ...]:
    """The broker's version, read from the connection's server properties, to gate version-specific features."""
    transport = connection.transport
    if transport is None:  # not connected (yet): nothing to gate on
        return (0,)
    return parse_version(transport.connection.server_properties.get("version", "0"))


async def channel_server_version(channel: AbstractChannel) -> tuple[int, ...]:
    """The broker's version as seen through one channel (for code that holds a channel, not a connection)."""
    underlay = await channel.get_underlay_channel()
    return parse_version(underlay.connection.server_properties.get("version", "0"))


def parse_version(raw: object) -> tuple[int, ...]:
    """``"3.10.8"`` (or bytes) → ``(3, 10, 8)``; anything without digits counts as 0."""
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)

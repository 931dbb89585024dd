"""Webhooks, the part both sides share: the settings and the address rules.

The API refuses a webhook URL whose host is a literal address the rules refuse (422 at submission); the
broker agent's dispatcher resolves a host name at every attempt and refuses it when any of its addresses is
refused (no DNS-rebinding bypass), then connects to the address it checked. By default only public addresses
are allowed: a webhook must not become a way to reach the cluster's own services, the cloud's metadata
endpoint or the machine itself (SSRF).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from enum import StrEnum

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The terminal statuses a webhook may ask for, in lifecycle order (the default: all of them).
WEBHOOK_EVENTS = ("completed", "failed", "cancelled", "dead_lettered")


class WebhookSettings(BaseSettings):
    """Webhook deliveries (``TASKYARD_WEBHOOK_*``): read by the API (address rules) and the broker agent."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_WEBHOOK_", extra="ignore")

    # Private, link-local, unique-local, shared (CGNAT) and other non-public addresses (10/8, 172.16/12,
    # 192.168/16, 169.254/16 with the metadata endpoint, 100.64/10, fc00::/7, fe80::/10, ...).
    allow_private: bool = False
    # Loopback (127/8, ::1): `make up` allows it, so that a receiver on the same machine works.
    allow_loopback: bool = False
    # One attempt, from resolving the host to the response's status line.
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # How long a delivery is retried, from its creation (or its redelivery); then it is marked failed.
    retry_hours: float = Field(default=24.0, gt=0)
    # The backoff between attempts: base * 2^(attempt - 1), with jitter, at most max.
    backoff_base_seconds: float = Field(default=5.0, gt=0)
    backoff_max_seconds: float = Field(default=3600.0, gt=0)
    # Deliveries one broker agent sends at once.
    concurrency: int = Field(default=8, ge=1, le=256)
    # How often the dispatcher looks for due deliveries when it has nothing in hand.
    poll_seconds: float = Field(default=1.0, gt=0, le=60)


class AddressKind(StrEnum):
    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    # Never a receiver: unspecified (0.0.0.0 reaches the machine itself), multicast, broadcast.
    UNUSABLE = "unusable"


# NAT64's well-known prefix carries an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


def _embedded(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (IPv4-mapped, 6to4, NAT64), else ``ip`` itself: the
    embedded one decides where the packets go."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def classify(ip: IPAddress) -> AddressKind:
    ip = _embedded(ip)
    if ip.is_unspecified or ip.is_multicast or ip == _BROADCAST:
        return AddressKind.UNUSABLE
    if ip.is_loopback:
        return AddressKind.LOOPBACK
    if not ip.is_global:
        return AddressKind.PRIVATE
    return AddressKind.PUBLIC


def refusal(ip: IPAddress, settings: WebhookSettings) -> str | None:
    """Why a delivery to ``ip`` is refused under ``settings``; None when it is allowed."""
    kind = classify(ip)
    if kind is AddressKind.PUBLIC:
        return None
    if kind is AddressKind.LOOPBACK:
        if settings.allow_loopback:
            return None
        return f"{ip} is a loopback address (TASKYARD_WEBHOOK_ALLOW_LOOPBACK is off)"
    if kind is AddressKind.PRIVATE:
        if settings.allow_private:
            return None
        return f"{ip} is a private address (TASKYARD_WEBHOOK_ALLOW_PRIVATE is off)"
    return f"{ip} cannot receive webhooks"


# Only digits, dots and hex: the legacy IPv4 spellings (``167772161``, ``0x7f.1``, ``10.1``) that resolvers
# still read as addresses. A real host name has a letter outside [a-f] or no digit at all.
_LEGACY_IPV4 = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$", re.IGNORECASE)


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` (a URL's host, brackets allowed) spells out, or None for a host name."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    # A trailing dot (the DNS root) does not stop a resolver from reading an address.
    bare = bare.removesuffix(".")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _LEGACY_IPV4.match(bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None

"""Where http_fetch may connect: the allowlist of hosts and ports, and the addresses those hosts resolve to.

The model chooses the URL and a task's input may be written by anyone, so each hop is checked three ways:

- the host must match an allowlist entry exactly (``python.org``); an entry with a leading dot
  (``.python.org``) matches the subdomains of that domain (``docs.python.org``), not the domain itself;
- the port must be the scheme's default (80 for http, 443 for https) unless the entry names one
  (``python.org:8443``, ``.python.org:8443``);
- every address the host resolves to must be public: loopback, private, link-local (the cloud metadata
  service 169.254.169.254 included), shared, multicast, reserved and unspecified addresses are refused, IPv6
  unique-local and link-local too, and an IPv4 address embedded in IPv6 (mapped, 6to4, NAT64) is judged as
  the IPv4 address. Only ``TASKYARD_WORKER_HTTP_ALLOWED_NETWORKS`` (CIDRs) lifts that for chosen networks.

The connection then goes to the address that was checked (the caller puts it in the URL and sends the
name as ``Host`` and TLS server name), so a DNS answer that changes between check and connect (rebinding)
cannot move it elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from taskyard_worker.tools.base import ToolError

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"http": 80, "https": 443}
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class AllowEntry:
    host: str
    subdomains: bool
    port: int | None

    @classmethod
    def parse(cls, raw: str) -> AllowEntry:
        text = raw.strip().lower()
        port: int | None = None
        host, sep, tail = text.rpartition(":")
        if sep and tail.isdigit() and (not host.startswith("[") or host.endswith("]")):
            text, port = host, int(tail)
            if not 0 < port < 65536:
                raise ValueError(f"allowlist entry {raw!r}: port out of range")
        if text.startswith("[") and text.endswith("]"):  # an IPv6 literal, as URLs write it
            return cls(str(ipaddress.IPv6Address(text[1:-1])), False, port)
        subdomains = text.startswith(".")
        text = text.strip(".")
        if not text or ":" in text:
            raise ValueError(f"allowlist entry {raw!r} is not a host, .domain, [IPv6] or one with :port")
        return cls(text, subdomains, port)

    def matches(self, host: str, port: int, scheme: str) -> bool:
        if self.subdomains:
            host_ok = host.endswith("." + self.host)
        else:
            host_ok = host == self.host
        wanted = self.port if self.port is not None else DEFAULT_PORTS.get(scheme)
        return host_ok and port == wanted


def host_allowed(host: str, port: int, scheme: str, allowlist: Sequence[AllowEntry]) -> bool:
    host = host.lower().rstrip(".")
    if ":" in host:  # an IPv6 literal: compared in one spelling
        try:
            host = str(ipaddress.IPv6Address(host.strip("[]")))
        except ValueError:
            return False
    return bool(host) and any(entry.matches(host, port, scheme) for entry in allowlist)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.teredo is not None:
        return address.teredo[1]
    return None


def address_allowed(address: IpAddress, networks: Sequence[IpNetwork]) -> bool:
    """True for a public address, or one inside a network the operator allowed explicitly."""
    if any(address.version == net.version and address in net for net in networks):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return address_allowed(embedded, networks)
    if (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    ):
        return False
    return address.is_global


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system resolver (``getaddrinfo``, off the event loop)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return [str(info[4][0]) for info in infos]


async def resolve_checked(
    host: str, port: int, networks: Sequence[IpNetwork], resolver: Resolver = system_resolver
) -> IpAddress:
    """The address to connect to: ``host`` resolved once, every answer checked (one bad answer refuses the
    host, so a name that mixes a public and an internal address cannot win by chance)."""
    try:
        answers: list[IpAddress] = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        answers = [ipaddress.ip_address(a) for a in await resolver(host, port)]
    if not answers:
        raise ToolError(f"cannot resolve {host!r}")
    for address in answers:
        if not address_allowed(address, networks):
            raise ToolError(f"host {host!r} resolves to a non-public address, which is not allowed")
    return answers[0]

"""The webhook address rules: what the API refuses at submission and the dispatcher at delivery."""

import ipaddress

import pytest

from taskyard_common.webhooks import AddressKind, WebhookSettings, classify, literal_address, refusal

DEFAULTS = WebhookSettings(allow_private=False, allow_loopback=False)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("93.184.215.14", AddressKind.PUBLIC),
        ("2606:4700::1111", AddressKind.PUBLIC),
        ("127.0.0.1", AddressKind.LOOPBACK),
        ("127.8.9.10", AddressKind.LOOPBACK),
        ("::1", AddressKind.LOOPBACK),
        ("10.0.0.1", AddressKind.PRIVATE),
        ("10.255.255.254", AddressKind.PRIVATE),
        ("172.16.3.4", AddressKind.PRIVATE),
        ("192.168.1.1", AddressKind.PRIVATE),
        ("169.254.169.254", AddressKind.PRIVATE),  # the cloud metadata endpoint
        ("100.64.0.1", AddressKind.PRIVATE),  # shared address space (CGNAT)
        ("fc00::1", AddressKind.PRIVATE),
        ("fd00:ec2::254", AddressKind.PRIVATE),  # AWS's IPv6 metadata endpoint
        ("fe80::1", AddressKind.PRIVATE),
        ("::ffff:10.0.0.1", AddressKind.PRIVATE),  # IPv4-mapped: the IPv4 address decides
        ("::ffff:127.0.0.1", AddressKind.LOOPBACK),
        ("::ffff:93.184.215.14", AddressKind.PUBLIC),
        ("64:ff9b::a00:1", AddressKind.PRIVATE),  # NAT64 of 10.0.0.1
        ("2002:a00:1::", AddressKind.PRIVATE),  # 6to4 of 10.0.0.1
        ("0.0.0.0", AddressKind.UNUSABLE),
        ("::", AddressKind.UNUSABLE),
        ("224.0.0.1", AddressKind.UNUSABLE),
        ("255.255.255.255", AddressKind.UNUSABLE),
    ],
)
def test_classify(address, kind):
    assert classify(ipaddress.ip_address(address)) is kind


def test_defaults_refuse_everything_but_public_addresses():
    assert refusal(ipaddress.ip_address("93.184.215.14"), DEFAULTS) is None
    assert "private" in (refusal(ipaddress.ip_address("10.0.0.1"), DEFAULTS) or "")
    assert "loopback" in (refusal(ipaddress.ip_address("::1"), DEFAULTS) or "")


def test_each_switch_allows_its_own_kind_only():
    loopback = WebhookSettings(allow_loopback=True, allow_private=False)
    assert refusal(ipaddress.ip_address("127.0.0.1"), loopback) is None
    assert refusal(ipaddress.ip_address("10.0.0.1"), loopback) is not None
    private = WebhookSettings(allow_private=True, allow_loopback=False)
    assert refusal(ipaddress.ip_address("10.0.0.1"), private) is None
    assert refusal(ipaddress.ip_address("127.0.0.1"), private) is not None
    both = WebhookSettings(allow_private=True, allow_loopback=True)
    assert refusal(ipaddress.ip_address("0.0.0.0"), both) is not None, "never a receiver"


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("10.0.0.1", "10.0.0.1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("167772161", "10.0.0.1"),  # one number
        ("0x7f.1", "127.0.0.1"),  # hex and a short form
        ("10.1", "10.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),  # octal
        ("127.0.0.1.", "127.0.0.1"),  # the DNS root's trailing dot
    ],
)
def test_literal_addresses_in_every_spelling_resolvers_accept(host, address):
    assert literal_address(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "face.cafe", "hooks.internal", "localhost", "a1.b2"])
def test_host_names_are_not_literal_addresses(host):
    assert literal_address(host) is None

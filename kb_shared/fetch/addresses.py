"""Which IP addresses the safe fetcher (``kb_shared.fetch.fetcher``) may connect to, and how host names
become addresses.

The rule: every address a host resolves to must be public, or the fetch is refused. Python's
``ipaddress`` is not enough on its own (on 3.11 ``100.64.0.1`` is neither private nor global,
and ``224.0.0.1``, ``2002:a00:1::`` and ``64:ff9b::a00:1`` report ``is_global``), so the deny
list below is explicit, IPv6 wrappers of an IPv4 address are unwrapped and the embedded IPv4
address is judged, and ``is_global`` is only the last check. Sources: the IANA IPv4 and IPv6
Special-Purpose Address Registries (RFC 6890 and its updates) and
``../shared/notes/next-capabilities.md`` ("SSRF-safe fetching").
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: A resolver: ``(host, port) -> the IP addresses the host resolves to, as strings``. Raises
#: ``OSError`` when the name cannot be resolved. ``system_resolver`` is the default; tests
#: inject a dict lookup so every refusal is checked offline.
Resolver = Callable[[str, int], Sequence[str]]

_NetworkT = TypeVar("_NetworkT", ipaddress.IPv4Network, ipaddress.IPv6Network)


def _labelled(
    network: Callable[[str], _NetworkT], entries: Iterable[tuple[str, str]]
) -> tuple[tuple[_NetworkT, str], ...]:
    """``(network, label)`` pairs from ``(CIDR text, label)`` entries, in their order."""
    return tuple((network(cidr), label) for cidr, label in entries)


#: IPv4 ranges never fetched from, first match wins (broadcast before the reserved 240/4).
#: IANA IPv4 Special-Purpose Address Registry; 224/4 multicast from RFC 5771.
_IPV4_DENY = _labelled(
    ipaddress.IPv4Network,
    (
        ("0.0.0.0/8", "an unspecified ('this network') address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address (where cloud metadata services live)"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol-assignment address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a 6to4 relay anycast address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("255.255.255.255/32", "the broadcast address"),
        ("240.0.0.0/4", "a reserved address"),
    ),
)

#: IPv6 ranges never fetched from (IANA IPv6 Special-Purpose Address Registry, RFC 4291
#: for multicast, RFC 3879 for the deprecated site-local block, RFC 8215 for local-use NAT64).
_IPV6_DENY = _labelled(
    ipaddress.IPv6Network,
    (
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("100::/64", "a discard-only address"),
        ("2001:2::/48", "a benchmarking address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("fc00::/7", "a unique-local address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
    ),
)

#: IPv6 prefixes whose last 32 bits are an IPv4 address: (prefix, what the wrapper is called).
#: RFC 4291 (mapped, compatible), RFC 2765 (translated), RFC 6052 (NAT64 well-known prefix).
_LOW32_WRAPPERS = _labelled(
    ipaddress.IPv6Network,
    (
        ("::ffff:0:0/96", "an IPv4-mapped address"),
        ("::ffff:0:0:0/96", "an IPv4-translated address"),
        ("64:ff9b::/96", "a NAT64 address"),
        ("::/96", "an IPv4-compatible address"),
    ),
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, list[ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address wraps, and what the wrapper is called.

    Returns ``("", [])`` for an address that wraps none. Teredo (``2001::/32``, RFC 4380)
    wraps two: its server and its (de-obfuscated) client; 6to4 (``2002::/16``, RFC 3056)
    wraps bits 16-48. ``::`` and ``::1`` are their own entries in the deny list, not
    IPv4-compatible wrappers of ``0.0.0.0`` and ``0.0.0.1``.
    """
    if address in (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1")):
        return "", []
    if address.teredo is not None:
        server, client = address.teredo
        return "a Teredo address", [server, client]
    if address.sixtofour is not None:
        return "a 6to4 address", [address.sixtofour]
    for network, label in _LOW32_WRAPPERS:
        if address in network:
            return label, [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return "", []


def _denied(address: IPAddress, deny: Iterable[tuple[IPNetwork, str]]) -> str | None:
    """The label of the first ``deny`` network holding ``address``, else "a reserved address"
    when it is not globally reachable, else None."""
    for network, label in deny:
        if address in network:
            return label
    if not address.is_global:
        return "a reserved address (not globally reachable)"
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` must not be fetched from, as a noun phrase ("a private address"), or
    None for a public address.

    IPv6 wrappers are judged by the IPv4 address they carry: ``::ffff:7f00:1`` gives "an
    IPv4-mapped address of 127.0.0.1, a loopback address"; a wrapper of a public IPv4 address
    is public. Everything else goes through the explicit deny lists, then ``is_global``.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _denied(address, _IPV4_DENY)
    wrapper, inner = embedded_ipv4(address)
    if wrapper:
        for embedded in inner:
            why = _denied(embedded, _IPV4_DENY)
            if why is not None:
                return f"{wrapper} of {embedded}, {why}"
        return None
    return _denied(address, _IPV6_DENY)


def parse_address(text: str) -> IPAddress | None:
    """An address string from a resolver as an ``ipaddress`` object (an IPv6 zone such as
    ``%eth0`` dropped), or None when it is not an IP address at all."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0].strip())
    except ValueError:
        return None


def is_allowed_by(address: IPAddress, allow: Sequence[IPNetwork]) -> bool:
    """True when ``address`` lies in one of the ``allow`` networks (same IP version only)."""
    return any(
        address.version == network.version and address in network for network in allow
    )


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the operating system's resolver (``socket.getaddrinfo``, TCP).

    Returns every distinct address in the order the resolver gave them. Numeric spellings
    (``2130706433``, ``0x7f.1``, ``127.1``) come back normalised (``127.0.0.1``) without a DNS
    query. Raises ``OSError`` (``socket.gaierror``) when the name does not resolve; the
    resolver's own timeouts apply (``/etc/resolv.conf``).
    """
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    seen: list[str] = []
    for _family, _type, _proto, _canonname, sockaddr in answers:
        text = str(sockaddr[0])
        if text not in seen:
            seen.append(text)
    return seen

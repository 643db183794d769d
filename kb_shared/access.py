"""Who may reach kb's HTTP servers: the loopback-only default, bearer tokens and the Host
check against DNS rebinding. One rule set for the MCP server's HTTP app (``kb_mcp.http``) and
the upload page ``kb ui`` serves (``kb_assets.upload``), which must not import each other
(DESIGN.md "Layout").

* A non-loopback bind (``0.0.0.0``/``::`` included) needs bearer tokens (``KB_MCP_TOKENS``)
  or the operator's explicit ``--public`` (``exposure_problem``).
* Tokens are compared in constant time (``hmac.compare_digest``; ``bearer_authorised``).
* Host headers must match a pattern of ``host_patterns`` (the SDK's syntax: ``name`` or
  ``name:*`` for any port); ``host_allowed`` applies it.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

_LOOPBACK_NAMES = ("localhost",)

#: Addresses that listen on every interface: never a Host header a browser sends.
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``)."""
    if host.strip("[]").lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_problem(
    host: str, tokens: Sequence[str], public: bool, *, public_flag: str = "--public"
) -> str | None:
    """Why a server must not start on ``host``, or ``None`` when it may.

    A non-loopback bind (including ``0.0.0.0``/``::``, which listen on every interface)
    exposes the corpus and its files to the network, so it needs bearer tokens or an explicit
    ``public_flag`` from the operator.
    """
    if is_loopback(host) or tokens or public:
        return None
    return (
        f"refusing to serve on {host!r} without authentication: a non-loopback address exposes "
        "the corpus to the network. Set KB_MCP_TOKENS to one or more comma-separated bearer "
        "tokens (clients send 'Authorization: Bearer <token>'), or pass "
        f"{public_flag} to serve it openly on purpose, or bind 127.0.0.1."
    )


def bracket_host(host: str) -> str:
    """``host`` as it goes in a URL or Host header: an IPv6 literal in brackets (RFC 3986
    section 3.2.2), anything else unchanged. Already bracketed input is accepted."""
    bare = host.strip("[]")
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]"
    except ValueError:
        pass
    return host


def host_patterns(bound: str, *, public_url: str | None, extra: Iterable[str]) -> list[str]:
    """Host header values accepted (``host:*`` = any port), in the SDK's pattern syntax.

    Loopback always; ``bound`` unless it is a wildcard address; the host of ``public_url``;
    and every entry of ``extra`` (``KB_MCP_ALLOWED_HOSTS``; an entry without a port is
    accepted with and without one).
    """
    hosts = ["127.0.0.1", "localhost", "[::1]"]
    if bound not in WILDCARD_HOSTS:
        hosts.append(bracket_host(bound))
    if public_url:
        netloc = urlsplit(public_url).netloc.rsplit("@", 1)[-1]
        if netloc:
            hosts.append(netloc)
    hosts += [h.strip() for h in extra if h.strip()]
    patterns: list[str] = []
    for host in hosts:
        has_port = host.rsplit("]", 1)[-1].count(":") == 1 if host.startswith("[") else (
            host.count(":") == 1
        )
        variants = [host] if has_port else [host, f"{host}:*"]
        patterns += [v for v in variants if v not in patterns]
    return patterns


def host_allowed(host: str | None, patterns: Sequence[str]) -> bool:
    """The SDK's Host rule: an exact pattern, or ``name:*`` for ``name`` with any port."""
    if not host:
        return False
    if host in patterns:
        return True
    return any(p.endswith(":*") and host.startswith(p[:-1]) for p in patterns)


def bearer_authorised(authorization: str, tokens: Sequence[bytes]) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <one of tokens>`` (constant-time
    comparison; an empty ``tokens`` authorises nothing)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return False
    given = token.strip().encode("utf-8")
    return any(hmac.compare_digest(given, expected) for expected in tokens)

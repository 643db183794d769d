"""The safe fetcher: the only code in kb that downloads a URL (issue 12, "A safe fetcher").

``fetch(url, expect=Expectation.PDF, policy=FetchPolicy.from_settings(settings))`` returns the
body as bytes or raises a ``FetchError``; it writes nothing anywhere. The rules, each a
refusal with its own message:

* https only; plain http only for a host listed in ``KB_FETCH_ALLOW_HTTP_HOSTS``;
  no credentials in the URL (kb never sends any, so none can leak across a redirect);
* the host is resolved once per hop and **every** answer must be public
  (``kb_shared.fetch.addresses``); the connection then goes to the address that was checked,
  never to a second resolution, while the host name stays in the Host header, the TLS SNI
  and the certificate check (``kb_shared.fetch.transport``);
* redirects are followed by hand, at most ``MAX_REDIRECTS``, every hop re-checked, a loop
  refused;
* the answer's content type and its first bytes must both be what the caller expects;
* the body is streamed and the transfer stops as soon as it passes the size cap; connect,
  read and total timeouts apply (the total one bounds every socket operation).

Sources: issue 12 and ``../shared/notes/next-capabilities.md`` ("SSRF-safe fetching").
"""

from __future__ import annotations

import hashlib
import math
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpcore
import httpx

from kb_shared.errors import FetchFailedError, FetchRefusedError
from kb_shared.fetch.addresses import (
    IPNetwork,
    Resolver,
    is_allowed_by,
    parse_address,
    refusal,
    system_resolver,
)
from kb_shared.fetch.content import (
    BodyReader,
    Expectation,
    check_headers,
    check_text,
    check_workbook,
    file_name,
)
from kb_shared.fetch.transport import Deadline, PinnedBackend, failure_reason
from kb_shared.settings import Settings

#: Most redirects one fetch follows (issue 12).
MAX_REDIRECTS = 5

#: Statuses followed as redirects; the next request is always a GET without a body.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

#: Sent with every request, so a server operator can tell what is downloading.
USER_AGENT = "kb-fetcher/1"


@dataclass(frozen=True)
class FetchPolicy:
    """The limits of one fetch. Build it with ``from_settings``; tests construct it directly.

    Attributes:
        max_bytes: largest body accepted, in bytes; the transfer stops once it is passed.
        connect_timeout: seconds for the TCP connect and the TLS handshake.
        read_timeout: seconds any single read (or write) may wait.
        total_timeout: seconds for the whole fetch, redirects included; it bounds every
            socket operation, so a server trickling bytes cannot outlast it.
        allow_http_hosts: host names (lower case, IDNA) that may be fetched over plain http.
        allow_addresses: **tests only** — networks exempt from the address deny list, so a
            test can reach its server on 127.0.0.1. No setting feeds it and
            ``from_settings`` always leaves it empty; production code never sets it.
        ssl_context: the TLS context (None = the certifi CA bundle, as httpx uses). It must
            verify certificates and host names; tests pass one that trusts their test CA.

    Raises:
        ValueError: a non-positive limit, or an ``ssl_context`` that skips verification.
    """

    max_bytes: int
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    total_timeout: float = 300.0
    allow_http_hosts: frozenset[str] = frozenset()
    allow_addresses: tuple[IPNetwork, ...] = ()
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        limits = (self.max_bytes, self.connect_timeout, self.read_timeout, self.total_timeout)
        if min(limits) <= 0:
            raise ValueError(f"fetch limits must be positive, got {limits}")
        context = self.ssl_context
        if context is not None and (
            context.verify_mode != ssl.CERT_REQUIRED or not context.check_hostname
        ):
            raise ValueError("FetchPolicy.ssl_context must verify certificates and host names")

    @classmethod
    def from_settings(cls, settings: Settings, *, max_bytes: int | None = None) -> FetchPolicy:
        """The production policy: timeouts and http hosts from ``KB_FETCH_*``, the size cap
        from ``max_bytes`` or else ``KB_MAX_UPLOAD_BYTES``; no address is ever exempt."""
        hosts = (settings.fetch_allow_http_hosts or "").split(",")
        return cls(
            max_bytes=max_bytes if max_bytes is not None else settings.max_upload_bytes,
            connect_timeout=settings.fetch_connect_timeout,
            read_timeout=settings.fetch_read_timeout,
            total_timeout=settings.fetch_total_timeout,
            allow_http_hosts=frozenset(_normal_host(h) for h in hosts if h.strip()),
        )


@dataclass(frozen=True)
class Fetched:
    """A successful download.

    Attributes:
        url: the URL the caller asked for.
        final_url: the URL the body came from, after redirects.
        redirects: every URL redirected to, in order (empty without redirects).
        address: the IP address the body was downloaded from.
        name: the file name from ``Content-Disposition`` (``filename*`` first, RFC 6266) or
            else the last segment of ``final_url``'s path, percent-decoded, with any
            directory part dropped; None when neither gives one.
        content_type: the media type as sent, lower case, without parameters.
        data: the body.
        sha256: hex SHA-256 of ``data``.
    """

    url: str
    final_url: str
    redirects: tuple[str, ...]
    address: str
    name: str | None
    content_type: str
    data: bytes = field(repr=False)
    sha256: str


@dataclass(frozen=True)
class _Redirect:
    location: str


@dataclass(frozen=True)
class _Body:
    content_type: str
    disposition: str | None
    data: bytes


def fetch(
    url: str,
    *,
    expect: Expectation,
    policy: FetchPolicy,
    resolver: Resolver | None = None,
) -> Fetched:
    """Download ``url`` under ``policy`` and return it if it is what ``expect`` names.

    ``resolver`` maps ``(host, port)`` to address strings (default: the system resolver);
    it is called once per hop for a host name, never for an IP literal.

    Raises:
        FetchRefusedError: the policy refused the URL, an address, a redirect or the
            content; the message says which and why ("refused: api.example.com resolved to
            10.0.0.5, a private address").
        FetchFailedError: DNS, connection, TLS, timeout or HTTP status failure.
    """
    resolve = resolver or system_resolver
    deadline = Deadline(time.monotonic() + policy.total_timeout, policy.total_timeout)
    context = policy.ssl_context or httpcore.default_ssl_context()
    current = _parse(url, url, policy)
    seen = {str(current)}
    redirects: list[str] = []
    while True:
        address = _pin(current, url, policy, resolve, deadline)
        outcome = _get(current, url, address, expect, policy, context, deadline)
        if isinstance(outcome, _Body):
            break
        target = _parse(outcome.location, url, policy, base=current)
        if str(target) in seen:
            raise FetchRefusedError(
                f"refused: redirect loop, {current} redirected back to {target}",
                url=url,
                reason="redirect_loop",
            )
        if len(redirects) == MAX_REDIRECTS:
            raise FetchRefusedError(
                f"refused: {url} redirected more than {MAX_REDIRECTS} times "
                f"(the next hop was {target})",
                url=url,
                reason="too_many_redirects",
            )
        seen.add(str(target))
        redirects.append(str(target))
        current = target
    return Fetched(
        url=url,
        final_url=str(current),
        redirects=tuple(redirects),
        address=address,
        name=file_name(outcome.disposition, current),
        content_type=outcome.content_type,
        data=outcome.data,
        sha256=hashlib.sha256(outcome.data).hexdigest(),
    )


def check_url(url: str, policy: FetchPolicy) -> str:
    """Check ``url`` as ``fetch`` would before connecting, with no network at all: scheme,
    host, credentials, and the address of an IP-literal host (a host name is resolved only
    when it is fetched). Returns the URL as ``fetch`` would request it.

    Raises:
        FetchRefusedError: the same message ``fetch`` would give for these checks.
    """
    target = _parse(url, url, policy)
    if parse_address(target.raw_host.decode("ascii")) is not None:
        _pin(target, url, policy, system_resolver, Deadline(math.inf, math.inf))
    return str(target)


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _parse(text: str, url: str, policy: FetchPolicy, *, base: httpx.URL | None = None) -> httpx.URL:
    """``text`` (joined to ``base`` for a redirect's Location) as a URL the policy accepts."""
    try:
        parsed = base.join(text) if base is not None else httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise FetchRefusedError(
            f"refused: {text!r} is not a valid URL ({exc})", url=url, reason="url"
        ) from None
    parsed = parsed.copy_with(fragment=None)
    host = _normal_host(parsed.host)
    if parsed.scheme not in {"https", "http"}:
        raise FetchRefusedError(
            f"refused: {text} uses {parsed.scheme or 'no'} scheme; only https is fetched",
            url=url,
            reason="scheme",
        )
    if not host:
        raise FetchRefusedError(f"refused: {text} names no host", url=url, reason="url")
    if parsed.userinfo:
        raise FetchRefusedError(
            f"refused: {parsed.copy_with(username=None, password=None)} carries credentials "
            "in the URL; kb sends none",
            url=url,
            reason="url",
        )
    if parsed.scheme == "http" and host not in policy.allow_http_hosts:
        blocked = _refused_literal(host, policy)
        if blocked is not None:  # naming the http allow list would be advice that cannot work
            raise FetchRefusedError(f"refused: {blocked}", url=url, reason="address")
        raise FetchRefusedError(
            f"refused: {text} is plain http; only https is fetched (KB_FETCH_ALLOW_HTTP_HOSTS "
            f"may list {host} to allow plain http; its addresses must still be public)",
            url=url,
            reason="scheme",
        )
    return parsed


def _refused_literal(host: str, policy: FetchPolicy) -> str | None:
    """"HOST is <why>" when ``host`` is an IP address kb never fetches from (``refusal``) and
    ``policy.allow_addresses`` does not exempt it; None for a name or a public address."""
    address = parse_address(host)
    if address is None or is_allowed_by(address, policy.allow_addresses):
        return None
    why = refusal(address)
    return None if why is None else f"{host} is {why}"


def _port(target: httpx.URL) -> int:
    return target.port or (443 if target.scheme == "https" else 80)


def _pin(
    target: httpx.URL, url: str, policy: FetchPolicy, resolve: Resolver, deadline: Deadline
) -> str:
    """Resolve the hop's host once, refuse unless every answer is public, and return the
    address to connect to (the first answer)."""
    host = target.raw_host.decode("ascii")
    if parse_address(host) is not None:  # an IP address: no lookup, the address rule alone
        blocked = _refused_literal(host, policy)
        if blocked is not None:
            raise FetchRefusedError(f"refused: {blocked}", url=url, reason="address")
        answers: list[str] = [host]
    else:
        try:
            answers = list(resolve(host, _port(target)))
        except OSError as exc:
            raise FetchFailedError(
                f"failed: could not resolve {host} ({exc})", url=url, reason="dns"
            ) from None
    if not answers:
        raise FetchRefusedError(
            f"refused: {host} resolved to no address", url=url, reason="address"
        )
    for text in answers:
        address = parse_address(text)
        if address is None:
            raise FetchRefusedError(
                f"refused: {host} resolved to {text!r}, which is not an IP address",
                url=url,
                reason="address",
            )
        if is_allowed_by(address, policy.allow_addresses):
            continue
        why = refusal(address)
        if why is not None:
            raise FetchRefusedError(
                f"refused: {host} resolved to {address}, {why}", url=url, reason="address"
            )
    if deadline.expired():
        raise _total_timeout(url, deadline)
    return str(parse_address(answers[0]))


def _get(
    target: httpx.URL,
    url: str,
    address: str,
    expect: Expectation,
    policy: FetchPolicy,
    context: ssl.SSLContext,
    deadline: Deadline,
) -> _Redirect | _Body:
    """One GET to ``address`` for ``target``: a redirect to follow, or the checked body."""
    host = target.raw_host.decode("ascii")
    backend = PinnedBackend(host=host, address=address, deadline=deadline)
    request_url = httpcore.URL(
        scheme=target.raw_scheme, host=target.raw_host, port=_port(target), target=target.raw_path
    )
    headers = [
        (b"Host", target.netloc),
        (b"User-Agent", USER_AGENT.encode()),
        (b"Accept", ", ".join(sorted(expect.content_types)).encode()),
        (b"Accept-Encoding", b"identity"),
        (b"Connection", b"close"),
    ]
    timeouts = {
        "connect": policy.connect_timeout,
        "read": policy.read_timeout,
        "write": policy.read_timeout,
        "pool": policy.connect_timeout,
    }
    cap = expect.cap(policy.max_bytes)
    reader = BodyReader(target, url, expect, cap)
    try:
        with httpcore.ConnectionPool(
            ssl_context=context, network_backend=backend, max_connections=1, retries=0
        ) as pool:
            with pool.stream(
                "GET", request_url, headers=headers, extensions={"timeout": timeouts}
            ) as response:
                answer = _header_map(response.headers)
                if response.status in REDIRECT_STATUSES:
                    return _redirect(response.status, answer, target, url)
                if response.status != 200:
                    phrase = response.extensions.get("reason_phrase", b"").decode("latin-1")
                    raise FetchFailedError(
                        f"failed: {target} answered {response.status} {phrase}".rstrip(),
                        url=url,
                        reason="status",
                    )
                content_type = check_headers(answer, target, url, expect, cap)
                data = reader.read(response.iter_stream())
    except httpcore.TimeoutException as exc:
        if deadline.bound:
            raise _total_timeout(url, deadline, reader.received) from None
        step, seconds = (
            ("connect", policy.connect_timeout)
            if isinstance(exc, httpcore.ConnectTimeout)
            else ("read", policy.read_timeout)
        )
        raise FetchFailedError(
            f"failed: {target} (at {address}) timed out: no progress within the "
            f"{seconds:g} s {step} timeout",
            url=url,
            reason="timeout",
            received=reader.received,
        ) from None
    except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
        reason, detail = failure_reason(exc)
        raise FetchFailedError(
            f"failed: {target} (at {address}): {detail}", url=url, reason=reason
        ) from None
    if expect is Expectation.WORKBOOK:
        check_workbook(data, target, url)
    elif expect is Expectation.HTML:
        check_text(data, target, url)
    disposition = answer.get("content-disposition")
    return _Body(content_type=content_type, disposition=disposition, data=data)


def _total_timeout(url: str, deadline: Deadline, received: int = 0) -> FetchFailedError:
    return FetchFailedError(
        f"failed: {url} took longer than the {deadline.seconds:g} s total timeout",
        url=url,
        reason="timeout",
        received=received,
    )


def _header_map(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Response headers as ``{lower-case name: value}`` (a repeated header keeps its last)."""
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}


def _redirect(status: int, headers: dict[str, str], target: httpx.URL, url: str) -> _Redirect:
    location = headers.get("location", "").strip()
    if not location:
        raise FetchFailedError(
            f"failed: {target} answered {status} without a Location", url=url, reason="status"
        )
    return _Redirect(location)


__all__ = ["MAX_REDIRECTS", "Expectation", "FetchPolicy", "Fetched", "fetch"]

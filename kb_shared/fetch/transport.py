"""The connection side of the safe fetcher (``kb_shared.fetch.fetcher``): an httpcore network backend
that dials the one IP address the fetcher checked, and a deadline that bounds every socket
operation of a fetch.

Why pinning: a name resolved again at connect time can answer differently (DNS rebinding),
so the check would not cover the connection. ``PinnedBackend`` ignores the resolver
entirely: httpcore asks it to connect to the URL's host name, and it connects to the pinned
address instead. httpcore keeps using the host name for the Host header and passes it as
``server_hostname`` to TLS, so SNI and certificate verification are for the name (httpcore
``_sync/connection.py``: ``connect_tcp(host=origin.host)``, then
``start_tls(server_hostname=origin.host)``).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore


class Deadline:
    """The end of a fetch's total time budget, on the ``time.monotonic`` clock.

    Attributes:
        at: monotonic time at which the budget runs out.
        seconds: the whole budget, for messages.
        bound: True once an operation's timeout was cut short by the deadline (or refused
            because it had passed), so a timeout then is the total one, not a read timeout.
    """

    def __init__(self, at: float, seconds: float) -> None:
        self.at = at
        self.seconds = seconds
        self.bound = False

    def expired(self) -> bool:
        """True when the budget is used up."""
        return time.monotonic() >= self.at

    def limit(self, timeout: float | None, exceeded: type[httpcore.TimeoutException]) -> float:
        """``timeout`` (seconds; None = unbounded) cut to the time left.

        Raises:
            httpcore.TimeoutException: of type ``exceeded``, when no time is left.
        """
        left = self.at - time.monotonic()
        if left <= 0:
            self.bound = True
            raise exceeded("the fetch's total timeout has passed")
        if timeout is None or left < timeout:
            self.bound = True
            return left
        return timeout


class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose reads, writes and TLS handshake never wait past the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read at most ``max_bytes`` (see ``httpcore.NetworkStream.read``)."""
        return self._inner.read(max_bytes, self._deadline.limit(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write all of ``buffer`` (see ``httpcore.NetworkStream.write``)."""
        self._inner.write(buffer, self._deadline.limit(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        """Close the connection."""
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        """Upgrade to TLS, verifying the certificate for ``server_hostname``."""
        limited = self._deadline.limit(timeout, httpcore.ConnectTimeout)
        upgraded = self._inner.start_tls(ssl_context, server_hostname, limited)
        return DeadlineStream(upgraded, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        """Transport details (``ssl_object``, ``server_addr``, ...) from the inner stream."""
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects every request for ``host`` to ``address`` and refuses any other host.

    Args:
        host: the URL's host (ASCII, as httpcore passes it to ``connect_tcp``).
        address: the checked IP address to dial.
        deadline: the fetch's total budget; connect and every later operation respect it.
    """

    def __init__(self, *, host: str, address: str, deadline: Deadline) -> None:
        self.host = host
        self.address = address
        self.deadline = deadline
        self._dialer = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Dial ``address``:``port`` in place of ``host``.

        Raises:
            httpcore.ConnectError: ``host`` is not the host this backend was pinned for.
            httpcore.ConnectTimeout: the connect timeout or the total deadline passed.
        """
        if host != self.host:
            raise httpcore.ConnectError(
                f"pinned to {self.host} ({self.address}); refusing to connect to {host}"
            )
        stream = self._dialer.connect_tcp(
            self.address,
            port,
            timeout=self.deadline.limit(timeout, httpcore.ConnectTimeout),
            local_address=local_address,
            socket_options=socket_options,
        )
        return DeadlineStream(stream, self.deadline)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        """Never used by the fetcher.

        Raises:
            httpcore.ConnectError: always.
        """
        raise httpcore.ConnectError("the fetcher never connects to a Unix socket")

    def sleep(self, seconds: float) -> None:
        """Sleep (httpcore calls this only between connect retries, which the fetcher
        turns off)."""
        time.sleep(seconds)


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """A ``FetchFailedError`` reason code and a short description for an httpcore network
    or protocol error: ``tls`` when certificate or host-name verification failed (the
    ``ssl`` error is the exception's cause), else ``connect``, ``protocol`` or ``network``."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return "tls", f"TLS certificate verification failed ({cause.verify_message})"
    if isinstance(cause, ssl.SSLError):
        return "tls", f"TLS failed ({cause.reason or cause})"
    if isinstance(exc, httpcore.ConnectError):
        return "connect", f"could not connect ({exc})"
    if isinstance(exc, httpcore.ProtocolError):
        return "protocol", f"the server's answer is not valid HTTP ({exc})"
    return "network", f"the connection failed ({exc})"

"""A local HTTP(S) server and a throwaway certificate authority for the safe-fetcher tests.

The server binds 127.0.0.1 only, answers from a table of routes (path -> behaviour), records
what it was asked and how many body bytes each route sent, and every loop in it is bounded.
Certificates are made with ``cryptography``: a CA, and a leaf for the test host names.
"""

from __future__ import annotations

import datetime
import http.server
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CHUNK = 64 * 1024


@dataclass(frozen=True)
class LocalCertificates:
    """A test CA (PEM) and a server certificate + key it signed, as files."""

    ca_pem: str
    cert_file: Path
    key_file: Path

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context that trusts only the test CA."""
        return ssl.create_default_context(cadata=self.ca_pem)

    def server_context(self) -> ssl.SSLContext:
        """The server side: the leaf certificate and its key."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path, host_names: Sequence[str]) -> LocalCertificates:
    """A fresh CA and a leaf valid for ``host_names`` (DNS SANs), written under
    ``directory``; valid from one hour ago for one day."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kb fetch test CA"))
        .issuer_name(_name("kb fetch test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host_names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name) for name in host_names]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file = directory / "server.pem"
    key_file = directory / "server.key"
    cert_file.write_bytes(leaf_cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    return LocalCertificates(ca_pem=ca_pem, cert_file=cert_file, key_file=key_file)


class Handler(http.server.BaseHTTPRequestHandler):
    """Dispatches a GET to the server's route for its path (404 when there is none)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's method name)
        """Record the request, then run its route."""
        owner = self.server.owner
        with owner.lock:
            owner.requests.append((self.path, self.headers.get("Host", "")))
        route = owner.routes.get(self.path)
        if route is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        route(self, owner)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet: the tests assert on ``FetchServer.requests`` instead."""

    def start(self, status: int, headers: dict[str, str]) -> None:
        """Send the status line and ``headers`` (plus ``Connection: close``)."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True


Route = Callable[[Handler, "FetchServer"], None]


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    owner: FetchServer

    def finish_request(  # type: ignore[override]
        self, request: socket.socket, client_address: object
    ) -> None:
        tls = self.owner.tls
        if tls is not None:
            try:
                request = tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # the client refused the certificate: nothing to serve
        try:
            super().finish_request(request, client_address)
        except (ssl.SSLError, OSError):
            return  # the client hung up (a refused or abandoned download)


class FetchServer:
    """An HTTP (or, with ``tls``, HTTPS) server on 127.0.0.1 and a free port, as a context
    manager.

    Attributes:
        port: the port it listens on.
        requests: ``(path, Host header)`` of every request, in order.
        sent: body bytes each streaming route wrote, by path.
        done: set when a streaming route has stopped, by path.
    """

    def __init__(self, routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.tls = tls
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.sent: dict[str, int] = {}
        self.done: dict[str, threading.Event] = {}
        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        # shutdown() waits for the loop to look again: every 0.05 s, not socketserver's 0.5 s
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FetchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def paths(self) -> list[str]:
        """The paths requested so far."""
        with self.lock:
            return [path for path, _host in self.requests]


def body(content_type: str, data: bytes, headers: dict[str, str] | None = None) -> Route:
    """A 200 answer with ``data`` and its Content-Length (no Content-Type when empty)."""

    def route(handler: Handler, server: FetchServer) -> None:
        sent = {"Content-Type": content_type} if content_type else {}
        handler.start(200, {**sent, "Content-Length": str(len(data)), **(headers or {})})
        handler.wfile.write(data)

    return route


def redirect(location: str, status: int = 302) -> Route:
    """A redirect to ``location`` (omitted when empty)."""

    def route(handler: Handler, server: FetchServer) -> None:
        headers = {"Content-Length": "0"}
        if location:
            headers["Location"] = location
        handler.start(status, headers)

    return route


def _streaming(path: str, server: FetchServer) -> threading.Event:
    with server.lock:
        server.sent[path] = 0
        return server.done.setdefault(path, threading.Event())


def endless(content_type: str, head: bytes, limit: int) -> Route:
    """A body with no Content-Length that keeps coming: ``head`` then 64 KiB chunks until
    ``limit`` bytes or the client hangs up; the bytes written land in ``server.sent``."""

    def route(handler: Handler, server: FetchServer) -> None:
        done = _streaming(handler.path, server)
        handler.start(200, {"Content-Type": content_type})
        sent = 0
        chunk = head + b"0" * (CHUNK - len(head))
        try:
            while sent < limit:
                handler.wfile.write(chunk)
                sent += len(chunk)
                chunk = b"0" * CHUNK
        except OSError:
            pass
        finally:
            with server.lock:
                server.sent[handler.path] = sent
            done.set()

    return route


def trickle(content_type: str, head: bytes, interval: float, limit: int) -> Route:
    """``head``, then one byte every ``interval`` seconds, at most ``limit`` bytes."""

    def route(handler: Handler, server: FetchServer) -> None:
        done = _streaming(handler.path, server)
        handler.start(200, {"Content-Type": content_type})
        try:
            handler.wfile.write(head)
            handler.wfile.flush()
            for _ in range(limit):
                time.sleep(interval)
                handler.wfile.write(b"0")
                handler.wfile.flush()
        except OSError:
            pass
        finally:
            done.set()

    return route


def stall(content_type: str, seconds: float) -> Route:
    """Headers, then nothing for ``seconds``, then the connection closes."""

    def route(handler: Handler, server: FetchServer) -> None:
        done = _streaming(handler.path, server)
        handler.start(200, {"Content-Type": content_type})
        handler.wfile.flush()
        time.sleep(seconds)
        done.set()

    return route

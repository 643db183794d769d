"""The safe fetcher (kb_shared/fetch/, issue 12): a table of hostile cases, each refused
with its own message, and happy paths over a real local TLS connection.

Every host name goes through an injected resolver (a dict), so nothing here needs a network;
the numeric spellings (``2130706433``, ``0x7f.1``) go through the real system resolver, which
answers them locally. Test servers bind 127.0.0.1 and are reached only because the test
policy exempts exactly 127.0.0.1/32 through ``FetchPolicy.allow_addresses`` (tests only).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import ipaddress
import socket
import ssl
import time
import zipfile
from collections.abc import Iterator, Sequence

import httpcore
import httpx
import pytest

from kb_shared.errors import FetchFailedError, FetchRefusedError, SettingsError
from kb_shared.fetch.fetcher import MAX_REDIRECTS, Expectation, FetchPolicy, Fetched, fetch
from kb_shared.fetch.addresses import parse_address, refusal
from kb_shared.fetch.content import XLSM_CONTENT_TYPE, XLSX_CONTENT_TYPE, file_name
from kb_shared.fetch.transport import Deadline, PinnedBackend
from kb_shared.settings import Settings
from tests.fetch_server import (
    CHUNK,
    FetchServer,
    Handler,
    LocalCertificates,
    Route,
    body,
    endless,
    make_certificates,
    redirect,
    stall,
    trickle,
)

HOST = "docs.example.test"
OTHER_HOST = "files.example.test"
LOOPBACK_ONLY = ipaddress.IPv4Network("127.0.0.1/32")

PDF = b"%PDF-1.7\n" + b"1 0 obj\n<< /Type /Catalog >>\nendobj\n" * 40 + b"%%EOF\n"
HTML = b"<!DOCTYPE html><html><body>not a pdf</body></html>"


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


WORKBOOK = _zip(
    {
        "[Content_Types].xml": b"<Types/>",
        "xl/workbook.xml": b"<workbook><sheets/></workbook>",
    }
)
NOT_A_WORKBOOK = _zip({"word/document.xml": b"<document/>"})
CAP = 200_000


class FakeResolver:
    """A dict lookup that records every call; unknown names fail as DNS would."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


def strict_policy(**changes: object) -> FetchPolicy:
    """The production shape: no exempt address, the default (certifi) trust store."""
    values: dict[str, object] = {
        "max_bytes": 1_000_000,
        "connect_timeout": 2.0,
        "read_timeout": 2.0,
        "total_timeout": 10.0,
    }
    values.update(changes)
    return FetchPolicy(**values)  # type: ignore[arg-type]


# --- the local servers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LocalCertificates:
    return make_certificates(tmp_path_factory.mktemp("fetch-tls"), [HOST, OTHER_HOST])


def local_policy(certs: LocalCertificates, **changes: object) -> FetchPolicy:
    """Reaches the test servers: 127.0.0.1/32 exempt, the test CA trusted."""
    return strict_policy(
        allow_addresses=(LOOPBACK_ONLY,), ssl_context=certs.client_context(), **changes
    )


def _routes() -> dict[str, Route]:
    disposition = (
        "attachment; filename=\"fallback.pdf\"; filename*=UTF-8''B2B%20Procedure%20v3.2.pdf"
    )
    routes = {
        "/doc.pdf": body("application/pdf", PDF, {"Content-Disposition": disposition}),
        "/plain.pdf": body("application/pdf", PDF),
        "/Schedule%202%20-%20Q3%202025-26.xlsm": body(
            "application/vnd.ms-excel.sheet.macroEnabled.12", WORKBOOK
        ),
        "/page.pdf": body("text/html; charset=utf-8", PDF),
        "/untyped.pdf": body("", PDF),
        "/fake.pdf": body("application/pdf", HTML),
        "/tiny.pdf": body("application/pdf", b"%P"),
        "/report.xlsx": body("application/pdf", PDF),
        "/not-a-workbook.xlsx": body(XLSX_CONTENT_TYPE, NOT_A_WORKBOOK),
        "/truncated.xlsx": body(XLSX_CONTENT_TYPE, b"PK\x03\x04" + b"\x00" * 40),
        "/gzipped.pdf": body("application/pdf", gzip.compress(PDF), {"Content-Encoding": "gzip"}),
        "/declared-huge.pdf": _declared_huge,
        "/grows.pdf": endless("application/pdf", b"%PDF-1.7\n", limit=256 * 1024 * 1024),
        "/slow.pdf": trickle("application/pdf", b"%PDF-1.7\n", interval=0.05, limit=400),
        "/stalls.pdf": stall("application/pdf", seconds=3.0),
        "/to-private": redirect("https://internal.example.test/doc.pdf"),
        "/to-metadata": redirect("https://169.254.169.254/latest/meta-data/iam/", 301),
        "/to-file": redirect("file:///etc/passwd"),
        "/loop-a": redirect("/loop-b"),
        "/loop-b": redirect("/loop-a", 307),
        "/self": redirect("/self", 308),
        "/no-location": redirect(""),
        "/moved": redirect("/doc.pdf", 303),
    }
    for hop in range(1, MAX_REDIRECTS + 2):
        routes[f"/chain/{hop}"] = redirect(f"/chain/{hop - 1}")
    routes["/chain/0"] = body("application/pdf", PDF)
    return routes


def _declared_huge(handler: Handler, server: FetchServer) -> None:
    """Declares a gigabyte, sends a PDF header, hangs up."""
    handler.start(200, {"Content-Type": "application/pdf", "Content-Length": str(10**9)})
    handler.wfile.write(b"%PDF-1.7\n")


@pytest.fixture(scope="module")
def server(certs: LocalCertificates) -> Iterator[FetchServer]:
    with FetchServer(_routes(), tls=certs.server_context()) as running:
        port = running.port
        running.routes["/to-other-host"] = redirect(f"https://{OTHER_HOST}:{port}/plain.pdf")
        running.routes["/to-other-loopback"] = redirect(f"https://127.0.0.2:{port}/doc.pdf")
        running.routes["/to-http"] = redirect(f"http://{HOST}:{port}/doc.pdf")
        yield running


@pytest.fixture(scope="module")
def plain_server() -> Iterator[FetchServer]:
    with FetchServer({"/doc.pdf": body("application/pdf", PDF)}) as running:
        yield running


@pytest.fixture
def resolver() -> FakeResolver:
    return FakeResolver(
        {
            HOST: ["127.0.0.1"],
            OTHER_HOST: ["127.0.0.1"],
            "evil.example.test": ["127.0.0.1"],
            "plain.example.test": ["127.0.0.1"],
            "internal.example.test": ["10.0.0.5"],
        }
    )


def at(server: FetchServer, path: str, host: str = HOST) -> str:
    return f"https://{host}:{server.port}{path}"


def get_pdf(url: str, policy: FetchPolicy, resolver: FakeResolver) -> Fetched:
    return fetch(url, expect=Expectation.PDF, policy=policy, resolver=resolver)


# --- hostile case table 1: what a host name resolves to --------------------------------

METADATA = "a link-local address (where cloud metadata services live)"

#: (id, resolver answers, the refused address as printed, why) — each must be refused.
HOSTILE_ANSWERS = [
    ("v4-unspecified", ["0.0.0.0"], "0.0.0.0", "an unspecified ('this network') address"),
    ("v4-this-network", ["0.1.2.3"], "0.1.2.3", "an unspecified ('this network') address"),
    ("v4-private-10", ["10.0.0.5"], "10.0.0.5", "a private address"),
    ("v4-cgnat", ["100.64.0.1"], "100.64.0.1", "a carrier-grade NAT (shared) address"),
    ("v4-cgnat-top", ["100.127.255.254"], "100.127.255.254",
     "a carrier-grade NAT (shared) address"),
    ("v4-loopback", ["127.0.0.1"], "127.0.0.1", "a loopback address"),
    ("v4-loopback-wide", ["127.53.0.1"], "127.53.0.1", "a loopback address"),
    ("v4-link-local", ["169.254.1.1"], "169.254.1.1", METADATA),
    ("v4-cloud-metadata", ["169.254.169.254"], "169.254.169.254", METADATA),
    ("v4-private-172", ["172.16.0.1"], "172.16.0.1", "a private address"),
    ("v4-private-172-top", ["172.31.255.255"], "172.31.255.255", "a private address"),
    ("v4-ietf", ["192.0.0.8"], "192.0.0.8", "an IETF protocol-assignment address"),
    ("v4-doc-test-net-1", ["192.0.2.10"], "192.0.2.10", "a documentation address"),
    ("v4-6to4-relay", ["192.88.99.1"], "192.88.99.1", "a 6to4 relay anycast address"),
    ("v4-private-192", ["192.168.1.1"], "192.168.1.1", "a private address"),
    ("v4-benchmark", ["198.18.0.1"], "198.18.0.1", "a benchmarking address"),
    ("v4-benchmark-top", ["198.19.255.1"], "198.19.255.1", "a benchmarking address"),
    ("v4-doc-test-net-2", ["198.51.100.7"], "198.51.100.7", "a documentation address"),
    ("v4-doc-test-net-3", ["203.0.113.9"], "203.0.113.9", "a documentation address"),
    ("v4-multicast", ["224.0.0.1"], "224.0.0.1", "a multicast address"),
    ("v4-multicast-ssdp", ["239.255.255.250"], "239.255.255.250", "a multicast address"),
    ("v4-reserved", ["240.0.0.1"], "240.0.0.1", "a reserved address"),
    ("v4-broadcast", ["255.255.255.255"], "255.255.255.255", "the broadcast address"),
    ("v6-unspecified", ["::"], "::", "the unspecified address"),
    ("v6-loopback", ["::1"], "::1", "a loopback address"),
    ("v6-unique-local-fc", ["fc00::1"], "fc00::1", "a unique-local address"),
    ("v6-unique-local-fd", ["fd12:3456:789a::1"], "fd12:3456:789a::1", "a unique-local address"),
    ("v6-link-local", ["fe80::1"], "fe80::1", "a link-local address"),
    ("v6-link-local-zoned", ["fe80::1%eth0"], "fe80::1", "a link-local address"),
    ("v6-site-local", ["fec0::1"], "fec0::1", "a site-local address"),
    ("v6-multicast", ["ff02::1"], "ff02::1", "a multicast address"),
    ("v6-documentation", ["2001:db8::1"], "2001:db8::1", "a documentation address"),
    ("v6-documentation-3fff", ["3fff::1"], "3fff::1", "a documentation address"),
    ("v6-benchmark", ["2001:2::1"], "2001:2::1", "a benchmarking address"),
    ("v6-discard", ["100::1"], "100::1", "a discard-only address"),
    ("v6-local-nat64", ["64:ff9b:1::a00:1"], "64:ff9b:1::a00:1", "a local-use NAT64 address"),
    ("mapped-dotted-loopback", ["::ffff:127.0.0.1"], "::ffff:7f00:1",
     "an IPv4-mapped address of 127.0.0.1, a loopback address"),
    ("mapped-hex-loopback", ["::ffff:7f00:1"], "::ffff:7f00:1",
     "an IPv4-mapped address of 127.0.0.1, a loopback address"),
    ("mapped-metadata", ["::ffff:169.254.169.254"], "::ffff:a9fe:a9fe",
     f"an IPv4-mapped address of 169.254.169.254, {METADATA}"),
    ("mapped-private", ["::ffff:10.0.0.5"], "::ffff:a00:5",
     "an IPv4-mapped address of 10.0.0.5, a private address"),
    ("translated-private", ["::ffff:0:a00:5"], "::ffff:0:a00:5",
     "an IPv4-translated address of 10.0.0.5, a private address"),
    ("compatible-private", ["::10.0.0.5"], "::a00:5",
     "an IPv4-compatible address of 10.0.0.5, a private address"),
    ("compatible-loopback", ["::127.0.0.1"], "::7f00:1",
     "an IPv4-compatible address of 127.0.0.1, a loopback address"),
    ("nat64-private", ["64:ff9b::a00:1"], "64:ff9b::a00:1",
     "a NAT64 address of 10.0.0.1, a private address"),
    ("nat64-loopback", ["64:ff9b::127.0.0.1"], "64:ff9b::7f00:1",
     "a NAT64 address of 127.0.0.1, a loopback address"),
    ("nat64-metadata", ["64:ff9b::a9fe:a9fe"], "64:ff9b::a9fe:a9fe",
     f"a NAT64 address of 169.254.169.254, {METADATA}"),
    ("6to4-private", ["2002:a00:1::"], "2002:a00:1::",
     "a 6to4 address of 10.0.0.1, a private address"),
    ("6to4-metadata", ["2002:a9fe:a9fe::1"], "2002:a9fe:a9fe::1",
     f"a 6to4 address of 169.254.169.254, {METADATA}"),
    ("6to4-cgnat", ["2002:6440:1::"], "2002:6440:1::",
     "a 6to4 address of 100.64.0.1, a carrier-grade NAT (shared) address"),
    ("teredo-client-loopback", ["2001:0:4136:e378:8000:63bf:80ff:fffe"],
     "2001:0:4136:e378:8000:63bf:80ff:fffe", "a Teredo address of 127.0.0.1, a loopback address"),
    ("teredo-server-private", ["2001:0:a00:1::1"], "2001:0:a00:1::1",
     "a Teredo address of 10.0.0.1, a private address"),
    ("one-bad-answer-last", ["93.184.215.14", "10.0.0.5"], "10.0.0.5", "a private address"),
    ("one-bad-answer-first", ["10.0.0.5", "93.184.215.14"], "10.0.0.5", "a private address"),
    ("public-v6-then-loopback", ["2606:4700:4700::1111", "::1"], "::1", "a loopback address"),
]


@pytest.mark.parametrize(
    ("answers", "shown", "why"),
    [row[1:] for row in HOSTILE_ANSWERS],
    ids=[row[0] for row in HOSTILE_ANSWERS],
)
def test_a_host_resolving_to_a_non_public_address_is_refused(
    answers: list[str], shown: str, why: str
) -> None:
    resolver = FakeResolver({"hostile.example.test": answers})
    url = "https://hostile.example.test/doc.pdf"
    with pytest.raises(FetchRefusedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=strict_policy(), resolver=resolver)
    assert str(caught.value) == f"refused: hostile.example.test resolved to {shown}, {why}"
    assert (caught.value.reason, caught.value.url, caught.value.received) == ("address", url, 0)
    assert resolver.calls == [("hostile.example.test", 443)]


def test_a_host_resolving_to_nothing_or_to_garbage_is_refused() -> None:
    resolver = FakeResolver({"empty.example.test": [], "odd.example.test": ["localhost"]})
    with pytest.raises(
        FetchRefusedError, match=r"^refused: empty.example.test resolved to no address$"
    ):
        get_pdf("https://empty.example.test/a.pdf", strict_policy(), resolver)
    with pytest.raises(
        FetchRefusedError,
        match=r"^refused: odd.example.test resolved to 'localhost', which is not an IP address$",
    ):
        get_pdf("https://odd.example.test/a.pdf", strict_policy(), resolver)


def test_a_name_that_does_not_resolve_fails_without_a_connection() -> None:
    resolver = FakeResolver({})
    with pytest.raises(FetchFailedError) as caught:
        get_pdf("https://gone.example.test/a.pdf", strict_policy(), resolver)
    assert caught.value.reason == "dns"
    assert str(caught.value).startswith("failed: could not resolve gone.example.test")


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "93.184.215.14",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
    ],
)
def test_public_addresses_and_wrappers_of_public_ipv4_are_allowed(address: str) -> None:
    parsed = parse_address(address)
    assert parsed is not None
    assert refusal(parsed) is None


# --- hostile case table 2: alternative spellings through the real system resolver -------

#: (URL, the refusal). Numeric hosts resolve locally: no DNS query, no connection.
SPELLINGS = [
    ("https://2130706433/doc.pdf", "2130706433 resolved to 127.0.0.1, a loopback address"),
    ("https://0x7f.1/doc.pdf", "0x7f.1 resolved to 127.0.0.1, a loopback address"),
    ("https://127.1/doc.pdf", "127.1 resolved to 127.0.0.1, a loopback address"),
    ("https://017700000001/doc.pdf", "017700000001 resolved to 127.0.0.1, a loopback address"),
    ("https://0x7f000001/doc.pdf", "0x7f000001 resolved to 127.0.0.1, a loopback address"),
    ("https://0/doc.pdf", "0 resolved to 0.0.0.0, an unspecified ('this network') address"),
    ("https://2852039166/latest/meta-data/", f"2852039166 resolved to 169.254.169.254, {METADATA}"),
    ("https://169.254.169.254/latest/meta-data/", f"169.254.169.254 is {METADATA}"),
    ("https://[::ffff:7f00:1]/doc.pdf",
     "::ffff:7f00:1 is an IPv4-mapped address of 127.0.0.1, a loopback address"),
    ("https://[::ffff:127.0.0.1]/doc.pdf",
     "::ffff:127.0.0.1 is an IPv4-mapped address of 127.0.0.1, a loopback address"),
    ("https://[fd00::1]/doc.pdf", "fd00::1 is a unique-local address"),
    ("https://[::1]:8443/doc.pdf", "::1 is a loopback address"),
]


@pytest.mark.parametrize(("url", "message"), SPELLINGS, ids=[u for u, _ in SPELLINGS])
def test_alternative_spellings_are_judged_by_the_address_they_resolve_to(
    url: str, message: str
) -> None:
    with pytest.raises(FetchRefusedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=strict_policy())
    assert str(caught.value) == f"refused: {message}"
    assert caught.value.reason == "address"


# --- hostile case table 3: URLs and schemes ---------------------------------------------

BAD_URLS = [
    ("http://docs.example.test/doc.pdf", "scheme",
     "refused: http://docs.example.test/doc.pdf is plain http; only https is fetched "
     "(KB_FETCH_ALLOW_HTTP_HOSTS may list docs.example.test to allow plain http; its addresses "
     "must still be public)"),
    ("ftp://docs.example.test/doc.pdf", "scheme",
     "refused: ftp://docs.example.test/doc.pdf uses ftp scheme; only https is fetched"),
    ("file:///etc/passwd", "scheme",
     "refused: file:///etc/passwd uses file scheme; only https is fetched"),
    ("gopher://docs.example.test:70/_GET", "scheme",
     "refused: gopher://docs.example.test:70/_GET uses gopher scheme; only https is fetched"),
    ("docs.example.test/doc.pdf", "scheme",
     "refused: docs.example.test/doc.pdf uses no scheme; only https is fetched"),
    ("https://user:secret@docs.example.test/doc.pdf", "url",
     "refused: https://docs.example.test/doc.pdf carries credentials in the URL; kb sends none"),
    # Plain http to an address kb never fetches from: the address is the reason (the http
    # allow list could not make it fetchable), as it would be over https.
    ("http://10.1.2.3/doc.pdf", "address", "refused: 10.1.2.3 is a private address"),
    ("http://[::1]:8080/doc.pdf", "address", "refused: ::1 is a loopback address"),
]


@pytest.mark.parametrize(("url", "reason", "message"), BAD_URLS, ids=[u for u, _, _ in BAD_URLS])
def test_urls_kb_never_fetches_are_refused_before_any_lookup(
    url: str, reason: str, message: str
) -> None:
    resolver = FakeResolver({HOST: ["93.184.215.14"]})
    with pytest.raises(FetchRefusedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=strict_policy(), resolver=resolver)
    assert (str(caught.value), caught.value.reason) == (message, reason)
    assert "secret" not in str(caught.value)
    assert resolver.calls == []


def test_http_is_fetched_only_for_a_listed_host(
    plain_server: FetchServer, resolver: FakeResolver
) -> None:
    policy = strict_policy(
        allow_addresses=(LOOPBACK_ONLY,), allow_http_hosts=frozenset({"plain.example.test"})
    )
    listed = f"http://plain.example.test:{plain_server.port}/doc.pdf"
    fetched = fetch(listed, expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert (fetched.data, fetched.final_url) == (PDF, listed)
    unlisted = f"http://{HOST}:{plain_server.port}/doc.pdf"
    with pytest.raises(FetchRefusedError) as caught:
        fetch(unlisted, expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert caught.value.reason == "scheme"
    assert resolver.calls == [("plain.example.test", plain_server.port)]
    assert plain_server.paths() == ["/doc.pdf"]


# --- hostile case table 4: redirects ----------------------------------------------------


def test_a_redirect_from_a_public_host_to_a_private_one_is_refused(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    with pytest.raises(FetchRefusedError) as caught:
        get_pdf(at(server, "/to-private"), local_policy(certs), resolver)
    assert str(caught.value) == (
        "refused: internal.example.test resolved to 10.0.0.5, a private address"
    )
    assert resolver.calls == [(HOST, server.port), ("internal.example.test", 443)]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/to-metadata", f"refused: 169.254.169.254 is {METADATA}"),
        ("/to-other-loopback", "refused: 127.0.0.2 is a loopback address"),
        ("/to-file", "refused: file:///etc/passwd uses file scheme; only https is fetched"),
    ],
)
def test_every_redirect_hop_is_checked_again(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver, path: str, message: str
) -> None:
    with pytest.raises(FetchRefusedError) as caught:
        get_pdf(at(server, path), local_policy(certs), resolver)
    assert str(caught.value) == message
    assert caught.value.url == at(server, path)


def test_a_redirect_down_to_plain_http_is_refused(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    with pytest.raises(FetchRefusedError) as caught:
        get_pdf(at(server, "/to-http"), local_policy(certs), resolver)
    assert caught.value.reason == "scheme"
    target = f"http://{HOST}:{server.port}/doc.pdf"
    assert str(caught.value).startswith(f"refused: {target} is plain http")


def test_a_redirect_loop_is_refused(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    with pytest.raises(FetchRefusedError) as caught:
        get_pdf(at(server, "/loop-a"), local_policy(certs), resolver)
    assert str(caught.value) == (
        f"refused: redirect loop, {at(server, '/loop-b')} "
        f"redirected back to {at(server, '/loop-a')}"
    )
    assert caught.value.reason == "redirect_loop"
    with pytest.raises(FetchRefusedError, match="redirect loop"):
        get_pdf(at(server, "/self"), local_policy(certs), resolver)


def test_more_than_five_redirects_are_refused(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    start = at(server, f"/chain/{MAX_REDIRECTS + 1}")
    with pytest.raises(FetchRefusedError) as caught:
        fetch(start, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    assert str(caught.value) == (
        f"refused: {start} redirected more than 5 times (the next hop was {at(server, '/chain/0')})"
    )
    assert caught.value.reason == "too_many_redirects"
    assert "/chain/0" not in server.paths()


def test_a_redirect_without_a_location_fails(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    with pytest.raises(FetchFailedError) as caught:
        get_pdf(at(server, "/no-location"), local_policy(certs), resolver)
    assert str(caught.value) == (
        f"failed: {at(server, '/no-location')} answered 302 without a Location"
    )


# --- hostile case table 5: what the server sends ----------------------------------------

NOT_A_WORKBOOK_TYPE = (
    f"{{url}} is application/pdf, not an Excel workbook "
    f"({XLSM_CONTENT_TYPE} or {XLSX_CONTENT_TYPE})"
)

CONTENT_CASES = [
    ("/page.pdf", Expectation.PDF, "content_type",
     "{url} is text/html, not a PDF (application/pdf)"),
    ("/untyped.pdf", Expectation.PDF, "content_type",
     "{url} has no Content-Type, not a PDF (application/pdf)"),
    ("/fake.pdf", Expectation.PDF, "magic",
     "{url} is labelled a PDF but does not start with b'%PDF-' (it starts with b'<!DOCTYP')"),
    ("/tiny.pdf", Expectation.PDF, "magic",
     "{url} is labelled a PDF but does not start with b'%PDF-' (it starts with b'%P')"),
    ("/report.xlsx", Expectation.WORKBOOK, "content_type", NOT_A_WORKBOOK_TYPE),
    ("/doc.pdf", Expectation.WORKBOOK, "content_type", NOT_A_WORKBOOK_TYPE),
    ("/not-a-workbook.xlsx", Expectation.WORKBOOK, "not_workbook",
     "{url} is a ZIP archive without xl/workbook.xml, not an Excel workbook"),
    ("/truncated.xlsx", Expectation.WORKBOOK, "not_workbook",
     "{url} is not a readable ZIP archive (File is not a zip file)"),
    ("/gzipped.pdf", Expectation.PDF, "content_encoding",
     "{url} came gzip-encoded although kb asked for identity; a compressed body could expand "
     "past the size cap"),
    ("/declared-huge.pdf", Expectation.PDF, "too_large",
     "{url} declares 1000000000 bytes, over the 200000-byte cap"),
]


@pytest.mark.parametrize(
    ("path", "expect", "reason", "message"), CONTENT_CASES, ids=[c[0] for c in CONTENT_CASES]
)
def test_content_that_is_not_what_was_asked_for_is_refused(
    server: FetchServer,
    certs: LocalCertificates,
    resolver: FakeResolver,
    path: str,
    expect: Expectation,
    reason: str,
    message: str,
) -> None:
    url = at(server, path)
    with pytest.raises(FetchRefusedError) as caught:
        fetch(url, expect=expect, policy=local_policy(certs, max_bytes=CAP), resolver=resolver)
    expected = "refused: " + message.format(url=url)
    assert (str(caught.value), caught.value.reason) == (expected, reason)


def test_a_pdf_that_grows_past_the_cap_stops_within_one_chunk(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/grows.pdf")
    with pytest.raises(FetchRefusedError) as caught:
        get_pdf(url, local_policy(certs, max_bytes=CAP), resolver)
    received = caught.value.received
    assert caught.value.reason == "too_large"
    assert CAP < received <= CAP + CHUNK
    assert str(caught.value) == (
        f"refused: {url} is larger than the {CAP}-byte cap (stopped after {received} bytes)"
    )
    # The server offered 256 MiB; once kb hung up it could only fill socket buffers.
    assert server.done["/grows.pdf"].wait(timeout=30)
    assert server.sent["/grows.pdf"] < 32 * 1024 * 1024


def test_a_server_trickling_bytes_past_the_total_timeout_fails(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/slow.pdf")
    policy = local_policy(certs, read_timeout=5.0, total_timeout=1.0)
    with pytest.raises(FetchFailedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert caught.value.reason == "timeout"
    assert str(caught.value) == f"failed: {url} took longer than the 1 s total timeout"
    assert 0 < caught.value.received < 400


def test_a_server_that_stops_sending_fails_on_the_read_timeout(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/stalls.pdf")
    policy = local_policy(certs, read_timeout=0.5, total_timeout=30.0)
    with pytest.raises(FetchFailedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert caught.value.reason == "timeout"
    assert str(caught.value) == (
        f"failed: {url} (at 127.0.0.1) timed out: no progress within the 0.5 s read timeout"
    )


def test_the_total_timeout_cuts_a_single_long_read_short(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/stalls.pdf")
    policy = local_policy(certs, read_timeout=30.0, total_timeout=0.5)
    with pytest.raises(FetchFailedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert str(caught.value) == f"failed: {url} took longer than the 0.5 s total timeout"


def test_a_missing_document_fails_with_the_status(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/missing.pdf")
    with pytest.raises(FetchFailedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    assert str(caught.value) == f"failed: {url} answered 404 Not Found"
    assert caught.value.reason == "status"


def test_a_certificate_for_another_name_fails_tls_verification(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/doc.pdf", host="evil.example.test")
    with pytest.raises(FetchFailedError) as caught:
        fetch(url, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    assert caught.value.reason == "tls"
    assert "Hostname mismatch" in str(caught.value)
    assert "evil.example.test" in str(caught.value)


def test_the_default_trust_store_does_not_trust_the_test_ca(
    server: FetchServer, resolver: FakeResolver
) -> None:
    policy = strict_policy(allow_addresses=(LOOPBACK_ONLY,))
    with pytest.raises(FetchFailedError) as caught:
        fetch(at(server, "/doc.pdf"), expect=Expectation.PDF, policy=policy, resolver=resolver)
    assert caught.value.reason == "tls"
    assert "unable to get local issuer certificate" in str(caught.value)


# --- happy paths over a real local TLS connection ---------------------------------------


def test_a_pdf_downloads_over_tls_through_the_pinned_address(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/doc.pdf")
    fetched = fetch(url, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    assert fetched.data == PDF
    assert fetched.sha256 == hashlib.sha256(PDF).hexdigest()
    assert (fetched.url, fetched.final_url, fetched.redirects) == (url, url, ())
    assert (fetched.address, fetched.content_type) == ("127.0.0.1", "application/pdf")
    assert fetched.name == "B2B Procedure v3.2.pdf"
    # Resolved once (no second lookup at connect time: the name exists only in the fake),
    # and the host name, not the address, went out in the Host header and the TLS check.
    assert resolver.calls == [(HOST, server.port)]
    assert ("/doc.pdf", f"{HOST}:{server.port}") in server.requests


def test_a_workbook_downloads_and_is_named_from_its_url(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/Schedule%202%20-%20Q3%202025-26.xlsm")
    fetched = fetch(url, expect=Expectation.WORKBOOK, policy=local_policy(certs), resolver=resolver)
    assert fetched.data == WORKBOOK
    assert fetched.content_type == XLSM_CONTENT_TYPE
    assert fetched.name == "Schedule 2 - Q3 2025-26.xlsm"


def test_redirects_are_followed_and_each_hop_is_resolved_for_its_own_host(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, "/to-other-host")
    fetched = fetch(url, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    final = at(server, "/plain.pdf", host=OTHER_HOST)
    assert (fetched.final_url, fetched.redirects, fetched.name) == (final, (final,), "plain.pdf")
    assert resolver.calls == [(HOST, server.port), (OTHER_HOST, server.port)]
    assert ("/plain.pdf", f"{OTHER_HOST}:{server.port}") in server.requests


def test_exactly_five_redirects_are_followed(
    server: FetchServer, certs: LocalCertificates, resolver: FakeResolver
) -> None:
    url = at(server, f"/chain/{MAX_REDIRECTS}")
    fetched = fetch(url, expect=Expectation.PDF, policy=local_policy(certs), resolver=resolver)
    assert fetched.redirects == tuple(at(server, f"/chain/{hop}") for hop in range(4, -1, -1))
    assert fetched.data == PDF
    assert len(resolver.calls) == MAX_REDIRECTS + 1


# --- the parts on their own -------------------------------------------------------------


def test_the_pinned_backend_dials_only_for_its_own_host() -> None:
    backend = PinnedBackend(
        host=HOST, address="127.0.0.1", deadline=Deadline(time.monotonic() + 60, 60)
    )
    with pytest.raises(httpcore.ConnectError, match="refusing to connect to other.example.test"):
        backend.connect_tcp("other.example.test", 443, timeout=1.0)


def test_the_deadline_cuts_timeouts_and_refuses_once_passed() -> None:
    later = Deadline(time.monotonic() + 3600, 3600)
    assert later.limit(5.0, httpcore.ReadTimeout) == 5.0
    assert later.bound is False
    assert later.limit(None, httpcore.ReadTimeout) <= 3600
    assert later.bound is True
    passed = Deadline(time.monotonic() - 1, 10)
    with pytest.raises(httpcore.ConnectTimeout):
        passed.limit(5.0, httpcore.ConnectTimeout)
    assert passed.expired() and passed.bound


def test_the_policy_from_settings_never_exempts_an_address() -> None:
    settings = Settings(
        fetch_allow_http_hosts=" Mirror.Example.org., files.example.test ,",
        fetch_connect_timeout=3,
        fetch_read_timeout=7,
        fetch_total_timeout=90,
        max_upload_bytes=5_000,
    )
    policy = FetchPolicy.from_settings(settings)
    assert policy == FetchPolicy(
        max_bytes=5_000,
        connect_timeout=3.0,
        read_timeout=7.0,
        total_timeout=90.0,
        allow_http_hosts=frozenset({"mirror.example.org", "files.example.test"}),
    )
    assert policy.allow_addresses == () and policy.ssl_context is None
    assert FetchPolicy.from_settings(settings, max_bytes=42).max_bytes == 42
    assert FetchPolicy.from_settings(Settings()).allow_http_hosts == frozenset()


def test_a_bad_fetch_setting_names_its_variable() -> None:
    expected = r"KB_FETCH_TOTAL_TIMEOUT=0 is not valid: use a number from 1 to 3600"
    with pytest.raises(SettingsError, match=expected):
        Settings(fetch_total_timeout=0)


def test_a_policy_that_skips_verification_or_has_no_limit_is_rejected() -> None:
    lax = ssl.create_default_context()
    lax.check_hostname = False
    lax.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError, match="must verify certificates and host names"):
        FetchPolicy(max_bytes=10, ssl_context=lax)
    with pytest.raises(ValueError, match="must be positive"):
        FetchPolicy(max_bytes=0)


@pytest.mark.parametrize(
    ("disposition", "url", "name"),
    [
        (
            "attachment; filename*=UTF-8''Schedule%202%20%E2%80%93%20Q1.xlsm",
            "https://h/x",
            "Schedule 2 – Q1.xlsm",
        ),
        ('attachment; filename="a; b.pdf"', "https://h/x", "a; b.pdf"),
        ('attachment; filename="x.pdf"; filename*=UTF-8\'\'y%20z.pdf', "https://h/x", "y z.pdf"),
        ('inline; filename="../../etc/passwd"', "https://h/x", "passwd"),
        ('inline; filename="..\\\\..\\\\boot.ini"', "https://h/x", "boot.ini"),
        ("attachment", "https://h/files/Retail%20Data.pdf?v=2", "Retail Data.pdf"),
        (None, "https://h/a%0Ab.pdf", "ab.pdf"),
        (None, "https://h/a%2541.pdf?download=1", "a%41.pdf"),
        (None, "https://h/", None),
        ('attachment; filename=".."', "https://h/dir/", None),
    ],
)
def test_the_file_name_comes_from_the_disposition_then_the_url(
    disposition: str | None, url: str, name: str | None
) -> None:
    assert file_name(disposition, httpx.URL(url)) == name

"""An AER release page as a sync source (issue 11): the page's workbook links, the HTML
expectation of the safe fetcher, and ``download_release`` against a local HTTPS server with a
test CA (``tests/fetch_server.py``), reached through an injected resolver and a policy that
exempts exactly 127.0.0.1/32 (test-only; no setting can).

``release_routes`` and ``site_policy`` are shared with ``tests/assets/test_market_aer.py``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from kb_shared.errors import AerReleasePageError, FetchRefusedError
from kb_shared.fetch.fetcher import Expectation, FetchPolicy, fetch
from kb_shared.fetch.content import HTML_MAX_BYTES, XLSM_CONTENT_TYPE, XLSX_CONTENT_TYPE
from kb_shared.market.aer_source import MAX_RELEASE_WORKBOOKS, download_release, workbook_links
from kb_shared.settings import Settings
from tests.assets.test_url_intake import HOST, LocalSite, local_site
from tests.fetch_server import Route, body, endless, redirect
from tests.market.aer_fixtures import FILE_NAMES, Q3_2025_26, write_release

Q3 = FILE_NAMES[Q3_2025_26]
#: The metadata address a hostile page might link to.
METADATA_LINK = "https://169.254.169.254/latest/meta-data/Schedule%202.xlsx"


def workbook_path(name: str) -> str:
    """Where the site serves the workbook ``name`` (percent-encoded, as a browser sends it)."""
    return "/files/" + quote(name)


def release_page(*hrefs: str) -> bytes:
    """A release page linking ``hrefs`` between some unrelated links."""
    links = "".join(f'<li><a class="file" href="{h}">download</a></li>' for h in hrefs)
    return (
        "<!DOCTYPE html><html><head><title>Retail energy market performance</title></head>"
        '<body><a href="/about">About</a><a href="report.pdf">Report</a>'
        f"<ul>{links}</ul><a>no href</a></body></html>"
    ).encode()


def release_routes(folder: Path) -> dict[str, Route]:
    """The Q3 2025-26 release written into ``folder`` and served: ``/release.html`` links its
    three workbooks (one relative, one absolute, one through a redirect, one twice with a
    fragment); ``/hostile.html`` links a workbook on the metadata address; ``/empty.html``
    links none."""
    write_release(folder, Q3_2025_26)
    types = {".xlsx": XLSX_CONTENT_TYPE, ".xlsm": XLSM_CONTENT_TYPE}
    routes: dict[str, Route] = {
        workbook_path(name): body(types[Path(name).suffix], (folder / name).read_bytes())
        for name in Q3.values()
    }
    routes["/old/schedule-4.xlsx"] = redirect(workbook_path(Q3["4"]))
    page = release_page(
        f"files/{quote(Q3['2'])}",
        f"https://{HOST}:{{port}}{workbook_path(Q3['3'])}",
        "/old/schedule-4.xlsx",
        f"files/{quote(Q3['2'])}#top",
    )
    routes["/release.html"] = lambda handler, server: body(
        "text/html; charset=utf-8", page.replace(b"{port}", str(server.port).encode())
    )(handler, server)
    routes["/hostile.html"] = body(
        "text/html", release_page(f"files/{quote(Q3['3'])}", METADATA_LINK)
    )
    routes["/empty.html"] = body("text/html", release_page("report.pdf", "data.csv"))
    return routes


def site_policy(site: LocalSite) -> FetchPolicy:
    """The production rules with the test CA and 127.0.0.1 exempt (nothing else is)."""
    return FetchPolicy(
        max_bytes=50 * 1024 * 1024,
        connect_timeout=5.0,
        read_timeout=5.0,
        total_timeout=20.0,
        allow_addresses=(ipaddress.IPv4Network("127.0.0.1/32"),),
        ssl_context=site.certs.client_context(),
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the site's workbooks are served from."""
    return tmp_path_factory.mktemp("release")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, served: Path) -> Iterator[LocalSite]:
    routes = release_routes(served)
    routes["/binary.html"] = body("text/html", b"<html>\x00\x01</html>")
    routes["/huge.html"] = endless("text/html", b"<html>", HTML_MAX_BYTES + 4 * 65536)
    routes["/declared-huge.html"] = body("text/html", b"<html></html>",
                                         {"Content-Length": str(HTML_MAX_BYTES + 1)})
    with local_site(tmp_path_factory.mktemp("release-tls"), routes) as running:
        yield running


def download(site: LocalSite, path: str, folder: Path) -> list[Path]:
    return download_release(site.url(path), folder, settings=Settings(),
                            policy=site_policy(site), resolver=site.resolve)


# --- links ------------------------------------------------------------------------------------


def test_workbook_links_are_resolved_decoded_and_listed_once() -> None:
    page = (
        '<a href="S2%20Q3.XLSX#part">a</a><A HREF="S2%20Q3.XLSX">again</A>'
        '<a href="../data/S3.xlsm?v=2">b</a><a href="https://other.test/S4.xlsx">c</a>'
        '<a href="notes.pdf">d</a><a href="S5.xlsx.zip">e</a><a href=" ">blank</a>'
        '<a href="Schedule%204%20&amp;%20more.xlsx">f</a><a href="https://[::1/y.xlsx">bad</a>'
        '<a href="ftp://files.test/S6.xlsx">ftp</a>'
    )
    assert workbook_links(page, "https://www.aer.gov.au/releases/q3/page") == [
        "https://www.aer.gov.au/releases/q3/S2%20Q3.XLSX",
        "https://www.aer.gov.au/releases/data/S3.xlsm?v=2",
        "https://other.test/S4.xlsx",
        "https://www.aer.gov.au/releases/q3/Schedule%204%20&%20more.xlsx",
        # listed: the fetcher refuses it by name (only https), rather than the link vanishing
        "ftp://files.test/S6.xlsx",
    ]


def test_a_base_element_sets_where_relative_links_point() -> None:
    page = '<head><base href="https://cdn.example.test/aer/"></head><a href="S2.xlsx">x</a>'
    assert workbook_links(page, "https://www.aer.gov.au/page") == [
        "https://cdn.example.test/aer/S2.xlsx"]


# --- the HTML expectation ---------------------------------------------------------------------


def test_a_page_is_fetched_as_html(site: LocalSite) -> None:
    page = fetch(site.url("/empty.html"), expect=Expectation.HTML, policy=site_policy(site),
                 resolver=site.resolve)
    assert (page.content_type, page.data) == ("text/html", release_page("report.pdf", "data.csv"))


@pytest.mark.parametrize(
    ("path", "reason", "message"),
    [
        ("/binary.html", "binary", "holds binary data (a NUL byte)"),
        ("/declared-huge.html", "too_large", f"declares {HTML_MAX_BYTES + 1} bytes, over the "
                                             f"{HTML_MAX_BYTES}-byte cap"),
        ("/huge.html", "too_large", f"is larger than the {HTML_MAX_BYTES}-byte cap"),
        (workbook_path(Q3["2"]), "content_type",
         f"is {XLSX_CONTENT_TYPE}, not an HTML page (application/xhtml+xml or text/html)"),
    ],
)
def test_a_page_that_is_binary_too_large_or_not_html_is_refused(
    site: LocalSite, path: str, reason: str, message: str
) -> None:
    with pytest.raises(FetchRefusedError, match=re.escape(message)) as refused:
        fetch(site.url(path), expect=Expectation.HTML, policy=site_policy(site),
              resolver=site.resolve)
    assert refused.value.reason == reason


def test_the_page_cap_is_the_smaller_of_the_policy_and_html_caps() -> None:
    assert Expectation.HTML.cap(50 * 1024 * 1024) == HTML_MAX_BYTES == 5_242_880
    assert Expectation.HTML.cap(1_000) == 1_000
    assert Expectation.WORKBOOK.cap(50 * 1024 * 1024) == 52_428_800


# --- download_release -------------------------------------------------------------------------


def test_the_release_workbooks_are_downloaded_under_their_names(
    site: LocalSite, served: Path, tmp_path: Path
) -> None:
    paths = download(site, "/release.html", tmp_path)
    assert paths == [tmp_path / Q3["2"], tmp_path / Q3["3"], tmp_path / Q3["4"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Q3.values())
    for path in paths:
        assert path.read_bytes() == (served / path.name).read_bytes()


def test_a_link_to_the_metadata_address_is_refused_and_nothing_written(
    site: LocalSite, tmp_path: Path
) -> None:
    with pytest.raises(FetchRefusedError) as refused:
        download(site, "/hostile.html", tmp_path)
    assert str(refused.value) == (
        "refused: 169.254.169.254 is a link-local address (where cloud metadata services live)")
    assert (refused.value.url, refused.value.reason) == (METADATA_LINK, "address")
    assert list(tmp_path.iterdir()) == []


def test_a_page_without_workbook_links_is_refused(site: LocalSite, tmp_path: Path) -> None:
    with pytest.raises(AerReleasePageError) as refused:
        download(site, "/empty.html", tmp_path)
    assert str(refused.value) == (
        f"{site.url('/empty.html')} links no .xlsx or .xlsm workbook, so there is nothing to "
        "sync; give the release page that lists the workbooks, or their file or folder")
    assert list(tmp_path.iterdir()) == []


def test_two_different_workbooks_under_one_name_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "release"
    write_release(folder, Q3_2025_26)
    first = (folder / Q3["2"]).read_bytes()
    second = (folder / Q3["4"]).read_bytes()
    assert hashlib.sha256(first).digest() != hashlib.sha256(second).digest()
    routes = {
        "/a/S2.xlsx": body(XLSX_CONTENT_TYPE, first),
        "/b/S2.xlsx": body(XLSX_CONTENT_TYPE, second),
        "/c/S2.xlsx": body(XLSX_CONTENT_TYPE, first),
        "/same.html": body("text/html", release_page("/a/S2.xlsx", "/c/S2.xlsx")),
        "/clash.html": body("text/html", release_page("/a/S2.xlsx", "/b/S2.xlsx")),
    }
    out = tmp_path / "out"
    out.mkdir()
    with local_site(tmp_path, routes) as site:
        # the same workbook linked twice is kept once
        assert [p.name for p in download(site, "/same.html", out)] == ["S2.xlsx"]
        assert (out / "S2.xlsx").read_bytes() == first
        clash = tmp_path / "clash"
        clash.mkdir()
        with pytest.raises(AerReleasePageError, match=(
            r"/a/S2\.xlsx and https://\S+/b/S2\.xlsx are different workbooks both named "
            r"'S2\.xlsx'")):
            download(site, "/clash.html", clash)
        assert list(clash.iterdir()) == []


def test_a_page_linking_more_workbooks_than_a_release_has_downloads_none(tmp_path: Path) -> None:
    served: list[str] = []

    def workbook(handler, server) -> None:
        served.append(handler.path)
        body(XLSX_CONTENT_TYPE, b"PK never read")(handler, server)

    names = [f"/files/S{n}.xlsx" for n in range(MAX_RELEASE_WORKBOOKS + 1)]
    routes: dict[str, Route] = {name: workbook for name in names}
    routes["/many.html"] = body("text/html", release_page(*names))
    routes["/enough.html"] = body("text/html", release_page(*names[:MAX_RELEASE_WORKBOOKS]))
    out = tmp_path / "out"
    out.mkdir()
    with local_site(tmp_path, routes) as site:
        with pytest.raises(AerReleasePageError) as refused:
            download(site, "/many.html", out)
        assert str(refused.value) == (
            f"{site.url('/many.html')} links 21 workbooks, more than the 20 a release has (one "
            "per schedule), so it is not a release page; give the release page of one "
            "quarter, or the workbooks' file or folder. Nothing was downloaded.")
        assert (served, list(out.iterdir())) == ([], [])
        # twenty are fetched (and refused here for not being workbooks, one by one)
        with pytest.raises(FetchRefusedError):
            download(site, "/enough.html", out)
        assert served == ["/files/S0.xlsx"]

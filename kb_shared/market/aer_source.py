"""An AER release page as a sync source (issue 11): ``KB_AER_SOURCE`` or ``kb sync aer URL``
may name the web page of a release, and the sync downloads the workbooks it links.

``download_release(url, folder, settings=...)`` fetches the page, finds its workbook links,
downloads each one, and writes them into ``folder`` under their own file names (the names
carry the schedule and the quarter). Every request goes through the safe fetcher
(``kb_shared.fetch.fetcher``): the page as ``Expectation.HTML``, each workbook as
``Expectation.WORKBOOK``, so every link meets the same rules as a URL typed by hand (https,
public addresses only, redirects re-checked, type and size checked). All downloads finish
before the first file is written; any refusal or failure raises and writes nothing.
"""

from __future__ import annotations

import logging
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

import httpx

from kb_shared.errors import AerReleasePageError
from kb_shared.fetch.fetcher import Expectation, Fetched, FetchPolicy, fetch
from kb_shared.fetch.addresses import Resolver
from kb_shared.fetch.content import file_name
from kb_shared.market.aer_layout import WORKBOOK_SUFFIXES
from kb_shared.settings import Settings

log = logging.getLogger(__name__)

#: Most workbook links a release page may have: a release publishes one workbook per schedule
#: (2, 3, 4 and 6, and 1, the glossary), and every download is held in memory until all
#: are in, so a page linking hundreds is refused before the first download.
MAX_RELEASE_WORKBOOKS = 20


class _LinkParser(HTMLParser):
    """Collects the ``href`` of every ``<a>`` in document order, and the first ``<base
    href>`` (HTML Living Standard §4.2.3: it sets the URL that relative links resolve
    against). Attribute values arrive with character references already decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record ``<a href>`` and the first ``<base href>``."""
        href = dict(attrs).get("href")
        if href is None or not href.strip():
            return
        if tag == "a":
            self.hrefs.append(href.strip())
        elif tag == "base" and self.base is None:
            self.base = href.strip()


def _join(base: httpx.URL, href: str) -> httpx.URL | None:
    """``href`` resolved against ``base``, fragment dropped; None when it is not a URL."""
    try:
        return base.join(href).copy_with(fragment=None)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None


def _is_workbook(link: httpx.URL) -> bool:
    """Whether the link's path, percent-decoded, ends in ``.xlsx`` or ``.xlsm`` (any case)."""
    name = file_name(None, link)
    return name is not None and PurePosixPath(name).suffix.lower() in WORKBOOK_SUFFIXES


def workbook_links(html: str, page_url: str) -> list[str]:
    """The workbook links of a page, each once, in the order they first appear.

    A link is an ``<a href>`` whose path, percent-decoded, ends in ``.xlsx``/``.xlsm`` (any
    case; a query string is allowed), resolved against the page's ``<base href>`` if it has
    one, else ``page_url`` (the URL the page came from, after redirects); fragments are
    dropped, so ``x.xlsx#top`` and ``x.xlsx`` are one link. An ``href`` that is not a URL is
    skipped. The stdlib ``html.parser`` reads the page, so broken markup still yields links.
    """
    parser = _LinkParser()
    parser.feed(html)
    parser.close()
    base = httpx.URL(page_url)
    if parser.base is not None:
        base = _join(base, parser.base) or base
    links: dict[str, None] = {}
    for href in parser.hrefs:
        link = _join(base, href)
        if link is not None and _is_workbook(link):
            links.setdefault(str(link), None)
    return list(links)


def _saved_name(download: Fetched, link: str) -> str:
    """The file name a workbook is written under: the download's own name (Content-Disposition,
    else the final URL) when it is a workbook name, else the link's last path segment."""
    name = download.name
    if name and PurePosixPath(name).suffix.lower() in WORKBOOK_SUFFIXES:
        return name
    return file_name(None, httpx.URL(link)) or ""


def download_release(
    url: str,
    folder: Path,
    *,
    settings: Settings,
    policy: FetchPolicy | None = None,
    resolver: Resolver | None = None,
) -> list[Path]:
    """Download the workbooks an AER release page links into ``folder`` (which the caller
    owns and removes); returns their paths in link order.

    Args:
        url: the release page.
        folder: an existing, empty folder.
        settings: gives the fetch policy (``FetchPolicy.from_settings``) unless ``policy``
            is given.
        policy, resolver: passed to ``kb_shared.fetch.fetcher.fetch``; tests use them to reach a
            local server (no setting can).

    Raises:
        FetchError: the page or a workbook was refused or failed to download (the message
            names the URL and why); nothing was written.
        AerReleasePageError: the page links no workbook or more than
            ``MAX_RELEASE_WORKBOOKS``, or two links give different workbooks under one file
            name; nothing was written.
    """
    limits = policy or FetchPolicy.from_settings(settings)
    page = fetch(url, expect=Expectation.HTML, policy=limits, resolver=resolver)
    links = workbook_links(page.data.decode("utf-8", errors="replace"), page.final_url)
    if not links:
        raise AerReleasePageError(
            f"{url} links no .xlsx or .xlsm workbook, so there is nothing to sync; give the "
            "release page that lists the workbooks, or their file or folder"
        )
    if len(links) > MAX_RELEASE_WORKBOOKS:
        raise AerReleasePageError(
            f"{url} links {len(links)} workbooks, more than the {MAX_RELEASE_WORKBOOKS} a "
            "release has (one per schedule), so it is not a release page; give the release "
            "page of one quarter, or the workbooks' file or folder. Nothing was downloaded."
        )
    downloads: dict[str, tuple[str, Fetched]] = {}
    for link in links:
        got = fetch(link, expect=Expectation.WORKBOOK, policy=limits, resolver=resolver)
        name = _saved_name(got, link)
        earlier = downloads.get(name)
        if earlier is None:
            downloads[name] = (link, got)
            log.info("downloaded %s (%d bytes) as %s", link, len(got.data), name)
        elif earlier[1].sha256 != got.sha256:
            raise AerReleasePageError(
                f"{url}: {earlier[0]} and {link} are different workbooks both named {name!r}; "
                "kb cannot tell which one the release means"
            )
    paths = []
    for name, (_link, got) in downloads.items():
        path = folder / name
        path.write_bytes(got.data)
        paths.append(path)
    return paths

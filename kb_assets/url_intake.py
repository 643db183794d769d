"""Intake of URLs: ``admit_sources`` downloads every URL of a batch through the safe fetcher,
then puts the downloads and the batch's files through ``kb_assets.intake.admit`` together.

Issue 12, "Adding documents by URL": every URL of a batch is downloaded before anything
is written, through ``kb_shared.fetch.fetcher`` (https only, every resolved address public, redirects
re-checked, PDF type and magic bytes, size capped at ``KB_MAX_UPLOAD_BYTES``). The document's
name is the one given, else the download's (``Content-Disposition``, else the URL's last path
segment), with ``.pdf`` added when it has no suffix; then the bytes meet the same rules as a
file of that name. A download that is refused or fails is a refused outcome and writes nothing.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from kb_assets.intake import (
    IntakeOutcome,
    IntakeStatus,
    admit,
    input_position,
    previous_edition,
)
from kb_shared.errors import FetchError
from kb_shared.fetch.fetcher import Expectation, Fetched, FetchPolicy, fetch
from kb_shared.identity import IdentityError, check_file_name
from kb_shared.settings import Settings

if TYPE_CHECKING:
    import dagster as dg

    from kb_assets.resources import StoresResource

log = logging.getLogger(__name__)

#: Downloads one URL for intake and returns it, or raises ``FetchError``.
UrlFetcher = Callable[[str], Fetched]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

#: The suffix every downloaded document gets: the fetcher only accepts PDFs.
URL_DOCUMENT_SUFFIX = ".pdf"


def is_url(source: str | Path) -> bool:
    """Whether ``source`` is a URL (``scheme://…``) rather than a server path. Any scheme
    counts, so ``ftp://`` or ``file://`` reaches the fetcher and is refused there by name."""
    return isinstance(source, str) and _SCHEME.match(source.strip()) is not None


def safe_fetcher(settings: Settings) -> UrlFetcher:
    """The production downloader: ``kb_shared.fetch.fetcher.fetch`` of a PDF under
    ``FetchPolicy.from_settings(settings)`` (no address is ever exempt)."""
    return partial(fetch, expect=Expectation.PDF, policy=FetchPolicy.from_settings(settings))


#: How ``admit_sources`` gets its downloader from the settings. A module attribute so that
#: tests can point intake at their local HTTPS server (an injected resolver and test CA);
#: no setting can, so production always uses ``safe_fetcher``.
fetcher_for: Callable[[Settings], UrlFetcher] = safe_fetcher


def url_document_name(name: str) -> str:
    """``name`` as a downloaded document's name: trimmed, with ``.pdf`` added unless it ends
    in it (``download.aspx`` → ``download.aspx.pdf``, ``Spec v3.2`` → ``Spec v3.2.pdf``).

    Raises:
        IdentityError: not a file name (``identity.check_file_name``: empty, only dots, a
            path, a control character, too long), or ending in another document suffix
            (``.md``, ``.txt``): a download is a PDF, and the suffix decides how a document
            is converted.
    """
    from kb_shared.providers.text_markdown import DOCUMENT_SUFFIXES

    clean = check_file_name(name)
    suffix = PurePosixPath(clean).suffix.lower()
    if suffix == URL_DOCUMENT_SUFFIX:
        return clean
    if suffix in DOCUMENT_SUFFIXES:
        raise IdentityError(
            f"{clean!r} ends in {suffix}, but a download is a PDF; give a name ending in .pdf"
        )
    return check_file_name(clean + URL_DOCUMENT_SUFFIX)


def _shown_name(url: str, name: str | None) -> str:
    """What a refused URL is called in its outcome: the name given, else the URL's last
    path segment, else the URL."""
    if name:
        return name.strip()
    segment = unquote(urlsplit(url.strip()).path.rsplit("/", 1)[-1]) if "://" in url else ""
    return segment or url.strip()


def admit_sources(
    sources: Sequence[str | Path],
    stores: StoresResource,
    instance: dg.DagsterInstance,
    *,
    name: str | None = None,
    category: str | None = None,
    new_version: bool = False,
    edition_of: str | None = None,
) -> list[IntakeOutcome]:
    """``admit`` for server paths and URLs together: every URL is downloaded first (see the
    module docstring), then the downloads and the files go through ``admit`` as one batch,
    so the batch and catalog rules span both.

    Args:
        sources: files, folders and URLs; a URL's outcome has the URL as its ``path``.
        name: the document name for the batch's one URL (instead of the download's).
        category: the base category (``admit``); a download gets it as its category.
        new_version: as ``admit``: a catalogued name with new content is a new version.
        edition_of: as ``admit``: the previous edition of the batch's one document.

    Returns:
        One outcome per file or URL, in input order; a refused download is ``refused`` with
        the fetcher's reason ("download refused: 127.0.0.1 is a loopback address").

    Raises:
        ValueError: ``name`` given for a batch without exactly one URL, a ``category``
            that is not one, or an ``edition_of`` refused (``admit``); nothing was downloaded.
        IntakeError: as ``admit``; nothing at all was added.
    """
    return admit_sources_opening(
        sources, stores.settings, lambda: (stores, instance), name=name, category=category,
        new_version=new_version, edition_of=edition_of,
    )


#: Opens the stores and the Dagster instance an admission writes to (``kb add`` imports
#: Dagster there, so a batch of refused URLs answers without it: issue 28).
IntakeTarget = Callable[[], "tuple[StoresResource, dg.DagsterInstance]"]


def admit_sources_opening(
    sources: Sequence[str | Path],
    settings: Settings,
    target: IntakeTarget,
    *,
    name: str | None = None,
    category: str | None = None,
    new_version: bool = False,
    edition_of: str | None = None,
) -> list[IntakeOutcome]:
    """``admit_sources`` that calls ``target()`` (once) only when it needs the stores: to
    look ``edition_of`` up, or to admit the files and downloads; ``settings`` chooses the
    fetcher. Returns and raises as ``admit_sources``."""
    opened: list[tuple[StoresResource, dg.DagsterInstance]] = []

    def open_target() -> tuple[StoresResource, dg.DagsterInstance]:
        if not opened:
            opened.append(target())
        return opened[0]

    urls = [str(s) for s in sources if is_url(s)]
    if name is not None and len(urls) != 1:
        raise ValueError(f"a name goes with exactly one URL; this batch has {len(urls)}")
    if category is not None:  # checked before anything is downloaded (``admit`` again)
        from kb_shared.stores.catalog.documents import normalize_category

        normalize_category(category)
    if edition_of is not None:
        previous_edition(open_target()[0], edition_of, new_version)
    if not urls:
        return admit(
            sources, *open_target(), category=category, new_version=new_version,
            edition_of=edition_of,
        )
    download = fetcher_for(settings)
    refused: list[IntakeOutcome] = []
    origin: dict[str, str] = {}
    batch: list[str | Path] = []
    with tempfile.TemporaryDirectory(prefix="kb-intake-") as folder:
        for number, source in enumerate(sources):
            if not is_url(source):
                batch.append(source)
                continue
            url = str(source).strip()
            try:
                given = url_document_name(name) if name is not None else None
                fetched = download(url)
                if given is None and not fetched.name:
                    raise IdentityError(f"the download from {url} names no file")
                file = given or url_document_name(fetched.name or "")
            except (FetchError, IdentityError) as error:
                reason = f"download {error}" if isinstance(error, FetchError) else (
                    f"{error}; give the document a name (--name, or name in the Launchpad)"
                )
                refused.append(
                    IntakeOutcome(url, _shown_name(url, name), IntakeStatus.REFUSED, reason=reason)
                )
                continue
            local = Path(folder) / str(number) / file
            local.parent.mkdir()
            local.write_bytes(fetched.data)
            origin[str(local)] = url
            batch.append(local)
            log.info("downloaded %s (%d bytes) as %s", url, len(fetched.data), file)
        admitted = (
            admit(
                batch, *open_target(), category=category, new_version=new_version,
                edition_of=edition_of,
            )
            if batch
            else []
        )
    outcomes = [_from_url(o, origin) for o in admitted] + refused
    order = {str(s).strip() if is_url(s) else str(s): i for i, s in enumerate(sources)}
    return sorted(outcomes, key=lambda o: input_position(o.path, order))


def _from_url(outcome: IntakeOutcome, origin: dict[str, str]) -> IntakeOutcome:
    """``outcome`` with its path set back to the URL its temporary file came from."""
    url = origin.get(outcome.path)
    if url is None:
        return outcome
    hint = outcome.hint.replace(outcome.path, url)
    reason = outcome.reason.replace(outcome.path, url)  # the new-version command names it
    return replace(outcome, path=url, reason=reason, hint=hint)

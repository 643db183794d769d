"""The ``markdown`` asset: PDF → Markdown with page and figure markers (the expensive step,
banked in blobs by the IO manager before anything downstream runs); a ``.md``/``.txt`` document
passes through ``TextMarkdownConverter`` instead (no pages, no figures)."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import gzip
import json
import logging
import time
import zlib

import dagster as dg

from kb_assets.assets.common import (
    BuildConfig,
    corpus_asset,
    provider_usage,
    timing,
    version_to_build,
)
from kb_assets.constants import MARKDOWN
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument
from kb_assets.resources import Providers, StoresResource
from kb_shared import layout
from kb_shared.errors import ConversionError
from kb_shared.ingest.pdf import PdfLimits, check_pdf
from kb_shared.providers.base import LayoutStore, MarkdownConverter
from kb_shared.providers.text_markdown import TextMarkdownConverter, is_text_document
from kb_shared.stores.blobs import BlobStore

logger = logging.getLogger(__name__)


@corpus_asset(
    MARKDOWN,
    kinds={"pdf", "markdown"},
    description=(
        "PDF → Markdown with `<!-- page N -->` before each page, `[Figure: …]` markers, "
        "tables as Markdown tables and page furniture removed; title and version extracted. "
        "A scanned, encrypted, corrupt, empty or non-PDF file fails here with its reason, "
        "and so does one over the work caps (KB_PDF_MAX_*: pages, characters per page, "
        "inflated stream bytes). "
        "A .md file passes through and a .txt file becomes paragraphs (no pages, no figures)."
    ),
)
def markdown(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    providers: dg.ResourceParam[Providers],
    doc_id: str,
) -> dg.Output[MarkdownDocument]:
    """Convert the file of the version being built (``version_to_build``: the newest) — its
    PDF, or its ``.md``/``.txt`` file (``converter_for``); reuse the stored Markdown when the
    file and converter are unchanged (no conversion call), unless ``force``.

    Raises:
        dagster.Failure: the PDF cannot be converted (the converter's reason; the run's
            failure hook records it on the catalog row).
    """
    row = version_to_build(stores, doc_id)
    blobs = stores.blobs()
    converter = converter_for(row.name, providers)

    if not config.force:
        stored = StepRecords(blobs).previous_markdown(doc_id)
        if stored is not None and stored.sha256 == row.sha256 and stored.provider == converter.name:
            context.log.info("%s: file unchanged since its last conversion; reusing it", doc_id)
            return dg.Output(stored, metadata=_metadata(stored, reused=True, version=row.version))

    data = blobs.get(row.blob_key)
    started = time.perf_counter()
    layouts = StoredLayout(blobs, layout.layout_analysis_key(doc_id), row.sha256,
                           reuse=not config.force)
    try:
        if not is_text_document(row.name):  # bounded work first (issue 16)
            check_pdf(data, row.name, PdfLimits.from_settings(stores.settings))
        converted = converter.convert_reusing(data, row.name, layouts)
    except ConversionError as error:
        raise dg.Failure(description=str(error), allow_retries=False) from error
    document = MarkdownDocument.from_converted(
        converted,
        doc_id=doc_id,
        name=row.name,
        provider=converter.name,
        sha256=row.sha256,
        size_bytes=row.size_bytes,
        seconds=round(time.perf_counter() - started, 3),
    )
    return dg.Output(
        document,
        metadata={
            **_metadata(document, reused=False, version=row.version),
            "layout_reused": layouts.reused,
            **provider_usage(converter),
        },
    )


class StoredLayout(LayoutStore):
    """The converter's layout analysis of one document's file, kept in the blob store under
    ``key`` (``layout.layout_analysis_key``; deleted with the document's step outputs) as
    gzipped JSON ``{"engine", "sha256", "pages"}``.

    ``load`` returns the pages only when the engine, the file's SHA-256 and the page count
    match and ``reuse`` is on (``force`` turns it off: everything is done again, and the new
    analysis replaces the kept one). A kept blob that cannot be read as such is logged and
    ignored. ``reused`` says whether ``load`` handed pages back.

    Raises (``save``):
        BlobStoreFullError / StoreError: the blob store could not take it; the build fails
            there as it would when storing the Markdown.
    """

    def __init__(self, blobs: BlobStore, key: str, sha256: str, *, reuse: bool = True) -> None:
        self.blobs, self.key, self.sha256, self.reuse = blobs, key, sha256, reuse
        self.reused = False

    def load(self, engine: str, pages: int) -> list[dict] | None:
        """The kept ``pages`` pages of ``engine`` for this file, else ``None``."""
        if not self.reuse:
            return None
        try:
            kept = json.loads(gzip.decompress(self.blobs.get(self.key)))
        except FileNotFoundError:
            return None
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            logger.warning("%s cannot be read (%s); the layout analysis runs again",
                           self.key, exc)
            return None
        if not isinstance(kept, dict) or not isinstance(kept.get("pages"), list):
            logger.warning("%s is not a kept layout analysis; it runs again", self.key)
            return None
        if (kept.get("engine"), kept.get("sha256"), len(kept["pages"])) != (
            engine, self.sha256, pages
        ):
            return None
        self.reused = True
        return kept["pages"]

    def save(self, engine: str, pages: list[dict]) -> None:
        """Keep ``pages`` for this file under ``key`` (replacing what was there)."""
        record = {"engine": engine, "sha256": self.sha256, "pages": pages}
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.blobs.put(self.key, gzip.compress(data, compresslevel=6, mtime=0))


def converter_for(name: str, providers: Providers) -> MarkdownConverter:
    """The converter of the document named ``name``: the text pass-through for ``.md``/``.txt``
    (``text_markdown.is_text_document``: offline, no model, whatever the providers), else the
    providers' PDF converter."""
    return TextMarkdownConverter() if is_text_document(name) else providers.converter()


def _metadata(document: MarkdownDocument, *, reused: bool, version: int) -> dict[str, object]:
    seconds = document.seconds if not reused else 0.0
    return {
        "document_version": version,
        "pages": document.pages,
        "title": document.title,
        "version": document.version,
        "converter": document.converter,
        "characters": len(document.markdown),
        "figure_regions": len(document.figures),
        **timing(seconds, document.pages),
        "reused": reused,
        "markdown_conversions": 0 if reused else 1,
        "markdown_key": layout.markdown_key(document.doc_id),
    }

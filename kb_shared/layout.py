"""Blob key layout: where the pipeline stores each document's files, relative to the blob root.

The writer (``kb_assets``) and the reader (``kb_mcp``, which serves ``/files/…``) both build keys
here, so neither spells a prefix by hand. ``doc`` is a ``doc_id`` (``kb_shared.identity``), or for
a document's own file and figures the ``version_key`` of one of its versions (``doc_id@v2``), so
each version keeps its own files; step outputs are per ``doc_id`` (the Dagster partition).

    pdfs/{doc}                       the uploaded original: a PDF, or a .md/.txt file (served)
    markdown/{doc}.md, .json         converted Markdown and its metadata sidecar
    markdown/{doc}.layout.json.gz    the converter's layout analysis of the file, kept so a new
                                     revision of its rules does not run it again
    chunks/{doc}.parquet             the chunks asset's output
    assets/{asset}/{doc}.json        other assets' step summaries
    figures/{doc}/figure-{n}.png     a figure crop (served), plus .inline.png and .embed.png
    snapshots/{doc}.json             a version's sections and sentences (``kb_shared.compliance.changes``),
                                     kept after the version is superseded, for "what changed"
"""

from __future__ import annotations

from dataclasses import dataclass

PDFS = "pdfs/"
MARKDOWN = "markdown/"
CHUNKS = "chunks/"
ASSET_OUTPUTS = "assets/"
FIGURES = "figures/"
SNAPSHOTS = "snapshots/"

#: Prefixes the read-only HTTP routes may serve (PDFs and figure renders; never step outputs).
SERVED_PREFIXES: tuple[str, ...] = (PDFS, FIGURES)


def pdf_key(doc: str) -> str:
    """Key of a document's stored original file: its PDF, or its ``.md``/``.txt`` file. One
    key for every original, so serving, deleting and repairing need no rule per file type;
    the type is the document name's extension (``providers.text_markdown.is_text_document``)."""
    return f"{PDFS}{doc}"


def markdown_key(doc: str) -> str:
    """Key of a document's converted Markdown."""
    return f"{MARKDOWN}{doc}.md"


def markdown_meta_key(doc: str) -> str:
    """Key of the JSON metadata stored beside the Markdown (title, version, pages, converter)."""
    return f"{MARKDOWN}{doc}.json"


def layout_analysis_key(doc: str) -> str:
    """Key of the layout analysis kept from a document's last conversion (gzipped JSON,
    ``kb_assets.assets.markdown.StoredLayout``)."""
    return f"{MARKDOWN}{doc}.layout.json.gz"


def chunks_key(doc: str) -> str:
    """Key of a document's chunks (Parquet)."""
    return f"{CHUNKS}{doc}.parquet"


def asset_output_key(asset: str, doc: str) -> str:
    """Key of an asset's stored step summary (JSON) for one document."""
    return f"{ASSET_OUTPUTS}{asset}/{doc}.json"


def snapshot_key(doc: str) -> str:
    """Key of one version's change snapshot (``kb_shared.compliance.changes.Snapshot``; ``doc`` is the
    version's key). It outlives the version's other data: the next issue is compared with it."""
    return f"{SNAPSHOTS}{doc}.json"


def figures_prefix(doc: str) -> str:
    """Prefix under which all of a document's figure renders live (ends with ``/``)."""
    return f"{FIGURES}{doc}/"


@dataclass(frozen=True, slots=True)
class FigureKeys:
    """Blob keys of one figure's three renders.

    Attributes:
        stored: the full-size crop (linked from citations).
        inline: the 1024 px copy returned as MCP image content.
        embed: the copy given to the embedding model.
    """

    stored: str
    inline: str
    embed: str

    def all(self) -> tuple[str, str, str]:
        """The three keys."""
        return (self.stored, self.inline, self.embed)


def figure_keys(doc: str, number: int) -> FigureKeys:
    """Blob keys of figure ``number`` (1-based) of ``doc``."""
    base = f"{figures_prefix(doc)}figure-{number}"
    return FigureKeys(stored=f"{base}.png", inline=f"{base}.inline.png", embed=f"{base}.embed.png")


def is_served(key: str) -> bool:
    """Whether ``key`` is under a prefix the HTTP routes may serve."""
    return key.startswith(SERVED_PREFIXES)

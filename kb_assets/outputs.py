"""What the corpus assets hand to each other (stored by ``io_manager.BlobIOManager``)."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

from kb_shared.providers.base import ConvertedDocument, FigureRegion


@dataclass(frozen=True, kw_only=True)
class MarkdownDocument(ConvertedDocument):
    """Output of the ``markdown`` asset: the converter's ``ConvertedDocument`` (Markdown with
    ``<!-- page N -->`` markers, pages, title, version, converter, figure regions) and where it
    came from. ``seconds`` is the conversion time this step measured (0 when reused).

    Attributes (keyword-only, besides ``ConvertedDocument``'s):
        doc_id: partition key.
        name: file name as added.
        provider: the converter provider's ``name`` (a change of provider re-converts).
        sha256: SHA-256 of the source file the Markdown was made from.
        size_bytes: its size.
    """

    doc_id: str
    name: str
    provider: str
    sha256: str
    size_bytes: int

    @classmethod
    def from_converted(cls, converted: ConvertedDocument, **source: Any) -> MarkdownDocument:
        """``converted`` with its ``source`` fields (``doc_id``, ``name``, ``provider``,
        ``sha256``, ``size_bytes``; a ``seconds`` given here replaces the converter's)."""
        fields = {f.name: getattr(converted, f.name) for f in dataclasses.fields(ConvertedDocument)}
        return cls(**{**fields, "figures": tuple(converted.figures), **source})

    def meta(self) -> dict[str, Any]:
        """Everything but the Markdown text, JSON-serialisable."""
        data = asdict(self)
        data.pop("markdown")
        data["figures"] = [asdict(f) for f in self.figures]
        return data

    @classmethod
    def from_meta(cls, meta: dict[str, Any], markdown: str) -> MarkdownDocument:
        """Inverse of ``meta`` plus the Markdown text."""
        figures = tuple(
            FigureRegion(
                page=int(f["page"]),
                bbox=tuple(f["bbox"]) if f.get("bbox") is not None else None,
                caption=f.get("caption", ""),
            )
            for f in meta.get("figures", [])
        )
        fields = {k: v for k, v in meta.items() if k != "figures"}
        return cls(markdown=markdown, figures=figures, **fields)


@dataclass(frozen=True)
class StepSummary:
    """Output of ``embeddings``, ``graph`` and ``figures``: counts the ``record`` asset needs,
    plus a fingerprint of the inputs so an unchanged document can be skipped."""

    doc_id: str
    counts: dict[str, int] = field(default_factory=dict)
    fingerprint: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepSummary:
        """Inverse of ``to_json``."""
        return cls(**data)

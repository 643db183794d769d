"""What the corpus assets hand to each other (stored by ``io_manager.BlobIOManager``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kb_shared.providers.base import FigureRegion


@dataclass(frozen=True)
class MarkdownDocument:
    """Output of the ``markdown`` asset: the converted document and where it came from.

    Attributes:
        doc_id: partition key.
        name: file name as added.
        markdown: Markdown with ``<!-- page N -->`` markers (see ``ConvertedDocument``).
        pages: page count.
        title, version: extracted citation fields (may be empty).
        converter: converter name and mode (as the converter reports it).
        provider: the converter provider's ``name`` (a change of provider re-converts).
        sha256: SHA-256 of the source PDF the Markdown was made from.
        size_bytes: PDF size.
        figures: figure regions the converter saw.
        seconds: conversion time (0 when reused).
    """

    doc_id: str
    name: str
    markdown: str
    pages: int
    title: str
    version: str
    converter: str
    provider: str
    sha256: str
    size_bytes: int
    figures: tuple[FigureRegion, ...] = ()
    seconds: float = 0.0

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

"""A blob-backed IO manager: upstream outputs survive across runs, so re-materialising one
asset (``kb rebuild graph``) loads its inputs instead of re-running them.

Layout under the blob root (``kb_assets.constants``): ``markdown/{doc}.md`` plus
``markdown/{doc}.json`` (metadata), ``chunks/{doc}.parquet``, ``assets/{asset}/{doc}.json``.
"""

from __future__ import annotations

import io
import json

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from kb_assets.constants import (
    ASSET_OUTPUT_KEY,
    CHUNKS,
    CHUNKS_KEY,
    MARKDOWN,
    MARKDOWN_KEY,
    MARKDOWN_META_KEY,
)
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import load_settings
from kb_shared.chunking import Chunk
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.factory import open_blob_store

_CHUNK_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("document", pa.string()),
        ("index", pa.int32()),
        ("text", pa.string()),
        ("heading_path", pa.list_(pa.string())),
        ("page_start", pa.int32()),
        ("page_end", pa.int32()),
        ("kind", pa.string()),
    ]
)


def chunks_to_parquet(chunks: list[Chunk]) -> bytes:
    """Serialise chunks to Parquet bytes (schema ``_CHUNK_SCHEMA``, one row per chunk)."""
    table = pa.Table.from_pylist(
        [
            {
                "id": c.id,
                "document": c.document,
                "index": c.index,
                "text": c.text,
                "heading_path": list(c.heading_path),
                "page_start": c.page_start,
                "page_end": c.page_end,
                "kind": c.kind,
            }
            for c in chunks
        ],
        schema=_CHUNK_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def chunks_from_parquet(data: bytes) -> list[Chunk]:
    """Inverse of ``chunks_to_parquet``."""
    rows = pq.read_table(io.BytesIO(data)).to_pylist()
    return [
        Chunk(
            id=r["id"],
            document=r["document"],
            index=r["index"],
            text=r["text"],
            heading_path=tuple(r["heading_path"] or ()),
            page_start=r["page_start"],
            page_end=r["page_end"],
            kind=r["kind"],
        )
        for r in rows
    ]


def save_markdown(blobs: BlobStore, document: MarkdownDocument) -> None:
    """Write the ``.md`` and its metadata sidecar."""
    blobs.put(MARKDOWN_KEY.format(doc=document.doc_id), document.markdown.encode("utf-8"))
    blobs.put(
        MARKDOWN_META_KEY.format(doc=document.doc_id),
        json.dumps(document.meta(), ensure_ascii=False, indent=1).encode("utf-8"),
    )


def load_markdown(blobs: BlobStore, doc: str) -> MarkdownDocument:
    """Read a stored ``MarkdownDocument``. Raises ``FileNotFoundError``/``KeyError`` if absent."""
    meta = json.loads(blobs.get(MARKDOWN_META_KEY.format(doc=doc)))
    text = blobs.get(MARKDOWN_KEY.format(doc=doc)).decode("utf-8")
    return MarkdownDocument.from_meta(meta, text)


class BlobIOManager(dg.ConfigurableIOManager):
    """Stores each partition's output in the blob store (see module docstring).

    Attributes:
        home: overrides ``KB_HOME`` (tests); ``None`` = environment.
    """

    home: str | None = None

    def _blobs(self) -> BlobStore:
        return open_blob_store(load_settings(self.home))

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        """Write ``obj`` for the output's asset and partition."""
        doc = context.asset_partition_key
        asset = context.asset_key.path[-1]
        blobs = self._blobs()
        if isinstance(obj, MarkdownDocument):
            save_markdown(blobs, obj)
        elif asset == CHUNKS:
            blobs.put(CHUNKS_KEY.format(doc=doc), chunks_to_parquet(list(obj)))  # type: ignore[arg-type]
        elif isinstance(obj, StepSummary):
            blobs.put(
                ASSET_OUTPUT_KEY.format(asset=asset, doc=doc),
                json.dumps(obj.to_json(), ensure_ascii=False).encode("utf-8"),
            )
        else:
            raise TypeError(f"BlobIOManager cannot store {type(obj).__name__} for {asset}")

    def load_input(self, context: dg.InputContext) -> object:
        """Read the upstream asset's stored output for this partition."""
        doc = context.asset_partition_key
        asset = context.asset_key.path[-1]
        blobs = self._blobs()
        if asset == MARKDOWN:
            return load_markdown(blobs, doc)
        if asset == CHUNKS:
            return chunks_from_parquet(blobs.get(CHUNKS_KEY.format(doc=doc)))
        data = json.loads(blobs.get(ASSET_OUTPUT_KEY.format(asset=asset, doc=doc)))
        return StepSummary.from_json(data)

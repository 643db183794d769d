"""Step outputs kept across runs: the blob-backed IO manager, and ``StepRecords``, the one API
that reads and writes them.

Upstream outputs survive across runs, so re-materialising one asset (``kb rebuild graph``)
loads its inputs instead of re-running them, and an asset can skip unchanged work by asking
``StepRecords`` for its own previous output. Nothing else reads these blobs.

Layout (``kb_shared.layout``): ``markdown/{doc}.md`` + ``markdown/{doc}.json`` (metadata) for
``markdown``, ``chunks/{doc}.parquet`` for ``chunks``, ``assets/{asset}/{doc}.json`` for the
step summaries of the other assets.

A batched run (``kb_assets.assets.batch``: one run over a range of documents) hands the IO
manager a ``Batch``: one blob per document is stored, exactly as a single run stores it, and
its inputs are loaded per document (``Batch`` again, with the documents whose stored output is
missing named). The run's failed documents are kept under
``layout.asset_output_key(RUN_FAILURES, run_id)``, so later steps of the run leave them out.
"""

# No `from __future__ import annotations`: Dagster reads ``BlobIOManager``'s field annotation
# (``ResourceDependency[StoresResource]``) as a class to wire the dependency.

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from kb_assets.constants import CHUNKS, CORPUS_ASSETS, MARKDOWN
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.ingest.chunking import Chunk
from kb_shared.stores.blobs import BlobStore

#: The pseudo-asset name under which a batched run's failed documents are stored (one JSON
#: object ``{doc_id: reason}`` per run id; ``StepRecords.run_failures``).
RUN_FAILURES = "batch-failures"

#: Dagster's run tag of the first partition of a range run (``dagster._core.storage.tags``).
RANGE_START_TAG = "dagster/asset_partition_range_start"


@dataclass
class Batch:
    """One asset's outputs over the documents of a batched run.

    Attributes:
        outputs: doc_id -> the output a single run of that document has (``MarkdownDocument``,
            ``list[Chunk]`` or ``StepSummary``).
        missing: doc_id -> why its stored output could not be loaded (as an input only).
    """

    outputs: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

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
        ("page_label_start", pa.string()),
        ("page_label_end", pa.string()),
        ("page_runs", pa.list_(pa.list_(pa.int32()))),
        ("located", pa.bool_()),
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
                "page_label_start": c.page_label_start,
                "page_label_end": c.page_label_end,
                "page_runs": [list(run) for run in c.page_runs],
                "located": c.located,
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
            page_label_start=r.get("page_label_start") or "",  # absent in older files
            page_label_end=r.get("page_label_end") or "",
            page_runs=tuple((int(a), int(b)) for a, b in r.get("page_runs") or ()),  # absent in
            located=r.get("located"),  # files written before pages were located
        )
        for r in rows
    ]


class StepRecords:
    """The stored output of each corpus asset for each document.

    ``markdown`` stores a ``MarkdownDocument``, ``chunks`` a ``list[Chunk]``, every other
    asset a ``StepSummary``. ``load`` raises ``FileNotFoundError``/``KeyError`` when nothing
    is stored; the ``previous_*`` methods return ``None`` instead.
    """

    def __init__(self, blobs: BlobStore) -> None:
        self._blobs = blobs

    def save(self, asset: str, doc: str, output: object) -> None:
        """Store ``asset``'s output for ``doc``.

        A ``MarkdownDocument`` is two blobs, its text and its metadata, stored all or nothing
        (``_save_markdown``).

        Raises:
            TypeError: ``output`` is not the type ``asset`` produces.
            BlobStoreFullError, OSError: the blob store refused a write (the output keeps
                what was stored before; a Markdown pair that cannot be put back, nothing).
        """
        if asset == MARKDOWN and isinstance(output, MarkdownDocument):
            self._save_markdown(doc, output)
        elif asset == CHUNKS and isinstance(output, list):
            self._blobs.put(layout.chunks_key(doc), chunks_to_parquet(output))
        elif asset not in (MARKDOWN, CHUNKS) and isinstance(output, StepSummary):
            data = json.dumps(output.to_json(), ensure_ascii=False)
            self._blobs.put(layout.asset_output_key(asset, doc), data.encode("utf-8"))
        else:
            raise TypeError(f"cannot store a {type(output).__name__} as the output of {asset}")

    def load(self, asset: str, doc: str) -> object:
        """The stored output of ``asset`` for ``doc`` (type as in the class docstring)."""
        if asset == MARKDOWN:
            return self._markdown(doc)
        if asset == CHUNKS:
            return chunks_from_parquet(self._blobs.get(layout.chunks_key(doc)))
        return self._summary(asset, doc)

    def previous_markdown(self, doc: str) -> MarkdownDocument | None:
        """The Markdown the last successful ``markdown`` run stored for ``doc``, if any."""
        if not self._blobs.exists(layout.markdown_meta_key(doc)):
            return None
        return self._markdown(doc)

    def previous_summary(self, asset: str, doc: str) -> StepSummary | None:
        """The summary ``asset`` stored on its last successful run for ``doc``, if any."""
        if not self._blobs.exists(layout.asset_output_key(asset, doc)):
            return None
        return self._summary(asset, doc)

    def reusable_summary(
        self, asset: str, doc: str, fingerprint: str, count: str, stored: Callable[[], int]
    ) -> StepSummary | None:
        """``asset``'s previous summary for ``doc`` when its work can be kept: the summary has
        this input ``fingerprint`` and the store still holds the ``count`` it recorded
        (``stored()``, called only when the fingerprint matches; a summary without ``count``
        matches no stored count). ``None`` when the step must run."""
        previous = self.previous_summary(asset, doc)
        if previous is None or previous.fingerprint != fingerprint:
            return None
        return previous if stored() == previous.counts.get(count, -1) else None

    def run_failures(self, run_id: str) -> dict[str, str]:
        """The documents a batched run has failed so far: doc_id -> reason ({} for none)."""
        key = layout.asset_output_key(RUN_FAILURES, run_id)
        if not self._blobs.exists(key):
            return {}
        return dict(json.loads(self._blobs.get(key)))

    def add_run_failures(self, run_id: str, failures: dict[str, str]) -> None:
        """Add ``failures`` (doc_id -> reason) to the run's failure list (nothing when empty).
        Steps of one run add in turn (they run one after another for the same documents)."""
        if not failures:
            return
        merged = {**self.run_failures(run_id), **failures}
        data = json.dumps(merged, ensure_ascii=False).encode("utf-8")
        self._blobs.put(layout.asset_output_key(RUN_FAILURES, run_id), data)

    def clear_run_failures(self, run_id: str) -> None:
        """Remove the run's failure list (the batch driver has read it)."""
        key = layout.asset_output_key(RUN_FAILURES, run_id)
        if self._blobs.exists(key):
            self._blobs.delete(key)

    def _save_markdown(self, doc: str, document: MarkdownDocument) -> None:
        """Write the text, then the metadata, which marks a stored pair (``previous_markdown``
        looks for it). When the metadata write fails, both blobs are put back as they were
        (``_put_back``), so the document keeps the new pair, its previous pair, or none."""
        text_key, meta_key = layout.markdown_key(doc), layout.markdown_meta_key(doc)
        written = {
            text_key: document.markdown.encode("utf-8"),
            meta_key: json.dumps(document.meta(), ensure_ascii=False, indent=1).encode("utf-8"),
        }
        before = {key: self._blobs.get(key) if self._blobs.exists(key) else None for key in written}
        self._blobs.put(text_key, written[text_key])
        try:
            self._blobs.put(meta_key, written[meta_key])
        except Exception as error:
            self._put_back(before, written, error)
            raise

    def _put_back(
        self, before: dict[str, bytes | None], written: dict[str, bytes], error: Exception
    ) -> None:
        """Undo a write of ``written`` that failed with ``error``: each key gets its ``before``
        blob again (removed where there was none; left alone where it was the same). When a
        put fails as well (a full disk has no room for the old blob either), every key is
        removed, and the conversion runs again on the next build: no pair rather than half of
        one. A store that refuses that too is named in a note on ``error``."""
        try:
            try:
                for key, data in before.items():
                    if data is None:
                        self._blobs.delete(key)
                    elif data != written[key]:
                        self._blobs.put(key, data)
            except Exception:  # noqa: BLE001 - no room to put one back
                for key in before:
                    self._blobs.delete(key)
        except Exception as undo:  # noqa: BLE001 - the write's own error goes up
            error.add_note(
                f"{', '.join(before)} may not match each other: undoing the write failed too "
                f"({undo}); `kb rebuild markdown` writes both again"
            )

    def _markdown(self, doc: str) -> MarkdownDocument:
        meta = json.loads(self._blobs.get(layout.markdown_meta_key(doc)))
        text = self._blobs.get(layout.markdown_key(doc)).decode("utf-8")
        return MarkdownDocument.from_meta(meta, text)

    def _summary(self, asset: str, doc: str) -> StepSummary:
        return StepSummary.from_json(json.loads(self._blobs.get(layout.asset_output_key(asset, doc))))

    @staticmethod
    def keys(doc: str) -> list[str]:
        """Every key a document's step outputs may occupy (for ``kb delete``)."""
        return [
            layout.markdown_key(doc),
            layout.markdown_meta_key(doc),
            layout.layout_analysis_key(doc),
            layout.chunks_key(doc),
            *(layout.asset_output_key(a, doc) for a in CORPUS_ASSETS if a not in (MARKDOWN, CHUNKS)),
        ]


class BlobIOManager(dg.ConfigurableIOManager):
    """Stores each partition's output through ``StepRecords`` in the run's blob store.

    Attributes:
        stores: the run's ``StoresResource`` (the same one the assets get; see
            ``kb_assets.definitions``), so the IO manager shares its settings and clients.
    """

    stores: dg.ResourceDependency[StoresResource]

    def _records(self) -> StepRecords:
        return StepRecords(self.stores.blobs())

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        """Store ``obj`` for the output's asset and partition; a ``Batch`` one blob per
        document it holds (the failed ones of a batch have none)."""
        asset = context.asset_key.path[-1]
        records = self._records()
        if isinstance(obj, Batch):
            for doc, output in obj.outputs.items():
                records.save(asset, doc, output)
            return
        records.save(asset, context.asset_partition_key, obj)

    def load_input(self, context: dg.InputContext) -> object:
        """Read the upstream asset's stored output for this partition; in a batched run a
        ``Batch`` of each document's, a document without a stored output named in
        ``missing`` (its step then fails that document alone)."""
        asset = context.asset_key.path[-1]
        records = self._records()
        if RANGE_START_TAG not in context.step_context.dagster_run.tags:
            return records.load(asset, context.asset_partition_key)
        batch = Batch()
        for doc in context.asset_partition_keys:
            try:
                batch.outputs[doc] = records.load(asset, doc)
            except (FileNotFoundError, KeyError):
                batch.missing[doc] = (
                    f"no stored {asset} output (build every step: `kb build {doc}`)"
                )
        return batch

"""Benchmark — what a new revision of the local converter's rules costs a built corpus.

A new revision of ``PymupdfMarkdownConverter``'s rules (its ``name``: r1 … r7 so far) converts
every document again on the next ``kb build --all``: the markdown asset reuses stored Markdown
only while the converter's name matches. Since 2026-12-07 the layout analysis of each file is
kept beside its Markdown (``kb_assets.assets.markdown.StoredLayout``), so only the rules run
again. Run from the repository root::

    .venv/bin/python -m benchmarks.upgrade_cost --home benchmarks/work/ingest-eval21

It copies the built home to ``benchmarks/work/upgrade`` (the source is left as it is) and twice
marks every document's stored Markdown as made by another revision (the ``provider`` in its
metadata sidecar, which the markdown asset compares with the converter's name: what a user's
home looks like after upgrading kb), then builds every document again with
``kb_assets.operations.build_documents`` (the code of ``kb build --all``):

1. ``without kept layout`` — the home as every home built before 2026-12-07 is (any kept
   analysis is deleted first): layout runs for every document, and its analysis is kept;
2. ``with kept layout`` — the same again, now reading the kept analysis.

Per phase: wall time, the markdown step's seconds, conversions, layouts reused, chunks
re-embedded. Then whether each document's Markdown after phase 2 is byte-identical to phase 1's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Report,
    Stopwatch,
    fresh_dir,
    kb_environment,
    log,
    materialisations,
    numeric,
    open_corpus,
    step_durations,
)

#: The converter name the stored Markdown is marked with before each phase.
OLDER_REVISION = "pymupdf4llm-layout-r-before"


@dataclass
class Phase:
    """One rebuild of every document after a simulated upgrade."""

    name: str
    wall: float
    documents: int
    failed: int
    markdown_seconds: float = 0.0
    markdown_step_seconds: float = 0.0
    conversions: int = 0
    layouts_reused: int = 0
    embedded: int = 0
    markdown: dict[str, bytes] = field(default_factory=dict)


def mark_older(blobs: Any, doc_ids: list[str], *, drop_kept: bool) -> None:
    """Set the ``provider`` of each document's stored Markdown metadata (in ``blobs``, a
    ``BlobStore``) to ``OLDER_REVISION``; with ``drop_kept`` delete its kept layout analysis
    too, as in a home built before they were kept."""
    from kb_shared import layout  # noqa: PLC0415

    for doc in doc_ids:
        key = layout.markdown_meta_key(doc)
        meta = json.loads(blobs.get(key))
        meta["provider"] = OLDER_REVISION
        blobs.put(key, json.dumps(meta, ensure_ascii=False, indent=1).encode("utf-8"))
        if drop_kept:
            blobs.delete(layout.layout_analysis_key(doc))


def rebuild(home: Path, name: str, workers: int, *, drop_kept: bool = False) -> Phase:
    """Mark every ready document's Markdown as older (and with ``drop_kept`` delete the kept
    layout analyses, as in a home built before they were kept), build them all, and read the
    runs."""
    with kb_environment(home):
        corpus = open_corpus(home)
        from kb_assets import operations  # noqa: PLC0415 - after KB_HOME is set
        from kb_shared import layout  # noqa: PLC0415

        doc_ids = [row.doc_id for row in corpus.stores.catalog().list_documents("ready")]
        blobs = corpus.stores.blobs()
        mark_older(blobs, doc_ids, drop_kept=drop_kept)
        log(f"{name}: rebuilding {len(doc_ids)} documents")
        with Stopwatch() as watch:
            outcomes = operations.build_documents(
                corpus.stores, corpus.instance, doc_ids, workers=workers
            )
        phase = Phase(name, watch.seconds, len(outcomes),
                      sum(o.status != "ready" for o in outcomes))
        for outcome in outcomes:
            meta = materialisations(corpus.instance, outcome.run_id)
            markdown = meta.get("markdown", {})
            phase.markdown_seconds += numeric(markdown, "seconds")
            phase.markdown_step_seconds += step_durations(corpus.instance, outcome.run_id).get(
                "markdown", 0.0
            )
            phase.conversions += int(numeric(markdown, "markdown_conversions"))
            phase.layouts_reused += int(bool(markdown.get("layout_reused")))
            phase.embedded += int(numeric(meta.get("embeddings", {}), "embedded"))
        phase.markdown = {doc: blobs.get(layout.markdown_key(doc)) for doc in doc_ids}
        corpus.close()
    log(f"{name}: {phase.wall:.1f} s, markdown {phase.markdown_seconds:.1f} s, "
        f"{phase.layouts_reused} layouts reused")
    return phase


def main(argv: list[str] | None = None) -> int:
    """Run both phases and write ``benchmarks/results/upgrade-cost-<date>[-variant].md``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a built KB_HOME (copied)")
    parser.add_argument("--workers", type=int, default=2, help="documents at once (kb's default)")
    parser.add_argument("--variant", default="", help="suffix of the report's file name")
    args = parser.parse_args(argv)

    report = Report("upgrade-cost", "What a new revision of the converter's rules costs",
                    variant=args.variant)
    home = fresh_dir("upgrade")
    shutil.rmtree(home)
    shutil.copytree(args.home, home)
    report.fact("copied home", f"{args.home} → {home}")
    report.fact("documents at once", args.workers)

    phases = [rebuild(home, "without kept layout", args.workers, drop_kept=True),
              rebuild(home, "with kept layout", args.workers)]
    first, second = phases
    same = sum(first.markdown[doc] == second.markdown.get(doc) for doc in first.markdown)

    report.heading("Rebuild after a new rules revision")
    report.table(
        ["phase", "documents", "failed", "wall s", "markdown body s", "markdown step s",
         "conversions", "layouts reused", "chunks embedded"],
        [[p.name, p.documents, p.failed, f"{p.wall:.1f}", f"{p.markdown_seconds:.1f}",
          f"{p.markdown_step_seconds:.1f}", p.conversions, p.layouts_reused, p.embedded]
         for p in phases],
    )
    report.text(
        f"Markdown after the second phase byte-identical to the first's: **{same} of "
        f"{len(first.markdown)}** documents. Wall time ratio (with / without): "
        f"**{second.wall / first.wall:.2f}**; markdown step: "
        f"**{second.markdown_seconds / max(first.markdown_seconds, 1e-9):.2f}**."
    )
    path = report.write()
    log(f"wrote {path}")
    return 0 if same == len(first.markdown) and not first.failed and not second.failed else 1


if __name__ == "__main__":
    sys.exit(main())

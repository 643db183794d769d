"""The retrieval benchmark's eval sets and corpora: loading a set of the shared corpus's format
(``../shared/corpus/README.md``) and the KB_HOME it is searched in — a reused ``--home``, or a
cached build of the PDFs it cites. Split out of ``benchmarks.retrieval`` (module docstring,
"Corpus"), which re-exports these names.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_PDFS,
    WORK_DIR,
    Stopwatch,
    add_pdfs,
    fresh_dir,
    git_revision,
    kb_environment,
    log,
    open_corpus,
    pdf_page_count,
)
from kb_shared.search import evaluation
from kb_shared.search.evaluation import Question

#: Name of the stamp file a cached build leaves in its KB_HOME.
STAMP_FILE = "bench-build.json"


# --------------------------------------------------------------------------------------
# Eval sets and hit rules
# --------------------------------------------------------------------------------------
@dataclass
class EvalSet:
    """A folder's ``questions.jsonl`` and the folder of the PDFs it cites."""

    name: str
    folder: Path
    pdfs_dir: Path
    questions: list[Question]

    @property
    def cited(self) -> list[str]:
        """File names of every document an evidence item names, sorted."""
        return sorted({e.doc for q in self.questions for e in q.evidence})

    @property
    def answerable(self) -> list[Question]:
        """Questions with evidence."""
        return [q for q in self.questions if q.answerable]

    @property
    def absent(self) -> list[Question]:
        """Questions without evidence (the corpus has no answer)."""
        return [q for q in self.questions if not q.answerable]


def load_eval_set(folder: Path, pdfs_dir: Path | None = None, name: str | None = None) -> EvalSet:
    """Read ``folder/questions.jsonl`` (``kb_shared.search.evaluation.load_questions``).

    Args:
        pdfs_dir: the PDFs the questions cite; default ``folder/pdfs`` when it exists, else
            ``../shared/corpus/pdfs``.
        name: the set's name in the report (default: the folder's name).

    Raises:
        FileNotFoundError: no ``questions.jsonl``.
        ValueError: a line that is not JSON or in neither format (with its line number).
    """
    path = folder / "questions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no questions.jsonl in {folder}")
    questions = evaluation.load_questions(path)
    if pdfs_dir is None:
        pdfs_dir = folder / "pdfs" if (folder / "pdfs").is_dir() else DEFAULT_PDFS
    return EvalSet(name=name or folder.name, folder=folder, pdfs_dir=pdfs_dir, questions=questions)


# --------------------------------------------------------------------------------------
# Corpora: reuse a KB_HOME or build (and cache) the cited PDFs
# --------------------------------------------------------------------------------------
def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_stamp(pdfs: Sequence[Path]) -> dict[str, Any]:
    """What decides whether a cached build can be reused: each PDF's SHA-256, the Markdown
    converter's name (``pymupdf4llm-layout-r3``: bumped when its output changes) and the
    pymupdf4llm version, the embedding model id, the chunk budget (``Settings.chunk_words``)
    and the vector index layout version. Call inside ``kb_environment`` (local providers);
    loads no model weights.

    Code changes that keep those (a refactor, a new chunking rule without a converter bump)
    do not invalidate the cache — that keeps ``make bench`` inside its budget while the code
    moves; pass ``--rebuild`` after changing chunking or the embedding text.
    """
    from importlib import metadata  # noqa: PLC0415

    from kb_shared.providers import factory  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SCHEMA_VERSION  # noqa: PLC0415

    settings = Settings()
    return {
        "pdfs": {p.name: _sha256_file(p) for p in pdfs},
        "converter": factory.markdown_converter(settings).name,
        "pymupdf4llm": metadata.version("pymupdf4llm"),
        "embedding_model": factory.embedder(settings).model,
        "chunk_words": settings.chunk_words,
        "vector_schema": SCHEMA_VERSION,
    }


@dataclass
class Corpus:
    """The KB_HOME an eval set is searched in, and how it came to be."""

    home: Path
    how: str  # "reused --home", "cached build", "built"
    build_seconds: float | None = None
    pages: int | None = None


def ready_documents(home: Path) -> set[str]:
    """File names of the ready documents in ``home``'s catalog (empty when there is none)."""
    if not (home / "kb.sqlite").exists() and not (home / "vectors.sqlite").exists():
        return set()
    from kb_mcp.documents import document_list as catalogue  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores import factory  # noqa: PLC0415

    with kb_environment(home):
        catalog = factory.open_catalog(Settings(), reader=True)
    try:
        return {row.name for row in catalogue(catalog).ready}
    finally:
        catalog.close()


def ensure_corpus(
    eval_set: EvalSet, home: Path | None, *, rebuild: bool, cache: Path = WORK_DIR
) -> Corpus:
    """The KB_HOME to search ``eval_set`` in (module docstring, "Corpus"); cached builds
    live in ``cache/retrieval-<set>`` (``cache`` inside ``benchmarks/work``).

    Raises:
        FileNotFoundError: a cited PDF is not in ``eval_set.pdfs_dir``.
        RuntimeError: a cited PDF failed to build (with the reasons).
    """
    cited = eval_set.cited
    if home is not None:
        missing = sorted(set(cited) - ready_documents(home))
        if not missing:
            log(f"{eval_set.name}: every cited document is ready in {home}; reusing it")
            return Corpus(home=home, how=f"reused `--home {home}`")
        log(f"{eval_set.name}: {len(missing)} cited documents are not ready in {home} "
            f"({', '.join(missing[:3])}…); using a cached build instead")
    pdfs = [eval_set.pdfs_dir / name for name in cited]
    absent = [p for p in pdfs if not p.is_file()]
    if absent:
        raise FileNotFoundError(
            f"{eval_set.name} cites PDFs missing from {eval_set.pdfs_dir}: "
            + ", ".join(p.name for p in absent) + " (pass their folder with --pdfs)"
        )
    target = cache / f"retrieval-{eval_set.name}"
    pages = sum(pdf_page_count(p) or 0 for p in pdfs)
    with kb_environment(target):
        stamp = build_stamp(pdfs)
    stamp_path = target / STAMP_FILE
    if not rebuild and stamp_path.is_file():
        recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
        if recorded.get("stamp") == stamp:
            log(f"{eval_set.name}: cached build in {target} matches; reusing it")
            return Corpus(home=target, how=f"cached build of {recorded.get('built_at')} "
                          f"(git {recorded.get('git')}; same PDFs, converter, model)",
                          build_seconds=recorded.get("seconds"), pages=pages)
        changed = sorted(k for k in stamp if recorded.get("stamp", {}).get(k) != stamp[k])
        log(f"{eval_set.name}: cached build is stale ({', '.join(changed)} changed); rebuilding")
    target = fresh_dir(str(target.resolve().relative_to(WORK_DIR.resolve())))
    log(f"{eval_set.name}: building {len(pdfs)} PDFs ({pages} pages) in {target}")
    with kb_environment(target), Stopwatch() as watch:
        from kb_assets import operations  # noqa: PLC0415 - after KB_HOME is set

        corpus = open_corpus(target)
        try:
            added, intake = add_pdfs(corpus, pdfs)
            refused = [(o.name, o.status, o.reason) for o in intake if o.doc_id not in added]
            if refused:
                raise RuntimeError(f"{eval_set.name}: PDFs not added: {refused}")
            built = operations.build_documents(
                corpus.stores, corpus.instance, added,
                on_done=lambda o: log(f"  {o.status:6} {o.name} in {o.seconds:.1f} s"),
            )
        finally:
            corpus.close()
    failed = [(b.name, b.reason) for b in built if b.status != "ready"]
    if failed:
        raise RuntimeError(f"{eval_set.name}: cited PDFs failed to build: {failed}")
    stamp_path.write_text(
        json.dumps({"stamp": stamp, "seconds": round(watch.seconds, 1), "git": git_revision(),
                    "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2),
        encoding="utf-8",
    )
    return Corpus(home=target, how="built now", build_seconds=watch.seconds, pages=pages)

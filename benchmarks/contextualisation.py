"""Measure what a chunk's contextual prefix earns: re-embed copies of built corpora per variant.

``python -m benchmarks.contextualisation --set regulatory=HOME[:EVAL] --set financebench=HOME
--variant A --variant C --variant C:A …`` copies each ``KB_HOME`` (``cp -a``) to
``/tmp/ctx-<set>-<variant>``, re-embeds every chunk point of the copy (kinds ``text`` and
``table``; figures keep their vectors) with the variant's text through the vector index's own
``upsert`` (dense vector and sparse text, as the embeddings asset writes them), then asks every
answerable question of the set through ``benchmarks.retrieval_levers.run`` (search_docs, top
10, the hit rule of ``kb_shared.search.evaluation``) and prints R@1 / R@5 / R@10 / MRR overall, per
kind and per even / odd half, and every question whose rank differs from the first variant's.
The homes themselves are never written.

Variants (``VARIANTS``; ``DENSE:SPARSE`` embeds with one text and indexes the other's sparse
text, e.g. ``C:A``); ``home`` evaluates an unchanged copy (the pipeline as built).
The report this fed: ``benchmarks/results/retrieval-2026-12-02-contextualisation.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import fmt_duration, kb_environment, load_average, log
from benchmarks.retrieval_levers import DEFAULT_EVAL, run, summary
from kb_shared.search import evaluation
from kb_shared.ingest.contextual import stored_embedding_text
from kb_shared.search.citations import PATH_SEPARATOR, PointPayload, naming_title

#: What each variant puts in front of the chunk text (a blank line between prefix and text).
VARIANTS = {
    "A": "chunk text only, no prefix",
    "B": "heading path only, no title",
    "C": "title + heading path (the pipeline's embedding_text)",
    "D": "title (version V) + heading path, where the document has a version",
    "R": "C with an SEC filing's title cut to its registrant ('3M COMPANY', not '3M COMPANY "
         "Form 10-K for the fiscal year ended …')",
}

#: The label that evaluates an unchanged copy of the home.
AS_BUILT = "home"

#: Texts per ``embed_documents`` call (``benchmarks.retrieval.CANDIDATE_BATCH``).
BATCH = 64

#: Where the copies go: ``/tmp/ctx-<set>-<variant>``.
COPY_ROOT = Path("/tmp")

#: Point kinds re-embedded (chunks); figures keep their vectors.
CHUNK_KINDS = ("text", "table")


def variant_text(variant: str, text: str, payload: PointPayload) -> str:
    """The text variant ``variant`` (a key of ``VARIANTS``) embeds for a chunk point with
    ``text`` and ``payload``.

    ``C`` is ``kb_shared.ingest.contextual.stored_embedding_text`` (what the pipeline embeds); ``B`` the
    same without the title; ``D`` writes the payload's ``version`` after the title as
    ``"Title (version V)"`` (``C`` when the version is empty); ``A`` is ``text``.

    Raises:
        ValueError: ``variant`` is not a key of ``VARIANTS``.
    """
    if variant == "A":
        return text
    if variant == "B":
        return stored_embedding_text(text, dataclasses.replace(payload, title=""))
    if variant == "C":
        return stored_embedding_text(text, payload)
    if variant == "D":
        version, title = payload.version.strip(), payload.title.strip()
        if not version:
            return stored_embedding_text(text, payload)
        path = payload.section.split(PATH_SEPARATOR) if payload.section else []
        if title and path and path[0] == title:
            path = path[1:]  # C does not repeat a title equal to the outermost heading
        label = f"{title} (version {version})" if title else f"version {version}"
        return stored_embedding_text(
            text, dataclasses.replace(payload, title=label, section=PATH_SEPARATOR.join(path))
        )
    if variant == "R":
        registrant = naming_title(payload.title)
        return stored_embedding_text(text, dataclasses.replace(payload, title=registrant))
    raise ValueError(f"unknown variant {variant!r}; known: {sorted(VARIANTS)}")


def parse_variant(spec: str) -> tuple[str, str]:
    """``(dense variant, sparse variant)`` of ``"X"`` (both X) or ``"X:Y"``.

    Raises:
        ValueError: a part is not a key of ``VARIANTS``.
    """
    dense, _, sparse = spec.partition(":")
    sparse = sparse or dense
    for part in (dense, sparse):
        if part not in VARIANTS:
            raise ValueError(f"unknown variant {part!r} in {spec!r}; known: {sorted(VARIANTS)}")
    return dense, sparse


def copy_home(home: Path, set_name: str, label: str) -> Path:
    """A fresh ``cp -a`` copy of ``home`` at ``COPY_ROOT/ctx-<set_name>-<label>`` (a ``:`` in
    ``label`` becomes ``_``); an older copy there is removed first.

    Raises:
        FileNotFoundError: ``home`` holds no ``vectors.sqlite``.
        subprocess.CalledProcessError: ``cp`` failed.
    """
    if not (home / "vectors.sqlite").is_file():
        raise FileNotFoundError(f"{home} holds no vectors.sqlite: not a built KB_HOME")
    target = COPY_ROOT / f"ctx-{set_name}-{label.replace(':', '_')}"
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(["cp", "-a", str(home), str(target)], check=True)
    return target


@contextmanager
def opened_index(home: Path) -> Iterator[tuple[Any, Any]]:
    """``(vector index, embedder)`` of ``home`` with its local providers, the index opened for
    the embedder's model (not created), both closed when the block ends.

    Raises:
        kb_shared.errors.StoreError: the index cannot be opened.
    """
    from kb_shared.providers.factory import embedder as make_embedder  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores.factory import open_vector_index  # noqa: PLC0415

    with kb_environment(home):
        settings = Settings()
    embedder = make_embedder(settings)
    index = open_vector_index(settings)
    try:
        index.open(embedder.model, embedder.dimension, create=False)
        yield index, embedder
    finally:
        index.close()
        embedder.close()


class Reembedder:
    """Re-embeds the chunk points of copies of one home, each distinct variant text once.

    Vectors are kept per embedded text in this process, so ``C`` and ``C:A`` embed the ``C``
    texts once, and ``D`` embeds only the texts of documents with a version.
    """

    def __init__(self) -> None:
        self._vectors: dict[str, object] = {}
        self.embed_seconds = 0.0
        self.texts_embedded = 0

    def apply(self, copy: Path, dense: str, sparse: str) -> int:
        """Rewrite every chunk point of the index in ``copy``: its dense vector from
        ``variant_text(dense, …)``, its sparse text ``variant_text(sparse, …)``; payload, text,
        kind and document unchanged. Returns the points written.

        Raises:
            kb_shared.errors.StoreError: the index cannot be opened or written.
            kb_shared.errors.EmbeddingError: the local model failed.
        """
        import time  # noqa: PLC0415

        from kb_shared.stores.vectors import Point  # noqa: PLC0415

        with opened_index(copy) as (index, embedder):
            ids = [i for kind in CHUNK_KINDS for i in index.list_ids(kind=kind)]
            points = index.fetch(ids)
            payloads = [PointPayload.from_payload(p.payload) for p in points]
            texts = [
                variant_text(dense, p.text, pl) for p, pl in zip(points, payloads, strict=True)
            ]
            todo = sorted({t for t in texts if t not in self._vectors}, key=len)
            began = time.perf_counter()
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                vectors = embedder.embed_documents(batch)
                for text, vector in zip(batch, vectors, strict=True):
                    self._vectors[text] = vector
            self.embed_seconds += time.perf_counter() - began
            self.texts_embedded += len(todo)
            written = 0
            for start in range(0, len(points), BATCH * 8):
                rows = [
                    Point(id=p.id, document=p.document, kind=p.kind, text=p.text,
                          dense=self._vectors[text], payload=p.payload,
                          sparse_text=variant_text(sparse, p.text, pl))
                    for p, pl, text in zip(points[start : start + BATCH * 8],
                                           payloads[start : start + BATCH * 8],
                                           texts[start : start + BATCH * 8], strict=True)
                ]
                written += index.upsert(rows)
            return written


def versioned_documents(home: Path) -> tuple[int, int]:
    """``(documents with a payload version, documents)`` over the chunk points of ``home``
    (a copy: opening the index may write beside it)."""
    versions: dict[str, str] = {}
    with opened_index(home) as (index, _):
        for kind in CHUNK_KINDS:
            for point in index.fetch(index.list_ids(kind=kind)):
                versions[point.document] = PointPayload.from_payload(point.payload).version
    return sum(1 for v in versions.values() if v.strip()), len(versions)


def print_tables(set_name: str, results: dict[str, dict[str, int | None]],
                 kinds: dict[str, str], questions: dict[str, str]) -> None:
    """Markdown tables of one set: scores per variant (all, halves, kinds) and the questions
    whose rank differs from the first variant's."""
    labels = list(results)
    print(f"\n### {set_name}\n")
    print("| variant | R@1 | R@5 | R@10 | MRR | MRR even / odd | per-kind MRR |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label in labels:
        rows = dict(summary(results[label], kinds))
        every = rows["all"]
        kind_mrr = ", ".join(
            f"{name.removeprefix('kind ')} {s.mrr:.2f}" for name, s in rows.items()
            if name.startswith("kind ")
        )
        print(f"| {label} | {every.recall_at_1:.3f} | {every.recall_at_5:.3f} | "
              f"{every.recall_at_10:.3f} | {every.mrr:.3f} | {rows['even ids'].mrr:.3f} / "
              f"{rows['odd ids'].mrr:.3f} | {kind_mrr} |")
    first = labels[0]
    moved = [q for q in results[first] if len({results[lab][q] for lab in labels}) > 1]
    print(f"\nQuestions whose rank differs between variants ({len(moved)}):\n")
    print("| question | kind | " + " | ".join(labels) + " | question text |")
    print("| --- | --- | " + " | ".join("---" for _ in labels) + " | --- |")
    for qid in moved:
        ranks = " | ".join(str(results[lab][qid] or "-") for lab in labels)
        print(f"| {qid} | {kinds[qid]} | {ranks} | {questions[qid][:90]} |")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, metavar="NAME=HOME[:EVAL]")
    parser.add_argument("--variant", action="append", required=True,
                        metavar=f"{AS_BUILT}|X|X:Y (X, Y in {''.join(VARIANTS)})")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write every question's rank per set and variant here")
    args = parser.parse_args(argv)
    try:
        specs = {v: (None if v == AS_BUILT else parse_variant(v)) for v in args.variant}
    except ValueError as error:
        parser.error(str(error))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    everything: dict[str, dict[str, dict[str, int | None]]] = {}
    for spec in args.set:
        name, _, where = spec.partition("=")
        home_text, _, eval_text = where.partition(":")
        home = Path(home_text).resolve()
        folder = Path(eval_text) if eval_text else DEFAULT_EVAL / name
        questions = evaluation.load_questions(folder / "questions.jsonl")
        reembedder = Reembedder()
        results: dict[str, dict[str, int | None]] = {}
        for label, parts in specs.items():
            copy = copy_home(home, name, label)
            if not results:  # read the copy: SQLite may leave a journal beside what it opens
                with_version, documents = versioned_documents(copy)
                log(f"{name}: {with_version} of {documents} documents have a version")
            if parts is not None:
                written = reembedder.apply(copy, *parts)
                log(f"{name} {label}: {written} chunk points rewritten in {copy}; "
                    f"{reembedder.texts_embedded} texts embedded so far in "
                    f"{fmt_duration(reembedder.embed_seconds)} (load {load_average()})")
            results[label] = run(copy, questions, show=False, passes=0)
        everything[name] = results
        print_tables(name, results, {q.id: q.kind for q in questions},
                     {q.id: q.question for q in questions})
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

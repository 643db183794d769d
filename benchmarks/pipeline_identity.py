"""What the search pipeline answers to every shared eval question, to prove a refactor of it
changed nothing — ``python -m benchmarks.pipeline_identity``.

Usage::

    python -m benchmarks.pipeline_identity --out before.json
    python -m benchmarks.pipeline_identity --out after.json --against before.json
    python -m benchmarks.pipeline_identity --set regulatory=HOME[:EVAL] ... --out F

Each ``--set`` names an eval set, a built ``KB_HOME`` and the folder of its
``questions.jsonl``; the default is the three shared sets (``SETS``) over the homes the
retrieval benchmark built (``benchmarks/work/retrieval-<set>``; a missing home is an error:
this script never builds one). Every question, answerable or not, is asked over the home with
local providers, as the MCP tool asks it (``kb_mcp.tools.search_docs.answer_search``: the
served scope and the acronym table from one catalog read, the query embedded on the worker
thread, the documents' Markdown for quote pages):

* through ``kb_shared.search.retrieval.search_docs`` with the tool's arguments, recording the
  top 8 (chunk id, ``repr`` of the score and of the cosine, pages and their labels, the quote,
  its page and label), the confidence inputs (best cosine, coverage, exact terms), the
  confidence, the edition note and ``next_offset``; and the top 25's ids and score ``repr``s;
* through ``answer_search`` itself, recording the SHA-256 of the whole tool result (rendered
  text, images, structured content) as JSON.

Then each of ``PROBES`` (questions that reach the branches the eval sets seldom do: an
acronym asked about, codes, a clause number, an edition the corpus lacks, a statement, nothing
on topic) is asked over every home as the default page, the second page (offset 8), tables
only, figures only, and ordered by a reranker that re-orders (``ReversingReranker``), each
recorded like a question's top 8 (under ``probes`` in the set's records).

``--stops QUESTION`` (repeatable) instead follows each question through one search over the
first set's home (issue 29, "A query bounces"): every call of a ``kb_shared`` function on the
calling thread that receives the query (its text, a text containing it such as the keyword
text, or an object read from it: ``AnalysedQuery``, ``QuestionShape``, ``EditionQuestion``)
is a stop; consecutive stops in different modules are a hop, and a hop into a module visited
before is a return. It prints the stops, the module path, the hops and returns, and how often
the text was tokenised (``sparse.tokenize``).

``--out`` gets one JSON object (``{set: {question id: record}}``, keys sorted); with
``--against`` an earlier file is compared record by record and every difference is printed;
the exit code is 1 when any differs. Run it from a copy of the homes when another process may
rebuild them (the SQLite reader may also write a journal next to the index).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.common import DEFAULT_CORPUS, WORK_DIR, kb_environment, log
from kb_shared.search import evaluation

#: The shared eval sets and the homes ``benchmarks.retrieval`` builds for them.
SETS = ("regulatory", "financebench", "financebench-dev")

#: Results recorded in full (the tool's default page) and by id and score only (its maximum).
TOP = 8
DEEP = 25

#: Base URL of the links in the hashed tool results (any fixed value).
BASE = "http://kb.invalid"


#: Probe questions (module docstring); ``P1`` … in this order.
PROBES = (
    "What does CVP stand for?",
    "What is the FCAS constraint violation penalty?",
    "SO_OP_3705 dispatch instructions IN008-24",
    "What does requirement 3.1.5 say?",
    "What are the marginal loss factors for the 2021-22 financial year?",
    "What was the net cash from operating activities in the cash flow statement of 3M in 2018?",
    "Which table lists the fast-start unit modes?",
    "weather forecast for Paris tomorrow",
)

#: The probe variants: ``(label, offset, kind, reranked)``.
VARIANTS = (
    ("default", 0, None, False),
    ("page 2", TOP, None, False),
    ("tables", 0, "table", False),
    ("figures", 0, "figure", False),
    ("reranked", 0, None, True),
)


def reversing_reranker() -> Any:
    """A reranker that re-orders: the fused candidates reversed, relevance ``1 / (rank + 1)``
    (any fixed order will do; it takes search_docs down its reranker branch)."""
    from kb_shared.providers.base import FusionOrderReranker  # noqa: PLC0415

    class ReversingReranker(FusionOrderReranker):
        """``FusionOrderReranker`` backwards, and said to re-order."""

        name = "reversing"
        reorders = True

        def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
            """The last ``top_n`` texts, last first."""
            last = len(texts) - 1
            return [(last - i, 1.0 / (i + 1)) for i in range(min(top_n, len(texts)))]

    return ReversingReranker()


def passage_record(passage: Any) -> dict[str, Any]:
    """One ``retrieval.Passage`` as plain JSON: id, exact score and cosine, pages, quote."""
    cite = passage.citation
    quote = passage.quote
    return {
        "id": passage.point.id,
        "score": repr(passage.score),
        "similarity": repr(passage.similarity),
        "sparse_rank": passage.sparse_rank,
        "pages": [cite.page_start, cite.page_end],
        "page_labels": [cite.page_label_start, cite.page_label_end],
        "quote": None if quote is None else quote.text,
        "quote_page": None if quote is None else quote.page,
        "quote_page_label": None if quote is None else quote.page_label,
    }


def ask(
    state: Any, question: str, top_k: int, offset: int = 0, kind: str | None = None,
    reranker: Any = None,
) -> Any:
    """``retrieval.search_docs`` called with exactly the arguments ``answer_search`` passes
    (no document or category filter; ``reranker`` replaces the state's); returns its
    ``DocsAnswer``."""
    from kb_mcp.documents import read_serving_states, search_scope  # noqa: PLC0415
    from kb_shared.search import quotes, retrieval  # noqa: PLC0415

    vector = retrieval.start_query_embedding(state.embedder, question)
    states = read_serving_states(state.catalog)
    scope = search_scope(state.catalog, None, None, states)
    return retrieval.search_docs(
        state.vectors(), state.embedder, question, top_k=top_k, offset=offset,
        documents=scope, kind=kind, reranker=reranker or state.reranker,
        markdown=quotes.markdown_pages(state.blobs),
        vector=vector, acronyms=state.acronyms(states),
    )


def answer_record(answer: Any) -> dict[str, Any]:
    """A ``DocsAnswer``'s page and confidence as plain JSON (module docstring)."""
    return {
        "results": [passage_record(p) for p in answer.results],
        "best_similarity": repr(answer.best_similarity),
        "coverage": repr(answer.coverage),
        "exact_terms": list(answer.exact_terms),
        "low_confidence": answer.low_confidence,
        "edition_note": answer.edition_note,
        "next_offset": answer.next_offset,
        "reranked": answer.reranked,
        # recorded only when set, so records made before the absent-subject check compare
        **({"absent_names": list(answer.absent_names)} if answer.absent_names else {}),
    }


def question_record(state: Any, links: Any, question: str) -> dict[str, Any]:
    """Everything recorded for one question (module docstring)."""
    from kb_mcp.tools.search_docs import answer_search  # noqa: PLC0415

    deep = ask(state, question, DEEP)
    tool = answer_search(state, links, question, top_k=TOP)
    rendered = json.dumps(tool.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return {
        "question": question,
        **answer_record(ask(state, question, TOP)),
        "top_25": [[p.point.id, repr(p.score)] for p in deep.results],
        "tool_sha256": hashlib.sha256(rendered.encode("utf-8")).hexdigest(),
    }


def probe_records(state: Any) -> dict[str, Any]:
    """Each probe under each variant (module docstring), keyed ``"P<n> <variant>"``."""
    reranker = reversing_reranker()
    return {
        f"P{number} {label}": {
            "question": probe,
            **answer_record(ask(state, probe, TOP, offset, kind, reranker if reranked else None)),
        }
        for number, probe in enumerate(PROBES, start=1)
        for label, offset, kind, reranked in VARIANTS
    }


def run_set(home: Path, questions: Sequence[evaluation.Question]) -> dict[str, Any]:
    """``question_record`` of every question over ``home``, keyed by question id."""
    from kb_mcp.links import Links  # noqa: PLC0415
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    with kb_environment(home):
        state = open_state(Settings())
        try:
            state.embedder.warm()
            links = Links(BASE)
            records = {q.id: question_record(state, links, q.question) for q in questions}
            return {**records, "probes": probe_records(state)}
        finally:
            state.close()


#: Types whose objects carry the query once it is analysed (``--stops``), by name, so the
#: same count runs on code that predates them.
ANALYSED = frozenset({"AnalysedQuery", "QuestionShape", "EditionQuestion"})


@dataclass(frozen=True)
class Stops:
    """Where one search took the query (module docstring, ``--stops``).

    Attributes:
        calls: ``(module, function)`` of each stop, in call order.
        tokenisations: ``tokenize`` calls on a text containing the query.
    """

    calls: tuple[tuple[str, str], ...]
    tokenisations: int

    def path(self) -> list[str]:
        """The modules of the stops, consecutive repeats merged."""
        modules: list[str] = []
        for module, _ in self.calls:
            if not modules or modules[-1] != module:
                modules.append(module)
        return modules

    def returns(self) -> int:
        """Hops into a module the query had left before."""
        seen: set[str] = set()
        count = 0
        for module in self.path():
            count += module in seen
            seen.add(module)
        return count


def follow(state: Any, question: str) -> Stops:
    """``Stops`` of one ``ask`` of ``question`` (top 8), on the calling thread."""
    calls: list[tuple[str, str]] = []
    tokenisations = 0

    def carries(value: object) -> bool:
        if isinstance(value, str):
            return question in value
        return type(value).__name__ in ANALYSED

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal tokenisations
        module = frame.f_globals.get("__name__", "")
        code = frame.f_code
        if event != "call" or not module.startswith("kb_shared") or code.co_name.startswith("<"):
            return
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        arguments = [frame.f_locals.get(name) for name in names]
        if any(carries(value) for value in arguments):
            calls.append((module, code.co_qualname))
            tokenisations += code.co_name == "tokenize"

    sys.setprofile(profile)
    try:
        ask(state, question, TOP)
    finally:
        sys.setprofile(None)
    return Stops(tuple(calls), tokenisations)


def print_stops(home: Path, questions: Sequence[str]) -> None:
    """``follow`` each of ``questions`` over ``home`` and print what it found."""
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    with kb_environment(home):
        state = open_state(Settings())
        try:
            state.embedder.warm()
            for question in questions:
                found = follow(state, question)
                short = [m.rsplit(".", 1)[-1] for m in found.path()]
                distinct = list(dict.fromkeys(found.calls))
                print(f"{question!r}: {len(found.calls)} stops ({len(distinct)} distinct "
                      f"functions), {len(short) - 1} hops, {found.returns()} returns, "
                      f"{found.tokenisations} tokenisations of the text")
                print("   " + " > ".join(short))
                for module, function in distinct:
                    print(f"      {module.rsplit('.', 1)[-1]}.{function}")
        finally:
            state.close()


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each set or question whose record differs (with the first differing field), or that
    only one side has."""
    problems: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None or new is None:
            problems.append(f"{name}: only in {'after' if old is None else 'before'}")
            continue
        for qid in sorted(set(old) | set(new)):
            if old.get(qid) == new.get(qid):
                continue
            if qid not in old or qid not in new:
                problems.append(f"{name} {qid}: only in {'after' if qid not in old else 'before'}")
                continue
            fields = [k for k in sorted(set(old[qid]) | set(new[qid]))
                      if old[qid].get(k) != new[qid].get(k)]
            problems.append(f"{name} {qid}: {', '.join(fields)} differ")
    return problems


def parse_set(spec: str) -> tuple[str, Path, Path]:
    """``NAME=HOME[:EVAL]`` -> (name, home, eval folder); EVAL defaults to the shared set."""
    name, _, where = spec.partition("=")
    home_text, _, eval_text = where.partition(":")
    if not name or not home_text:
        raise SystemExit(f"--set {spec!r}: expected NAME=HOME[:EVAL]")
    return name, Path(home_text), Path(eval_text) if eval_text else DEFAULT_CORPUS / "eval" / name


def main(argv: Sequence[str] | None = None) -> int:
    """Record every set, write ``--out``, compare with ``--against``; exit 1 on a difference,
    2 when a home or an eval set is missing."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_identity",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--set", action="append", dest="sets", metavar="NAME=HOME[:EVAL]")
    parser.add_argument("--out", type=Path, help="JSON file to write (required without --stops)")
    parser.add_argument("--against", type=Path, help="an earlier file to compare with")
    parser.add_argument("--stops", action="append", metavar="QUESTION",
                        help="follow QUESTION through one search instead (repeatable)")
    args = parser.parse_args(argv)
    if args.out is None and not args.stops:
        parser.error("--out is required (or --stops)")
    specs = [parse_set(s) for s in args.sets] if args.sets else [
        (name, WORK_DIR / f"retrieval-{name}", DEFAULT_CORPUS / "eval" / name) for name in SETS
    ]
    missing = [str(p) for _, home, folder in specs
               for p in (home / "vectors.sqlite", folder / "questions.jsonl") if not p.exists()]
    if missing:
        print("missing (build the homes with benchmarks.retrieval first): " + ", ".join(missing))
        return 2
    if args.stops:
        print_stops(specs[0][1].resolve(), args.stops)
        return 0
    recorded: dict[str, Any] = {}
    for name, home, folder in specs:
        questions = evaluation.load_questions(folder / "questions.jsonl")
        log(f"{name}: {len(questions)} questions over {home}")
        recorded[name] = run_set(home.resolve(), questions)
    args.out.write_text(json.dumps(recorded, sort_keys=True, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    log(f"written to {args.out}")
    if args.against is None:
        return 0
    problems = differences(json.loads(args.against.read_text(encoding="utf-8")), recorded)
    for problem in problems:
        print(problem)
    print("identical" if not problems else f"DIFFERENT ({len(problems)} records)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

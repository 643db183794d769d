"""The absent-subject caveat of search_docs (``kb_shared.search.subjects``): the names and
clause numbers a question asks about, the ones no searched passage mentions, and the caveat the
answer leads with, which leaves its confidence to the other rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_shared.search.citations import PointPayload
from kb_shared.search.retrieval import search_docs
from kb_shared.search.subjects import (
    absent_message,
    absent_subjects,
    clause_numbers,
    named_subjects,
    subjects_of,
)
from kb_shared.stores.vectors import KIND_TEXT, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.fakes import HashingEmbedder


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Who is the CEO of Tesla?", ("Tesla",)),
        ("What is Ofgem's price cap for 2024?", ("Ofgem",)),
        # an abbreviation, a clause number, a financial year: not names
        ("What does NER clause 3.6.5(3) provide for FY2023?", ()),
        ("Which EMMS table carries the per-unit Raise6SecActualAvailability field?", ()),
        # the first word of each sentence, quotation, bracket and list item is capitalised anyway
        ("Assume you are an analyst. Answer this: What is Coca-Cola's revenue?", ("Coca-Cola",)),
        ("Dispatch instructions carry a 'Dispatch Mode'. What does it represent?", ("Mode",)),
        ("What was the growth for Block (Formerly Square)?", ("Block", "Square")),
        ("Sales grew. 2) Explain how Netflix amortizes content… Summarise the risks.",
         ("Netflix",)),
        # a contraction, a title, a month is no name; the title's dot ends no sentence
        ("Which controls cover access, since I've been asked to audit them?", ()),
        ("What did Dr. Albert Bourla announce on Aug 19 or on Monday?", ("Albert Bourla",)),
        # a name is a run of capitalised words, connectors inside it, as written, each once
        ("What did Andy Jassy say at Johnson & Johnson's meeting with Johnson & Johnson?",
         ("Andy Jassy", "Johnson & Johnson")),
        ("What does the Department of Defence require of the Retailer and the Distributor?",
         ("Department of Defence", "Retailer", "Distributor")),
        # too short to be title case
        ("Revenue of Tesla Motors?", ("Tesla Motors",)),
        ("", ()),
        # title case: the capitals name nothing
        ("What Is The Rebate For Heat Pumps Under The Solar Homes Program?", ()),
        # several parties named, most words still in lower case
        ("Must the Retailer tell the Distributor and AEMO when Solar Victoria asks?",
         ("Retailer", "Distributor", "Solar Victoria")),
    ],
)
def test_named_subjects(question: str, names: tuple[str, ...]) -> None:
    assert named_subjects(question) == names


def test_clause_numbers_of_three_levels_or_more_standing_alone_are_subjects_too() -> None:
    assert subjects_of("Does Tesla meet requirement 3.14.9?") == ("Tesla", "3.14.9")
    # a value or a two-level number may be a decimal; a number inside a longer code is the
    # code's ("A.9.2.1", "(9.2.1-1)", "4.9.2B"); three-digit levels are a figure
    assert clause_numbers(
        "An MLF of 0.9 under clause 3.1 and 4.10.0, control A.9.2.1, constraint (9.2.1-1), "
        "NER 4.9.2B(e), 177.866.000 thousand, and 4.10.0 again"
    ) == ("4.10.0",)


TEXTS = {
    "rules.pdf": (
        "The Retailer must notify the Distributor within 5 business days of a life support "
        "registration.",
        "Dispatch intervals are five minutes long. Clause 3.1.5 sets the penalty at 3 and 14.",
    ),
    "notice.pdf": ("Solar Victoria approves the installers of rebated heat pumps.",),
}


@pytest.fixture
def index(tmp_path: Path) -> SqliteVectorIndex:
    embedder = HashingEmbedder(64)
    index = SqliteVectorIndex(tmp_path / "v.sqlite")
    index.open(embedder.model, embedder.dimension)
    points = []
    for doc, texts in TEXTS.items():
        for n, (text, vector) in enumerate(
            zip(texts, embedder.embed_documents(list(texts)), strict=True)
        ):
            payload = PointPayload.build(
                doc_id=doc, name=doc, title=doc, version="", page_start=n + 1,
                page_end=n + 1, heading_path=(), chunk_index=n, pdf_key=f"pdfs/{doc}",
            ).to_payload()
            points.append(Point(id=f"{doc}-{n}", document=doc, kind=KIND_TEXT, text=text,
                                dense=vector, payload=payload))
    index.upsert(points)
    yield index
    index.close()


def test_absent_subjects_are_looked_up_in_the_scope_searched(index: SqliteVectorIndex) -> None:
    names = ("Distributor", "Solar Victoria", "Tesla", "The", "Andy Retailer")
    # a name is mentioned when any of its capitalised words is ("Andy Retailer": "Retailer")
    assert absent_subjects(index, names, None, None) == ("Tesla",)
    assert absent_subjects(index, names, ["rules.pdf"], None) == ("Solar Victoria", "Tesla")
    assert absent_subjects(index, names, ["notice.pdf"], None) == (
        "Distributor", "Tesla", "Andy Retailer")


def test_a_question_about_an_absent_name_leads_with_the_caveat_and_keeps_its_confidence(
    index: SqliteVectorIndex,
) -> None:
    embedder = HashingEmbedder(64)
    question = "When must the Retailer notify the Distributor of a life support registration?"
    answer = search_docs(index, embedder, question, top_k=2)
    assert (answer.absent_names, answer.low_confidence) == ((), False)
    assert answer.results[0].point.id == "rules.pdf-0"

    about_tesla = question.replace("the Distributor", "Tesla")
    answer = search_docs(index, embedder, about_tesla, top_k=2)
    assert answer.absent_names == ("Tesla",)
    assert answer.low_confidence is False  # a caveat: the other rules decide confidence
    assert answer.results[0].point.id == "rules.pdf-0"

    # one kind asked for: the names are still looked up in every kind of the documents
    # (here no table at all: low confidence by the cosine rule, with no name missing)
    answer = search_docs(index, embedder, question, top_k=2, kind="table")
    assert (answer.absent_names, answer.results) == ((), [])

    # scoped to the notice, the rule's own parties are absent
    answer = search_docs(index, embedder, question, top_k=2, documents=["notice.pdf"])
    assert answer.absent_names == ("Retailer", "Distributor")


def test_a_clause_number_no_passage_holds_whole_is_absent(index: SqliteVectorIndex) -> None:
    # "3.1.4" and "3.14.1" share parts ("3", "1", "14") with the text, not the whole number;
    # "3.1.5" is in it whole
    assert absent_subjects(index, ("3.1.5", "3.1.4", "3.14.1"), None, None) == ("3.1.4", "3.14.1")
    answer = search_docs(index, HashingEmbedder(64), "What does clause 3.1.4 set?", top_k=1)
    assert answer.absent_names == ("3.1.4",)
    answer = search_docs(index, HashingEmbedder(64), "What does clause 3.1.5 set?", top_k=1)
    assert answer.absent_names == ()


def test_absent_message_names_each_missing_name_and_asks_to_check_the_passages() -> None:
    assert absent_message(["Tesla"]) == (
        "No indexed passage searched mentions 'Tesla'. If the question is about it, the indexed "
        "documents do not cover it: tell the user so rather than answer from the passages "
        "below, which are about something else. A name the documents spell another way (a "
        "nickname, a variant spelling) shows here too, so check the passages first."
    )
    two = absent_message(["Ofgem", "4.2.7"], shown="relationships")
    assert two.startswith("No indexed passage searched mentions 'Ofgem', '4.2.7'. If the "
                          "question is about them,")
    assert "rather than answer from the relationships below" in two

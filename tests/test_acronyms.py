"""The acronym lever (``kb_shared.search.acronyms``): the graph's abbreviation pairs expand the sparse
side of a query both ways, ordinary words never expand, the server reloads the pairs when
the catalog's serving states change, and search_docs puts the passage that spells an
abbreviation out first."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.state import open_state
from kb_shared.search import acronyms as acronyms_module
from kb_shared.search.acronyms import AcronymCache, AcronymTable, acronyms_for, asks_about, is_short_form
from kb_shared.search.citations import PointPayload
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.identity import chunk_id, doc_id, sha256_bytes
from kb_shared.providers.graph_vocabulary import DEFINED_AS
from kb_shared.search.retrieval import search_docs
from kb_shared.stores import factory
from kb_shared.stores.vectors import KIND_TEXT, Point
from kb_shared import layout
from tests.mcp.corpus import HashingEmbedder, corpus_settings, tiny_pdf

#: Pairs as the local extractor stores them over the shared corpus (entity names).
PAIRS = [
    ("NPL", "non-physical loss"),
    ("CVP", "constraint violation penalty"),
    ("MVAr", "Megavolt-ampere-reactive"),
    ("ADG_ID", "Aggregate Dispatch Group Identifier"),
    ("NSP", "network service provider"),
    ("NC", "Non-conforming"),
    ("NC", "non-conformance"),
    ("IT", "information technology"),
    ("US", "United States"),
    ("AND", "Australian National Dictionary"),
    ("Rules", "National Electricity Rules"),
    ("Term ACT", "Definition Australian Capital Territory"),
]


@pytest.fixture(scope="module")
def table() -> AcronymTable:
    return AcronymTable(PAIRS)


def test_a_short_form_asked_about_adds_its_long_form(table: AcronymTable) -> None:
    found = table.expand("What does NPL stand for?")
    assert found.short_forms == ("NPL",)
    assert found.asked == ("NPL",)
    assert found.terms == ("non-physical", "non", "physical", "loss")
    assert table.sparse_text("What is the CVP?") == "What is the CVP? constraint violation penalty"
    assert table.expand("Define MVAr").terms == ("megavolt-ampere-reactive", "megavolt", "ampere", "reactive")
    assert table.expand("What does ADG_ID mean?").asked == ("ADG_ID",)


def test_a_plural_short_form_and_an_ambiguous_one_expand(table: AcronymTable) -> None:
    assert table.expand("What are NSPs short for?").terms == ("network", "service", "provider")
    # two long forms of NC (at most MAX_EXPANSIONS): both spellings join the sparse side
    assert table.expand("What does NC stand for?").terms == (
        "non-conforming", "non", "conforming", "non-conformance", "conformance"
    )


def test_too_many_long_forms_expand_to_nothing() -> None:
    many = AcronymTable([("PS", f"power station {n}") for n in "abcd"])
    assert many.expand("What does PS stand for?").terms == ()
    assert many.expand("What does PS stand for?").short_forms == ("PS",)


def test_a_short_form_used_as_context_does_not_expand(table: AcronymTable) -> None:
    found = table.expand("Which CVP factor applies to the non-conformance constraint in dispatch?")
    assert found.short_forms == ("CVP",)
    assert found.asked == ()
    assert found.terms == ("nc",)  # the long form named still adds its short form


def test_a_long_form_adds_its_short_form(table: AcronymTable) -> None:
    found = table.expand("How is the constraint violation penalty set for thermal limits?")
    assert found.long_forms == ("constraint violation penalty",)
    assert found.terms == ("cvp",)
    assert table.sparse_text("Who is a network service provider?") == (
        "Who is a network service provider? nsp"
    )


def test_ordinary_words_never_expand(table: AcronymTable) -> None:
    for query in ("What does IT stand for?", "What is US policy?", "What does AND mean?",
                  "what does it stand for?", "What are the Rules?", "What is the ACT?"):
        assert table.expand(query).terms == (), query
        assert table.sparse_text(query) == query
    assert table.expand("WHAT DOES NPL STAND FOR?").terms == ()  # shouted: no short forms
    assert table.expand("what does npl stand for?").terms == ()  # case-sensitive
    assert not is_short_form("IT") and not is_short_form("Rules") and not is_short_form("Term ACT")
    assert is_short_form("NPL") and is_short_form("MVAr") and is_short_form("ADG_ID")
    assert len(table) == 6  # NPL CVP MVAr ADG_ID NSP NC


def test_asks_about_needs_a_cue_near_the_short_form() -> None:
    assert asks_about("What is the NPL?", "NPL")
    assert asks_about("Spell out NPL", "NPL")
    assert not asks_about("In AEMO's fast-start documentation, what is meant by a unit's mode?", "AEMO")
    assert not asks_about("How is NPL clamping applied?", "NPL")
    assert not asks_about("How does SP 800-171 define a system?", "SP")  # a name, not asked


def test_a_question_naming_the_long_form_too_is_not_asking_the_short_form() -> None:
    pairs = AcronymTable([("CUI", "Controlled Unclassified Information")])
    found = pairs.expand("How does the guide define controlled unclassified information (CUI)?")
    assert found.short_forms == ("CUI",) and found.asked == () and found.terms == ()
    assert pairs.expand("What does CUI stand for?").asked == ("CUI",)


def test_spells_out_wants_the_long_form_before_the_parenthesis(table: AcronymTable) -> None:
    assert table.spells_out("Step 1b If non-physical losses (NPL) are detected", ["NPL"])
    assert not table.spells_out("If NPL are detected, the NPL-mitigation logic runs", ["NPL"])
    assert not table.spells_out("the clamping (NPL) step", ["NPL"])


def test_the_cache_reloads_only_when_the_signal_changes() -> None:
    loaded: list[list[tuple[str, str]]] = [[("NPL", "non-physical loss")]]
    cache = AcronymCache(lambda: AcronymTable(loaded[-1]))
    first = cache.get(("a", 1))
    assert cache.get(("a", 1)) is first
    loaded.append([("CVP", "constraint violation penalty")])
    assert cache.get(("a", 1)) is first and cache.loads == 1
    second = cache.get(("a", 2))
    assert cache.loads == 2
    assert second.long_forms("CVP") == [("constraint", "violation", "penalty")]
    assert second.long_forms("NPL") == []


# ---------------------------------------------------------------------------------------------
# A small corpus: search_docs and the server's reload
# ---------------------------------------------------------------------------------------------

NAME = "Fast Start.pdf"
DOC = doc_id(NAME)
USES = (
    "If NPL are detected, the standard mitigation logic runs and the first-pass commitment "
    "solve of the dispatch engine is repeated."
)
USES_AGAIN = (
    "Step 3: if NPL are detected, the second pass of the dispatch and pricing solve is rerun "
    "with interconnector flow clamping in every affected region and interval."
)
SPELLS = "Step 1b checks each pass for non-physical loss (NPL)."
TEXTS = (USES, USES_AGAIN, SPELLS, "Dispatch intervals are five minutes long.")


def _write(home: Path, embedder: HashingEmbedder) -> None:
    settings = corpus_settings(home)
    catalog = factory.open_catalog(settings)
    index = factory.open_vector_index(settings)
    index.open(embedder.model, embedder.dimension)
    points = [
        Point(
            id=chunk_id(DOC, n), document=DOC, kind=KIND_TEXT, text=text, dense=vector,
            payload=PointPayload.build(
                heading_path=("4 Two-pass solution",), doc_id=DOC, name=NAME, title="Fast start",
                version=None, page_start=9, page_end=9, chunk_index=n,
                pdf_key=layout.pdf_key(DOC), markdown_key=layout.markdown_key(DOC),
            ).to_payload(),
        )
        for n, (text, vector) in enumerate(zip(TEXTS, embedder.embed_documents(list(TEXTS)), strict=True))
    ]
    index.upsert(points)
    index.close()
    data = tiny_pdf(1, NAME)
    catalog.add_pending(NAME, DOC, sha256_bytes(data), len(data), layout.pdf_key(DOC))
    catalog.mark_ready(DOC, title="Fast start", version=None, pages=1, chunk_count=len(TEXTS),
                       figure_count=0, embedding_model=embedder.model)
    graph = factory.open_graph_store(settings, engine=catalog.engine)
    graph.ensure_schema(embedder.dimension)
    _edge(graph, DOC, "NPL", "non-physical loss")
    graph.close()
    catalog.close()


def _edge(graph, document: str, short: str, long_form: str) -> None:
    graph.replace_document(
        document,
        [Entity(name=short, type="DefinedTerm"), Entity(name=long_form, type="DefinedTerm")],
        [Relationship(source=entity_key(short), target=entity_key(long_form), type=DEFINED_AS,
                      description=f"{long_form} ({short})", source_doc=document,
                      chunk_id=chunk_id(document, 2))],
    )


@pytest.fixture(scope="module")
def embedder() -> HashingEmbedder:
    return HashingEmbedder(256)


@pytest.fixture
def home(tmp_path: Path, embedder: HashingEmbedder) -> Path:
    _write(tmp_path, embedder)
    return tmp_path


def test_search_docs_puts_the_spelled_out_passage_first(home: Path, embedder: HashingEmbedder) -> None:
    state = open_state(corpus_settings(home), embedder=embedder, use_reranker=False)
    try:
        index = state.vectors()
        query = "What does NPL stand for?"
        plain = search_docs(index, embedder, query, top_k=3)
        assert plain.results[0].point.text != SPELLS  # the passage that only uses NPL leads
        pairs = state.acronyms()
        assert pairs is not None and pairs.long_forms("NPL") == [("non-physical", "non", "physical", "loss")]
        expanded = search_docs(index, embedder, query, top_k=3, acronyms=pairs)
        assert expanded.results[0].point.text == SPELLS
        assert acronyms_for(state.graph).long_forms("NPL") == pairs.long_forms("NPL")
    finally:
        state.close()


def test_the_server_reloads_the_pairs_when_the_served_documents_change(
    home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(home)
    state = open_state(settings, embedder=embedder, use_reranker=False)
    try:
        first = state.acronyms()
        assert first is not None and state.acronyms() is first  # no change: no reload
        assert first.long_forms("CVP") == []
        # a second document is built: its edges are written, then it becomes ready
        catalog = factory.open_catalog(settings)
        graph = factory.open_graph_store(settings, engine=catalog.engine)
        name = "CVP Schedule.pdf"
        data = tiny_pdf(1, name)
        catalog.add_pending(name, doc_id(name), sha256_bytes(data), len(data), layout.pdf_key(doc_id(name)))
        _edge(graph, doc_id(name), "CVP", "constraint violation penalty")
        assert state.acronyms() is not first  # a pending document changed the serving states
        catalog.mark_ready(doc_id(name), title="CVP", version=None, pages=1, chunk_count=0,
                           figure_count=0, embedding_model=embedder.model)
        later = state.acronyms()
        assert later is not None and later.long_forms("CVP") == [("constraint", "violation", "penalty")]
        assert later.long_forms("NPL") == [("non-physical", "non", "physical", "loss")]
        graph.close()
        catalog.close()
    finally:
        state.close()


def test_the_switch_turns_the_lever_off(home: Path, embedder: HashingEmbedder,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acronyms_module, "ACRONYM_EXPANSION", False)
    state = open_state(corpus_settings(home), embedder=embedder, use_reranker=False)
    try:
        assert state.acronyms() is None
        assert acronyms_for(state.graph) is None
        assert acronyms_for(state.graph, switch=True) is not None
    finally:
        state.close()

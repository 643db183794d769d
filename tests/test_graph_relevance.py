"""search_graph's relation ranking (``kb_shared.search.graph_relevance``, ``kb_mcp.graph_search``):
the question's intent, the type and word scores, named seeds, and the order they give."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from benchmarks.graph_relations import Found, RelationalQuestion, first_answer, load_relational
from kb_mcp import graph_search
from kb_shared.graph_model import Entity, Relationship
from kb_shared.search.graph_relevance import (
    fold,
    name_candidates,
    relation_intent,
    type_score,
    word_score,
)
from kb_shared.stores.graph import EntityHit, GraphPath
from kb_shared.stores.graph_sql import SqlGraphStore


@pytest.mark.parametrize(
    ("question", "modal", "verb", "responsibility", "definition"),
    [
        ("Who must notify AEMO when a unit's availability changes?", "MUST", "NOTIFY", False, False),
        ("Who has to report SCADA failures to AEMO?", "MUST", "NOTIFY", False, False),
        ("What should retailers give customers?", "SHOULD", "PROVIDE", False, False),
        ("Who may issue dispatch instructions?", "MAY", "PROVIDE", False, False),
        ("Who is responsible for training workers?", None, None, True, False),
        ("What does CUI mean?", None, None, False, True),
        ("Dispatch procedure overview", None, None, False, False),
    ],
)
def test_relation_intent_reads_modal_verb_and_kind(
    question: str, modal: str | None, verb: str | None, responsibility: bool, definition: bool
) -> None:
    intent = relation_intent(question)
    assert (intent.modal, intent.verb, intent.responsibility, intent.definition) == (
        modal, verb, responsibility, definition,
    )


def test_type_score_prefers_the_asked_duty_and_drops_glossary_edges() -> None:
    notify = relation_intent("Who must notify AEMO?")
    assert type_score(notify, "MUST_NOTIFY") == 1.0
    assert type_score(notify, "MUST") == 0.75
    assert type_score(notify, "SHOULD_NOTIFY") == 0.75
    assert type_score(notify, "MAY_PROVIDE") == 0.5
    assert type_score(notify, "RESPONSIBLE_FOR") == 0.5
    assert type_score(notify, "DEFINED_USING") == 0.0
    assert type_score(notify, "REFERS_TO") == 0.0
    definition = relation_intent("What does FCAS stand for?")
    assert type_score(definition, "DEFINED_AS") == 1.0
    assert type_score(definition, "MUST_NOTIFY") == 0.0
    neutral = relation_intent("dispatch intervals overview")
    assert type_score(neutral, "MUST_NOTIFY") == 0.0 and type_score(neutral, "DEFINED_AS") == 0.0


def test_word_score_is_the_share_of_question_words_in_the_edge() -> None:
    intent = relation_intent("Who must report SCADA failures?")
    # question words: report, scada, failure (folded); "who"/"must" are stopwords
    assert sorted(intent.words) == ["failur", "report", "scada"]
    assert word_score(intent, "participants must report any SCADA failures", "market participant", "aemo") == 1.0
    assert word_score(intent, "SCADA values", "aggregate active power", "scada") == pytest.approx(1 / 3)
    assert fold("notified") == "notif" and fold("notifies") == "notif" and fold("notify") == "notify"


def test_name_candidates_include_singular_runs_and_skip_question_words() -> None:
    names = name_candidates("Who should participants contact about SCADA failures?")
    assert "participant" in names and "participants" in names
    assert "scada failure" in names and "scada" in names
    assert "who" not in names and "should" not in names
    assert names.index("scada failures") < names.index("scada")  # longest first


def _rel(source: str, target: str, kind: str, description: str, chunk: str) -> Relationship:
    return Relationship(source, target, kind, description, "doc.pdf", chunk)


def test_an_obligation_question_ranks_the_obligation_over_a_nearer_glossary_edge() -> None:
    glossary = _rel("aggregate active power", "scada", "DEFINED_USING",
                    "Aggregate Active Power is measured from SCADA", "doc.pdf-1")
    duty = _rel("market participant", "aemo", "MUST_NOTIFY",
                "Market Participants must advise AEMO of any work that may affect SCADA values",
                "doc.pdf-2")
    seeds = [EntityHit("scada", "SCADA", "Code", 0.8), EntityHit("aemo", "AEMO", "Organisation", 0.5)]
    paths = [GraphPath(("scada", "aggregate active power"), (glossary,)),
             GraphPath(("aemo", "market participant"), (duty,))]
    query = "Who must notify AEMO when work could affect SCADA values?"
    ranked = graph_search.rank_relationships(seeds, paths, 2, relation_intent(query))
    assert [rel.type for rel, _, _ in ranked] == ["MUST_NOTIFY", "DEFINED_USING"]
    # without an intent the old order stands: the nearer seed's edge first
    plain = graph_search.rank_relationships(seeds, paths, 2)
    assert [rel.type for rel, _, _ in plain] == ["DEFINED_USING", "MUST_NOTIFY"]


def test_named_seeds_add_entities_the_question_names(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'graph.sqlite'}")
    store = SqlGraphStore(engine)
    store.ensure_schema(2)
    entities = [Entity(name, "Role", "", (1.0, 0.0)) for name in
                ("Participant", "Market Participant", "AEMO", "Constraint Equation")]
    edges = [
        _rel("market participant", "aemo", "SHOULD", "participants should contact AEMO", "doc.pdf-0"),
        _rel("participant", "constraint equation", "REFERS_TO", "", "doc.pdf-1"),
    ]
    store.replace_document("doc.pdf", entities, edges)
    seeds = [EntityHit("constraint equation", "Constraint Equation", "Role", 0.58)]
    candidates = [*seeds, EntityHit("market participant", "Market Participant", "Role", 0.31),
                  EntityHit("aemo", "AEMO", "Role", 0.2)]
    query = "Who should participants contact about a constraint equation?"
    named = graph_search.named_seeds(store, query, seeds, candidates)
    # "participants" names the entity `participant` word for word (the floor similarity)
    # and is the head noun of the candidate `market participant` (its own similarity)
    assert [(h.key, h.score) for h in named] == [
        ("participant", graph_search.GRAPH_SEED_MIN_SIMILARITY), ("market participant", 0.31),
    ]
    store.close()
    engine.dispose()


def test_the_relational_set_and_its_hit_rule() -> None:
    questions = load_relational()
    assert len(questions) == 25
    assert {q.kind for q in questions} == {"notification", "obligation", "permission",
                                          "compliance", "responsibility"}
    question = RelationalQuestion("q", "notification", "?", frozenset({"nsp"}),
                                  frozenset({"MUST_NOTIFY"}), frozenset({"aemo"}), "D.pdf", (33,))
    right = Found("nsp", "aemo", "MUST_NOTIFY", "D.pdf", 32, 33)
    assert first_answer(question, [Found("aemo", "nsp", "MUST_NOTIFY", "D.pdf", 33, 33), right]) == 2
    assert first_answer(question, [Found("nsp", "aemo", "MUST", "D.pdf", 33, 33)]) is None
    assert first_answer(question, [Found("nsp", "aemo", "MUST_NOTIFY", "D.pdf", 34, 35)]) is None
    assert first_answer(question, [Found("nsp", "aemo", "MUST_NOTIFY", "E.pdf", 33, 33)]) is None


def test_a_question_naming_no_party_still_gets_the_duty_it_asks_for(tmp_path: Path) -> None:
    """"Who must notify whom?" seeds only "Notification"; the MUST_NOTIFY edges are fetched by
    type (``typed_paths``) and outrank the walked ones."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'graph.sqlite'}")
    store = SqlGraphStore(engine)
    store.ensure_schema(2)
    entities = [Entity(name, kind, "", (1.0, 0.0)) for name, kind in
                (("Retailer", "Role"), ("Distributor", "Role"), ("Party", "Role"),
                 ("Notification", "DefinedTerm"))]
    duty = _rel("retailer", "distributor", "MUST_NOTIFY",
                "The Retailer must notify the Distributor within 2 business days", "doc.pdf-0")
    walked = _rel("party", "notification", "MUST", "A party must keep each notification",
                  "doc.pdf-1")
    store.replace_document("doc.pdf", entities, [duty, walked])
    intent = relation_intent("Who must notify whom?")
    paths, seeds = graph_search.typed_paths(store, intent)
    assert [p.relationships[0].type for p in paths] == ["MUST_NOTIFY"]
    assert [(s.key, s.score) for s in seeds] == [("retailer", graph_search.GRAPH_SEED_MIN_SIMILARITY)]
    notification = EntityHit("notification", "Notification", "DefinedTerm", 0.53)
    ranked = graph_search.rank_relationships(
        [notification, *seeds],
        [GraphPath(("notification", "party"), (walked,)), *paths], 2, intent,
    )
    assert [rel.type for rel, _, _ in ranked] == ["MUST_NOTIFY", "MUST"]
    assert graph_search.typed_paths(store, relation_intent("What is a notification?")) == ([], [])
    store.close()
    engine.dispose()

"""spacy_graph.phrases: the name of a noun phrase no entity pattern covers (parsed with the
extractor's pipeline)."""

from __future__ import annotations

import pytest

from kb_shared.providers.local_graph import load_pipeline
from kb_shared.providers.spacy_graph.mentions import Mention
from kb_shared.providers.spacy_graph.phrases import phrase_mention, phrase_span


def _head(sentence: str, word: str):  # noqa: ANN202 - test helper
    doc = load_pipeline()(sentence)
    return next(t for t in doc if t.text == word)


@pytest.mark.parametrize(
    ("sentence", "head", "name"),
    [
        # counts, measures and grading words go, a hyphenated modifier stays whole
        ("They must give a minimum three year spare-parts warranty.", "warranty",
         "spare-parts warranty"),
        ("They must complete a minimum safety induction.", "induction", "safety induction"),
        ("They must fit a new smoke alarm.", "alarm", "smoke alarm"),
        ("They must install a compliant isolation switch.", "switch", "isolation switch"),
        # a classifying adjective stays
        ("They must hold an electrical licence.", "licence", "electrical licence"),
        ("A fast-acting relay must trip.", "relay", "fast-acting relay"),
        # a bare generic noun names its "of" object; another keeps one without determiner
        ("They must keep a copy of the wiring diagram.", "copy", "wiring diagram"),
        ("They must declare all conflicts of interest.", "conflicts", "conflicts of interest"),
        ("They must state the cause of the fault.", "cause", "cause"),
    ],
)
def test_phrase_span_keeps_the_classifying_modifiers(sentence: str, head: str, name: str) -> None:
    span = phrase_span(_head(sentence, head))
    assert span is not None and span.text == name


@pytest.mark.parametrize(
    ("sentence", "head"),
    [
        ("They must take all reasonable steps.", "steps"),  # a bare generic noun
        ("They must export 20 MW.", "MW"),  # a quantity
        ("They must attend the training.", "training"),  # a gerund
        ("They must sign it.", "it"),  # a pronoun
        ("They must reply within 10 days.", "10"),  # a number
    ],
)
def test_phrase_span_names_nothing(sentence: str, head: str) -> None:
    assert phrase_span(_head(sentence, head)) is None


def test_phrase_mention_types_and_resolution() -> None:
    seen: list[tuple[str, str]] = []

    def resolve(name: str, kind: str) -> tuple[str, str] | None:
        seen.append((name, kind))
        return None if name == "smoke alarm" else (name, kind)

    head = _head("The DNSPs must publish their network outage plans.", "DNSPs")
    party = phrase_mention(head, {}, resolve, party=True)
    assert party is not None and (party.name, party.type) == ("DNSP", "Role")
    plans = phrase_mention(_head("They publish network outage plans.", "plans"), {}, resolve)
    assert plans is not None and (plans.name, plans.type) == ("network outage plan", "DefinedTerm")
    # a role head noun makes a Role wherever it stands; another noun is a DefinedTerm
    seller = phrase_mention(_head("They notify the energy retailers.", "retailers"), {}, resolve)
    assert seller is not None and (seller.name, seller.type) == ("energy retailer", "Role")
    fitter = phrase_mention(_head("They notify the gas fitters.", "fitters"), {}, resolve)
    assert fitter is not None and (fitter.name, fitter.type) == ("gas fitter", "DefinedTerm")
    # the head of a name with an "of" object is made singular, the object kept as written
    conflict = phrase_mention(
        _head("They must declare all conflicts of interest.", "conflicts"), {}, resolve
    )
    assert conflict is not None and conflict.name == "conflict of interest"
    # the resolver may refuse a name
    assert phrase_mention(_head("They must fit a smoke alarm.", "alarm"), {}, resolve) is None
    assert ("smoke alarm", "DefinedTerm") in seen


def test_phrase_mention_prefers_a_code_among_the_modifiers() -> None:
    head = _head("Workers must complete the UEE1234 Isolation unit.", "unit")
    code = Mention(head.i - 2, head.i - 1, "UEE1234", "Code")
    by_token = {head.i - 2: code}
    assert head.doc[head.i - 2].text == "UEE1234"
    assert phrase_mention(head, by_token, lambda n, k: (n, k)) is code

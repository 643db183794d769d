"""Tests for kb_shared.search.sparse: the tokenizer that keeps regulatory codes whole, the sparse
vector it feeds Qdrant and the FTS5 strings it feeds SQLite.

Example strings come from the regulatory eval set (../shared/corpus/eval/regulatory/
questions.jsonl) and the design's own example code ``IN008-24``.
"""

from __future__ import annotations

import pysqlite3.dbapi2 as sqlite3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_shared.search import sparse
from kb_shared.search.sparse import (
    STOPWORDS,
    bm25_term_weight,
    fts_document,
    fts_query,
    sparse_vector,
    term_index,
    tokenize,
)
from kb_shared.stores.vectors_sqlite import _FTS_TOKENIZER


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("IN008-24", ["in008-24", "in008", "24"]),
        ("(IN008-24)", ["in008-24", "in008", "24"]),
        ("SO_OP_3705", ["so_op_3705", "so", "op", "3705"]),
        (
            "aemo_SO_OP_3705_Dispatch.pdf",
            ["aemo_so_op_3705_dispatch.pdf", "aemo", "so", "op", "3705", "dispatch", "pdf"],
        ),
        ("3.1.5.", ["3.1.5", "3", "1", "5"]),
        ("clause 4.10.0", ["clause", "4.10.0", "4", "10", "0"]),
        ("BW01", ["bw01"]),
        ("UIGFSurplus", ["uigfsurplus"]),
        # regulatory_009 evidence quote
        (
            "Unconstrained Intermittent Generation Forecast (UIGF) (variable UIGFSurplus) "
            "(4.10.0) 385 (200)",
            [
                "unconstrained",
                "intermittent",
                "generation",
                "forecast",
                "uigf",
                "variable",
                "uigfsurplus",
                "4.10.0",
                "4",
                "10",
                "0",
                "385",
                "200",
            ],
        ),
        # NIST SP 800-171 requirement 3.1.5 (regulatory eval evidence quote)
        (
            "3.1.5 Employ the principle of least privilege, including for specific security "
            "functions and privileged accounts.",
            [
                "3.1.5",
                "3",
                "1",
                "5",
                "employ",
                "principle",
                "least",
                "privilege",
                "including",
                "specific",
                "security",
                "functions",
                "privileged",
                "accounts",
            ],
        ),
        # regulatory_062 question (the "absent" case)
        (
            "How was requirement 3.1.1 reworded in NIST SP 800-171 Revision 3?",
            [
                "requirement",
                "3.1.1",
                "3",
                "1",
                "1",
                "reworded",
                "nist",
                "sp",
                "800-171",
                "800",
                "171",
                "revision",
                "3",
            ],
        ),
        # regulatory_019 question
        (
            "What does NER clause 3.6.5(3) provide regarding settlements residue?",
            [
                "ner",
                "clause",
                "3.6.5",
                "3",
                "6",
                "5",
                "3",
                "provide",
                "regarding",
                "settlements",
                "residue",
            ],
        ),
        ("a/b", ["a/b", "a", "b"]),
        ("-5 a--b", ["5", "b"]),  # joiners not between word characters separate; "a" stopword
        ("1,160 x MPC", ["1", "160", "x", "mpc"]),
        ("AEMO's terms-of-use", ["aemo", "terms-of-use", "terms", "of", "use"]),
    ],
)
def test_tokenize_keeps_codes_whole_and_adds_parts(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_markdown_syntax_and_page_markers_are_not_tokens() -> None:
    markdown = (
        "<!-- page 12 -->\n## 3.1 Bids\n| **Code** | `SO\\_OP\\_3705` |\n|---|---|\n"
        "| DUID<br>BW01 | > quoted *text* |"
    )
    assert tokenize(markdown) == [
        "3.1",
        "3",
        "1",
        "bids",
        "code",
        "so_op_3705",
        "so",
        "op",
        "3705",
        "duid",
        "bw01",
        "quoted",
        "text",
    ]


def test_hyphen_look_alikes_join_but_em_dash_separates() -> None:
    assert tokenize("IN008\u201124") == ["in008-24", "in008", "24"]  # non-breaking hyphen
    assert tokenize("2020\u201321") == ["2020-21", "2020", "21"]  # en dash
    assert tokenize("dispatch\u2014pricing") == ["dispatch", "pricing"]  # em dash


def test_unicode_is_nfkc_casefolded() -> None:
    assert tokenize("Müller Straße ÄRGER") == ["müller", "strasse", "ärger"]
    # decomposed u + combining diaeresis composes to the same term
    assert tokenize("Mu\u0308ller") == ["müller"]
    # full-width code from a CJK-encoded PDF
    assert tokenize("ＩＮ００８－２４") == ["in008-24", "in008", "24"]
    # Arabic presentation forms (as PDF extraction emits them) become base letters
    assert tokenize("ﺍﻟﺴﻼﻡ") == ["السلام"]
    # harakat (combining marks) stay inside their word; tatweel is dropped
    assert tokenize("عَلَيْكُم") == ["عَلَيْكُم"]
    assert tokenize("الـسلام") == ["السلام"]
    assert tokenize("Ölförderung 2023") == ["ölförderung", "2023"]


@pytest.mark.parametrize(
    "text", ["", "   \n\t", "the of and is", "| --- | *** | ` |", "<!-- page 3 -->"]
)
def test_text_without_terms(text: str) -> None:
    assert tokenize(text) == []
    assert fts_query(text) is None
    assert fts_document(text) == ""
    assert sparse_vector(text) == ([], [])


def test_stopwords_never_drop_numbers_or_codes() -> None:
    assert all(word.isalpha() for word in STOPWORDS)
    assert tokenize("in IN 1 in-house SO_OP the") == [
        "1",
        "in-house",
        "in",
        "house",
        "so_op",
        "so",
        "op",
    ]
    # regulation's obligation words are kept
    assert tokenize("shall must may not") == ["shall", "must", "may", "not"]


def test_term_index_is_stable_and_31_bit() -> None:
    # BLAKE2b-32 of the UTF-8 term, top bit cleared; fixed forever (stored vectors use it)
    assert term_index("in008-24") == 1471736075
    assert term_index("so_op_3705") == 1730873266
    values = {term_index(t) for t in ["in008-24", "in008", "24", "السلام", "müller", ""]}
    assert len(values) == 6
    assert all(0 <= v < 2**31 for v in values)


def test_sparse_vector_bm25_weights() -> None:
    # terms: in008-24 x2, in008 x2, 24 x2, notice x1 -> dl = 7, avgdl = 256
    indices, values = sparse_vector("IN008-24 notice IN008-24")
    norm = 1 - 0.75 + 0.75 * 7 / 256
    twice = 2 * 2.2 / (2 + 1.2 * norm)
    once = 1 * 2.2 / (1 + 1.2 * norm)
    assert twice == pytest.approx(1.8927911275, rel=1e-9)
    assert once == pytest.approx(1.6608670009, rel=1e-9)
    expected = {
        term_index("in008-24"): twice,
        term_index("in008"): twice,
        term_index("24"): twice,
        term_index("notice"): once,
    }
    assert indices == sorted(expected)
    assert values == pytest.approx([expected[i] for i in indices])


def test_bm25_weight_saturates_and_normalises_length() -> None:
    weights = [bm25_term_weight(tf, 256) for tf in (1, 2, 10, 1000)]
    assert weights == sorted(weights)
    assert weights[0] == pytest.approx(1.0)  # tf=1 at average length: (k1+1)/(1+k1)
    assert weights[-1] < 2.2  # never above k1 + 1
    assert bm25_term_weight(1, 1000) < bm25_term_weight(1, 10)


def test_sparse_vector_sums_colliding_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "term_index", lambda term: 7)
    indices, values = sparse_vector("alpha beta")
    one = bm25_term_weight(1, 2)
    assert indices == [7]
    assert values == pytest.approx([2 * one])


def test_fts_document_is_tokens_joined() -> None:
    assert fts_document("SO_OP_3705 Dispatch") == "so_op_3705 so op 3705 dispatch"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("IN008-24", '"in008-24" OR "in008" OR "24"'),
        ('IN008-24" OR 1=1 --', '"in008-24" OR "in008" OR "24" OR "1"'),
        ("NEAR(dispatch pricing, 3)", '"near" OR "dispatch" OR "pricing" OR "3"'),
        ("dispatch* -pricing", '"dispatch" OR "pricing"'),
        ("title:constraint ^first", '"title" OR "constraint" OR "first"'),
        ("(a OR b) AND NOT c", '"b" OR "not" OR "c"'),
        ('"', None),
        ("*", None),
        ("-", None),
        ("NEAR(", '"near"'),
    ],
)
def test_fts_query_quotes_every_term(text: str, expected: str | None) -> None:
    assert fts_query(text) == expected


def _fts_table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f'CREATE VIRTUAL TABLE f USING fts5(terms, tokenize="{_FTS_TOKENIZER}")')
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'row')")
    return conn


def test_fts_query_finds_the_code_and_survives_injection() -> None:
    conn = _fts_table()
    docs = {
        1: "Market notice IN008-24 was issued.",
        2: "Notice IN008 covered 24 units.",
        3: 'He said "NEAR(" and * and col:1 -- (parentheses).',
    }
    conn.executemany(
        "INSERT INTO f(rowid, terms) VALUES (?, ?)", [(k, fts_document(v)) for k, v in docs.items()]
    )
    ranked = [
        r[0]
        for r in conn.execute(
            "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f)", (fts_query("IN008-24"),)
        )
    ]
    assert ranked[0] == 1 and set(ranked) == {1, 2}
    hostile = 'NEAR(" * col:1 -- ) OR "'
    rows = conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (fts_query(hostile),)).fetchall()
    assert rows == [(3,)]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_any_text_gives_a_valid_fts_query_and_one_fts_token_per_term(text: str) -> None:
    conn = _fts_table()
    conn.execute("INSERT INTO f(rowid, terms) VALUES (1, ?)", (fts_document(text),))
    vocabulary = {row[0] for row in conn.execute("SELECT term FROM v")}
    assert vocabulary == set(tokenize(text))
    query = fts_query(text)
    if query is None:
        assert tokenize(text) == []
    else:
        assert conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (query,)).fetchall() == [(1,)]

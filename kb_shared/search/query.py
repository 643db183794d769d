"""The query of a search, checked, embedded and analysed once: the first stage of the search
pipeline (``kb_shared.search.retrieval``).

``analyse`` tokenises the text once (``kb_shared.search.sparse.tokenize``) and reads from it,
with those tokens, everything a later stage asks of the question: its identifier-like words,
what the corpus's abbreviation pairs add to its keyword side (``kb_shared.search.acronyms``),
the shape the re-ordering signals look for (``kb_shared.search.retrieval_features.
QuestionShape``), the editions it asks for (``kb_shared.search.editions.EditionQuestion``)
and the names it asks about (``kb_shared.search.subjects``).
The stages take the resulting ``AnalysedQuery``; none reads the text again.

``start_query_embedding`` embeds the text on a worker thread, so the model works while the
caller reads the catalog and the keyword side is searched.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from kb_shared.errors import QueryError
from kb_shared.search.editions import EditionQuestion, edition_question
from kb_shared.search.retrieval_features import QuestionShape, question_shape
from kb_shared.search.sparse import RAW_WORD, tokenize
from kb_shared.search.subjects import subjects_of

if TYPE_CHECKING:
    from kb_shared.providers.base import Embedder
    from kb_shared.search.acronyms import AcronymTable

#: Worker threads of ``start_query_embedding``: concurrent searches beyond this many wait for
#: one (the model already spreads one query over the cores it is given).
QUERY_EMBEDDING_THREADS = 8

#: Years and financial-year ranges (``2025``, ``2025-26``, ``2020/21``): never identifiers.
_YEAR = re.compile(r"(?:19|20)\d\d(?:[-/\u2013](?:\d\d|(?:19|20)\d\d))?")

_embedding_pool: ThreadPoolExecutor | None = None
_embedding_pool_lock = threading.Lock()


def _forget_embedding_pool() -> None:
    # a forked child has none of the parent's threads: its first search starts a new pool
    global _embedding_pool
    _embedding_pool = None


os.register_at_fork(after_in_child=_forget_embedding_pool)


def start_query_embedding(embedder: Embedder, query: str) -> Future[np.ndarray]:
    """Begin ``embedder.embed_query(query)`` on a worker thread and return its future, so the
    caller's catalog reads, the identifier look-ups and the sparse search run while the model
    works (onnxruntime and the C engines release the GIL; benchmarks/results/
    serving-2026-12-02-latency-round5.md). ``result()`` returns the ``(dimension,)`` float32
    vector or re-raises the embedder's error (``EmbeddingError``, ``ProviderError``).
    """
    global _embedding_pool
    with _embedding_pool_lock:
        if _embedding_pool is None:
            _embedding_pool = ThreadPoolExecutor(
                QUERY_EMBEDDING_THREADS, thread_name_prefix="kb-query-embedding"
            )
        pool = _embedding_pool
    return pool.submit(embedder.embed_query, query)


def check_query(query: str, max_chars: int) -> str:
    """Return the stripped query.

    Raises:
        QueryError: empty, or longer than ``max_chars`` (``Settings.max_query_chars``).
    """
    if len(query) > max_chars:
        raise QueryError(
            f"the query is {len(query):,} characters long; the limit is {max_chars:,}. Search "
            "with the key terms, codes or a one-sentence question instead of a whole passage."
        )
    text = query.strip()
    if not text:
        raise QueryError("the query is empty; pass the words, clause number or code to look for")
    return text


def identifier_terms(query: str) -> list[str]:
    """The identifier-like words of a query, as sparse-index terms (case-folded, whole).

    A word (``kb_shared.search.sparse.RAW_WORD``) of at least two characters counts when it
    contains a digit (``IN008-24``, ``3.1.5``, ``SO_OP_3705``, ``BW01``) or an upper-case
    letter after its first character (``UIGFSurplus``, ``RREG``); plain words (``Dispatch``,
    ``left-hand``) and single digits do not. Years and financial-year ranges are not
    identifiers: they qualify many passages of a document, so boosting them favours whichever
    passage repeats the year. Each is returned as its first ``tokenize`` term of the word
    alone, i.e. the whole compound.
    """
    terms: list[str] = []
    for raw in RAW_WORD.findall(query):
        word = raw.strip(".-_/")
        if not word or _YEAR.fullmatch(word):
            continue
        has_digit = any(ch.isdigit() for ch in word)
        inner_upper = any(ch.isupper() for ch in word[1:])
        if len(word) < 2 or not (has_digit or inner_upper):
            continue
        tokens = tokenize(word)
        if tokens and tokens[0] not in terms:
            terms.append(tokens[0])
    return terms


@dataclass(frozen=True, slots=True)
class AnalysedQuery:
    """A query analysed once and passed down the pipeline, so no stage reads the text again.

    Attributes:
        text: the query as checked (``check_query``): what the embedder, the reranker and the
            edition check receive.
        tokens: its ``tokenize`` terms in order, repeats kept.
        terms: its distinct terms (what ``term_coverage`` counts).
        identifiers: its identifier-like terms in query order (``identifier_terms``).
        sparse_text: what the keyword side searches: ``text``, plus the terms its
            abbreviations and long forms add (``AcronymTable.expand``) when a table was given.
        spells_out: true of a passage that spells out an abbreviation the query asks the
            meaning of (``AcronymTable.spells_out``); ``None`` when it asks of none.
        shape: what the re-ordering signals read from it (``retrieval_features``).
        editions: the editions it asks for and its subject words (``editions``), with the
            long forms of the abbreviations it names when a table was given.
        subjects: the names and clause numbers it asks about (``kb_shared.search.subjects.
            subjects_of``).
    """

    text: str
    tokens: tuple[str, ...]
    terms: frozenset[str]
    identifiers: tuple[str, ...]
    sparse_text: str
    spells_out: Callable[[str], bool] | None
    shape: QuestionShape
    editions: EditionQuestion
    subjects: tuple[str, ...] = ()


def analyse(query: str, acronyms: AcronymTable | None = None) -> AnalysedQuery:
    """Tokenise ``query`` once and read everything the pipeline needs from it (module
    docstring); ``acronyms``: the corpus's abbreviation pairs, ``None`` to search the keyword
    side with the query as it is."""
    tokens = tuple(tokenize(query))
    sparse_text = query
    spells_out: Callable[[str], bool] | None = None
    editions = edition_question(query, tokens)
    if acronyms is not None:
        expansion = acronyms.expand(query, tokens)
        sparse_text = expansion.sparse_text(query)
        if expansion.asked:
            spells_out = partial(acronyms.spells_out, shorts=expansion.asked)
        if editions.asked:  # a document named by its abbreviation is on the subject
            editions = editions.naming([
                *(t for short in expansion.short_forms for terms in acronyms.long_forms(short)
                  for t in terms),
                *expansion.terms,
            ])
    shape = question_shape(query, tokens)
    return AnalysedQuery(
        text=query,
        tokens=tokens,
        terms=frozenset(tokens),
        identifiers=tuple(identifier_terms(query)),
        sparse_text=sparse_text,
        spells_out=spells_out,
        shape=shape,
        editions=editions,
        subjects=subjects_of(query),
    )

"""Our tokenizer for the sparse (keyword) side of the vector index.

Regulatory text is full of codes that a general-purpose tokenizer breaks apart: procedure ids
(``SO_OP_3705``), clause numbers (``3.1.5``, ``4.10.0``), market notices (``IN008-24``), DUIDs
(``BW01``) and NEMDE variable names (``UIGFSurplus``). A search for one of them must find the
chunk that contains it, so this module keeps them whole. The same terms feed both backends:
SQLite's FTS5 (``fts_document`` / ``fts_query``; FTS5 matches, the points are ranked by the
score Qdrant would give them, ``kb_shared.stores.vectors_sparse``) and Qdrant's sparse vectors
(``sparse_vector``, IDF applied by Qdrant's ``Modifier.IDF``), so a code is one term and ranks
the same whichever store is live.

The rules of ``tokenize``, in order:

1. Unicode NFKC, then ``casefold``, then NFKC again (case-folding can leave non-NFKC
   sequences). NFKC also maps the Arabic presentation forms that PDF text extraction emits
   (U+FB50-U+FEFF) and full-width digits/letters to their plain forms.
2. Markup that is not text is removed: HTML comments such as the ``<!-- page 3 -->`` page
   markers, bare HTML tags without attributes (``<br>``, ``</b>``, which pymupdf4llm puts in
   table cells), and Markdown backslash escapes (``SO\\_OP\\_3705`` -> ``SO_OP_3705``).
3. The hyphen look-alikes U+2010-U+2013 (hyphen, non-breaking hyphen, figure dash, en dash)
   become ``-`` so ``IN008‑24`` from a PDF equals ``IN008-24`` typed by a person. The em dash
   (U+2014) stays a separator: it joins clauses, not codes. The Arabic tatweel (U+0640, a
   stretching stroke with no meaning) is dropped, and so is the soft hyphen (U+00AD, a
   possible line break inside a word), so ``cli\u00admate`` is ``climate``. A hyphenated
   compound (``well-known``) is a compound under rule 5, so a query for it or for either part
   finds it; the converter decides at a line-end break whether a hyphen is part of the word
   (``providers.hyphenation.resolve_break``).
4. Word characters are the Unicode categories L* (letters), M* (marks, so Arabic harakat and
   Indic vowel signs stay inside their word) and N* (digits). ``-``, ``_``, ``.`` and ``/``
   are *joiners*: between two word characters they keep the token whole (``3.1.5``,
   ``so_op_3705``, ``in008-24``, ``a/b``). Everything else — spaces, other punctuation,
   Markdown syntax (``|``, ``*``, ``#``, backticks, brackets), and joiners that are not
   between word characters (``3.1.5.`` -> ``3.1.5``, ``-5`` -> ``5``, ``a--b`` -> ``a``,
   ``b``) — separates tokens. A comma is a separator too (``1,160`` -> ``1``, ``160``).
5. A token containing joiners is a *compound*. It is emitted whole, followed by its *parts*
   (the runs of word characters between joiners) in order, so a query for a partial code
   still matches: ``so_op_3705`` -> ``so_op_3705``, ``so``, ``op``, ``3705``. Neither a
   compound nor its parts are ever dropped as stopwords: a part is a piece of a code
   (``terms-of-use`` -> ``terms-of-use``, ``terms``, ``of``, ``use``).
6. A plain token is dropped when it is in ``STOPWORDS``. Stopwords are alphabetic only, so a
   number or anything containing a digit is never dropped.

No stemming or suffix stripping is done: the output is deterministic and easy to predict
(``obligations`` and ``obligation`` are different terms).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter

#: Our own small English stopword list: function words that carry no topic (articles,
#: auxiliaries, pronouns, the commonest prepositions and question words), plus the ``s``/``t``
#: left over from ``AEMO's``/``don't``. Deliberately *not* included: modal verbs that carry
#: obligations in regulation (``shall``, ``must``, ``may``, ``should``), negations (``not``,
#: ``no``) and ``all``/``any``. Known cost: the acronyms ``IT`` and ``US`` fold to stopwords.
STOPWORDS: frozenset[str] = frozenset(
    """
    a an and are as at be been being but by can could did do does for from had has have how
    i if in into is it its me my of on or our s t than that the their them then there
    these they this those to was we were what when where which who whom why will with would
    you your
    """.split()
)

#: BM25 term-frequency saturation constants (Robertson & Zaragoza 2009, "The Probabilistic
#: Relevance Framework: BM25 and Beyond", Foundations and Trends in IR 3(4), section 3; they
#: report k1 in [1.2, 2.0] and b = 0.75 as reasonable defaults).
BM25_K1 = 1.2
BM25_B = 0.75

#: The fixed average document length (in tokens) used for BM25 length normalisation of
#: sparse vectors. A chunk is ~300 words (``chunking.chunk_markdown(budget_words=300)``);
#: after stopwords and with compound parts added that is ~200-300 tokens. A fixed value keeps
#: a point's sparse vector independent of the rest of the corpus (Qdrant has no corpus-wide
#: length statistic). Both backends rank with it (``kb_shared.stores.vectors_sparse``).
AVERAGE_DOCUMENT_TOKENS = 256

#: Sparse vector indices are 31-bit so they fit Qdrant's u32 indices and any signed int32.
TERM_INDEX_BITS = 31

#: A word of a query as a person typed it, before tokenising: split on spaces and on the
#: punctuation that never occurs inside a code (the identifier rule of
#: ``kb_shared.search.query.identifier_terms`` and the short forms of
#: ``kb_shared.search.acronyms`` read these).
RAW_WORD = re.compile(r"[^\s,;:!?()\[\]{}\"'“”‘’]+")

_JOINERS = frozenset("-_./")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*\s*/?>")
_MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")
_HYPHEN_LIKE = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-"})
_DROPPED = str.maketrans("", "", "\u0640\u00ad")  # Arabic tatweel, soft hyphen
# After cleaning, the text holds only word characters, joiners and spaces (see _clean), so a
# token is a run of non-space non-joiner characters, optionally chained by single joiners.
_TOKEN = re.compile(r"[^\s\-_./]+(?:[\-_./][^\s\-_./]+)*")
_PARTS = re.compile(r"[^\-_./]+")


class _SeparatorMap(dict[int, int]):
    """``str.translate`` table: a code point maps to itself when it is a word character
    (Unicode category L*, M*, N*) or a joiner, else to a space. Filled lazily and cached, so
    each distinct character's category is looked up once per process."""

    def __missing__(self, code: int) -> int:
        char = chr(code)
        keep = char in _JOINERS or unicodedata.category(char)[0] in "LMN"
        value = code if keep else 0x20
        self[code] = value
        return value


_SEPARATORS = _SeparatorMap()


def _clean(text: str) -> str:
    """Normalise ``text`` and replace every character that is neither a word character nor a
    joiner with a space (rules 1-4 of the module docstring)."""
    text = unicodedata.normalize("NFKC", text)
    text = unicodedata.normalize("NFKC", text.casefold())
    text = _HTML_COMMENT.sub(" ", text)
    text = _HTML_TAG.sub(" ", text)
    text = _MARKDOWN_ESCAPE.sub(r"\1", text)
    text = text.translate(_HYPHEN_LIKE).translate(_DROPPED)
    return text.translate(_SEPARATORS)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into sparse-index terms, in text order (rules in the module docstring).

    Args:
        text: any Unicode text, e.g. a chunk's Markdown or a user's query.

    Returns:
        The terms, lower-case (case-folded) and NFKC-normalised, repeats kept (term frequency
        matters). Examples: ``"(IN008-24)"`` -> ``["in008-24", "in008", "24"]``;
        ``"clause 4.10.0"`` -> ``["clause", "4.10.0", "4", "10", "0"]``; ``""`` -> ``[]``.
    """
    if not text:
        return []
    terms: list[str] = []
    append, extend, split_parts = terms.append, terms.extend, _PARTS.findall
    for token in _TOKEN.findall(_clean(text)):
        if token in STOPWORDS:  # stopwords are alphabetic, so never a compound
            continue
        append(token)
        if not token.isalnum():  # letters/digits only (most tokens) cannot hold a joiner
            parts = split_parts(token)
            if len(parts) > 1:
                extend(parts)
    return terms


def term_index(term: str) -> int:
    """A stable non-negative ``TERM_INDEX_BITS``-bit integer for ``term``.

    The first 4 bytes of BLAKE2b(term, UTF-8) read big-endian with the top bit cleared, so the
    value is the same in every process and Python version (unlike ``hash()``, which is salted
    per process). Used as the Qdrant sparse vector index of the term.
    """
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & ((1 << TERM_INDEX_BITS) - 1)


def bm25_term_weight(frequency: int, length: int) -> float:
    """The BM25 term-frequency component for one term of one text.

    ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` with ``k1 = BM25_K1``,
    ``b = BM25_B`` and ``avgdl = AVERAGE_DOCUMENT_TOKENS`` (the BM25 saturation function of
    Robertson & Zaragoza 2009, section 3, without the IDF factor, which Qdrant's
    ``Modifier.IDF`` applies at query time).

    Args:
        frequency: occurrences of the term in the text (``tf``), >= 1.
        length: number of terms in the text (``dl``), >= ``frequency``.

    Returns:
        A weight in ``(0, k1 + 1)``.
    """
    norm = 1.0 - BM25_B + BM25_B * (length / AVERAGE_DOCUMENT_TOKENS)
    return frequency * (BM25_K1 + 1.0) / (frequency + BM25_K1 * norm)


def sparse_vector(text: str) -> tuple[list[int], list[float]]:
    """The sparse vector of ``text``: ``term_index`` of each term -> its BM25 tf weight.

    Terms whose ``term_index`` collide have their weights summed into one entry (a collision
    merges two rare terms; with 2**31 buckets it is unlikely within one text).

    Returns:
        ``(indices, values)`` sorted by index ascending, same length, no duplicate index;
        ``([], [])`` when ``text`` has no terms.
    """
    terms = tokenize(text)
    if not terms:
        return [], []
    length = len(terms)
    weights: dict[int, float] = {}
    for term, frequency in Counter(terms).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + bm25_term_weight(frequency, length)
    indices = sorted(weights)
    return indices, [weights[i] for i in indices]


def fts_document(text: str) -> str:
    """The terms of ``text`` joined by single spaces: the content of the FTS5 column.

    The FTS5 table tokenises this with ``unicode61`` configured so each of our terms stays one
    FTS5 token (see ``kb_shared.stores.vectors_sqlite``).
    """
    return " ".join(tokenize(text))


def fts_query(text: str) -> str | None:
    """An FTS5 ``MATCH`` expression for ``text``: its distinct terms, each as an FTS5 string.

    Each term is wrapped in double quotes with any ``"`` doubled (FTS5 string syntax,
    https://www.sqlite.org/fts5.html section 3.1), and the strings are joined with ``OR``, so
    FTS5 operators in user text (``NEAR(``, ``OR``, ``*``, ``-``, ``:``, ``^``, parentheses)
    are matched as words, never parsed. Terms keep their first-seen order.

    Returns:
        e.g. ``'"in008-24" OR "in008" OR "24"'``; ``None`` when ``text`` has no terms (the
        caller must then return no hits rather than run a query).
    """
    terms = list(dict.fromkeys(tokenize(text)))
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)

"""The scale benchmark's synthetic corpus (``benchmarks.scale``): deterministic chunk points
and queries, and the query protocol both of its measurements share (top ``LIMIT``, after
``WARMUP`` untimed queries).

The synthetic chunks look like the pipeline's: ``{doc_id}-{i}`` ids, 40 chunks per
document, one in ten a pipe table, 120-300 words drawn from a Zipf distribution (word
frequency proportional to 1/rank, Zipf 1949) over a vocabulary that starts with English
function words and regulatory terms and continues with generated rare words, plus codes
such as ``IN008-24`` and clause numbers such as ``3.2.1``; a citation payload built with
``kb_shared.search.citations.citation_payload`` and a SHA-256 fingerprint like the embeddings
asset stores. Dense vectors are unit vectors, each document scattered around one of 64
random topic centroids (cosine to its centroid about 0.6) so nearest neighbours are not
uniform noise. Everything is generated in batches from a fixed seed, so memory stays
bounded and runs repeat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Untimed queries of each kind before the timed ones (first-touch page cache, lazy setup).
WARMUP = 3
#: Results per query (top k).
LIMIT = 10
CHUNKS_PER_DOCUMENT = 40
TABLE_EVERY = 10
TOPICS = 64
VOCABULARY_SIZE = 30_000
#: Zipf exponent: frequency proportional to rank^-s with s = 1 (Zipf 1949; Piantadosi
#: 2014, "Zipf's word frequency law in natural language", finds s close to 1 for English).
ZIPF_S = 1.0
SEED = 20261130

FUNCTION_WORDS = (
    "the of and to a in must be or by for is that with under this as an on any not if at "
    "from which are its such each may where within than after before other all has will "
    "shall been it their these those when no one more"
).split()

REGULATORY_WORDS = (
    "participant retailer distributor customer market operator aemo aer registered "
    "generator scheduled dispatch interval bid offer price constraint equation violation "
    "penalty factor loss marginal transmission network connection point meter metering "
    "data provider notification notify obligation compliance procedure clause rule "
    "schedule version effective date amendment consultation determination guideline "
    "energy electricity gas load demand supply frequency control ancillary service fcas "
    "raise lower regulation contingency reserve capacity settlement billing payment "
    "invoice credit support prudential requirement threshold limit value period trading "
    "region interconnector flow forecast pre-dispatch predispatch nemde solver "
    "intervention direction emergency outage plan planned unplanned maintenance "
    "standing data nmi life support disconnection reconnection hardship concession "
    "tariff retail contract explicit informed consent business days calendar month "
    "quarter annual report publish record retain information confidential disclosure "
    "dispute resolution ombudsman breach civil penalty enforcement audit review "
    "assessment approval application exemption register registration category "
    "semi-scheduled non-scheduled bidirectional storage battery solar wind rooftop "
    "inverter voltage reactive power system strength inertia stability security "
    "reliability standard minimum maximum fast start inflexibility profile mode "
    "trapezium ramp rate availability capability technical envelope contract "
    "settlement residue auction unit loss factor mlf dlf volume weighted average "
    "methodology calculation formula coefficient parameter input output model "
    "simulation study scenario base case sensitivity table figure appendix section "
    "part chapter definition means includes relevant applicable responsible party "
    "person entity agent representative officer nominated authorised"
).split()

_SYLLABLES = (
    "ab ac ad al am an ar as at ba be bi bo ca ce ci co cu da de di do du fa fe fi fo ga "
    "ge gi go la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru "
    "sa se si so su ta te ti to tu va ve vi vo"
).split()


def vocabulary(size: int = VOCABULARY_SIZE) -> list[str]:
    """Words by frequency rank: function words, regulatory terms, then generated rare words
    (two to four syllables, deterministic, all distinct)."""
    words = list(dict.fromkeys(FUNCTION_WORDS + REGULATORY_WORDS))
    seen = set(words)
    n = 0
    base = len(_SYLLABLES)
    while len(words) < size:
        parts, value = [], n + base * base  # start at two syllables
        while value:
            value, digit = divmod(value, base)
            parts.append(_SYLLABLES[digit])
        word = "".join(parts) + ("tion" if n % 7 == 0 else "")
        n += 1
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


@dataclass(frozen=True)
class Query:
    """One synthetic query: a dense vector near a topic and a few words (maybe a code)."""

    vector: Any
    text: str


def search(index: Any, kind: str, query: Query) -> list[Any]:
    """The top ``LIMIT`` hits of ``query`` on a ``VectorIndex`` by ``kind`` of search.

    Raises:
        ValueError: ``kind`` is not "dense", "sparse" or "hybrid".
    """
    if kind == "dense":
        return index.dense_search(query.vector, LIMIT)
    if kind == "sparse":
        return index.sparse_search(query.text, LIMIT)
    if kind == "hybrid":
        return index.hybrid_search(query.vector, query.text, LIMIT)
    raise ValueError(f"unknown kind of search {kind!r}; expected dense, sparse or hybrid")


class SyntheticCorpus:
    """Deterministic generator of ``Point`` batches and queries (see the module docstring).

    Args:
        dimension: vector length.
        seed: the run's seed; batch ``start`` derives its own generator from it, so any
            batch can be produced again alone.
    """

    def __init__(self, dimension: int, seed: int = SEED) -> None:
        import numpy as np  # noqa: PLC0415

        self.dimension = dimension
        self.seed = seed
        rng = np.random.default_rng(seed)
        centroids = rng.standard_normal((TOPICS, dimension)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.words = vocabulary()
        weights = 1.0 / np.arange(1, len(self.words) + 1) ** ZIPF_S
        self.cdf = np.cumsum(weights / weights.sum())
        self.codes = [f"IN{n:03d}-{yy:02d}" for yy in range(18, 27) for n in range(1, 1000)]
        # Noise per dimension such that the noise vector's norm is 1.3 x the centroid's:
        # cosine to the centroid ~ 1 / sqrt(1 + 1.3^2) ~ 0.61.
        self.noise = 1.3 / math.sqrt(dimension)

    def _words(self, rng: Any, count: int) -> list[str]:
        import numpy as np  # noqa: PLC0415

        ranks = np.searchsorted(self.cdf, rng.random(count), side="right")
        ranks = np.minimum(ranks, len(self.words) - 1)
        return [self.words[i] for i in ranks]

    def _clause(self, rng: Any) -> str:
        a, b, c = rng.integers(1, 12), rng.integers(1, 20), rng.integers(1, 30)
        return f"{a}.{b}.{c}"

    def batch(self, start: int, count: int) -> list[Any]:
        """Points ``start`` .. ``start + count - 1`` (``kb_shared.stores.vectors.Point``)."""
        import numpy as np  # noqa: PLC0415

        from kb_shared.search import citations  # noqa: PLC0415
        from kb_shared.identity import chunk_id  # noqa: PLC0415
        from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Point  # noqa: PLC0415

        rng = np.random.default_rng([self.seed, start])
        lengths = rng.integers(120, 301, size=count)
        words = self._words(rng, int(lengths.sum()))
        numbers = np.arange(start, start + count)
        topics = (numbers // CHUNKS_PER_DOCUMENT * 2654435761) % TOPICS  # Knuth's hash
        vectors = self.centroids[topics] + rng.standard_normal(
            (count, self.dimension), dtype=np.float32
        ) * np.float32(self.noise)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        points = []
        offset = 0
        for row, (number, length) in enumerate(zip(numbers.tolist(), lengths.tolist(),
                                                   strict=True)):
            chunk_words = words[offset : offset + length]
            offset += length
            for _ in range(rng.poisson(0.6)):
                chunk_words.insert(int(rng.integers(0, len(chunk_words))),
                                   self.codes[int(rng.integers(0, len(self.codes)))])
            for _ in range(rng.poisson(1.0)):
                chunk_words.insert(int(rng.integers(0, len(chunk_words))), self._clause(rng))
            doc_number, index = divmod(number, CHUNKS_PER_DOCUMENT)
            doc_id = f"synthetic-{doc_number:06d}.pdf"
            table = index % TABLE_EVERY == TABLE_EVERY - 1
            if table:
                cells = [" ".join(chunk_words[i : i + 6]) for i in range(0, len(chunk_words), 6)]
                text = "| code | requirement |\n| --- | --- |\n" + "\n".join(
                    f"| {self.codes[(number + i) % len(self.codes)]} | {cell} |"
                    for i, cell in enumerate(cells)
                )
            else:
                text = " ".join(chunk_words)
            section = f"{1 + index // 8} {self.words[40 + (number % 200)].title()}"
            heading = (f"Synthetic Procedure {doc_number}", section)
            page = 1 + index * 10 // 24
            payload = citations.citation_payload(
                doc_id=doc_id,
                name=doc_id,
                title=heading[0],
                version="1.0",
                page_start=page,
                page_end=page + int(rng.integers(0, 2)),
                heading_path=heading,
                chunk_index=index,
                pdf_key=f"pdfs/{doc_id}",
                markdown_key=f"markdown/{doc_id}.md",
                extra={citations.FINGERPRINT: f"{number:064x}"},
            )
            points.append(
                Point(
                    id=chunk_id(doc_id, index),
                    document=doc_id,
                    kind=KIND_TABLE if table else KIND_TEXT,
                    text=text,
                    dense=vectors[row],
                    payload=payload,
                    sparse_text=" › ".join(heading) + "\n\n" + text,
                )
            )
        return points

    def queries(self, count: int) -> list[Query]:
        """``count`` queries: a vector near a random topic, 2-6 mid-frequency words and, for
        half of them, a code (what a person types into a search box)."""
        import numpy as np  # noqa: PLC0415

        rng = np.random.default_rng([self.seed, 1 << 40])
        out = []
        for _ in range(count):
            vector = self.centroids[int(rng.integers(0, TOPICS))] + rng.standard_normal(
                self.dimension, dtype=np.float32
            ) * np.float32(self.noise)
            ranks = rng.integers(40, 5000, size=int(rng.integers(2, 7)))
            words = [self.words[int(i)] for i in ranks]
            if rng.random() < 0.5:
                words.append(self.codes[int(rng.integers(0, len(self.codes)))])
            out.append(Query(vector=vector / np.linalg.norm(vector), text=" ".join(words)))
        return out

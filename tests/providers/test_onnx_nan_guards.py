"""The softmax NaN guards ``onnx_rewrite.drop_nan_guards`` removes: on small attention-like
graphs built here with ``onnx.helper`` (what is removed, what is left alone, the outputs bit for
bit the same) and on the shipped MiniLM file (six guards, the same document vectors).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kb_shared.errors import EmbeddingError
from kb_shared.models import MINILM_INT8
from kb_shared.providers.local_embeddings import MiniLmEmbedder, verify_weight_files
from kb_shared.providers.onnx_rewrite import document_model, drop_nan_guards, int8_compute_model

FLOAT, BOOL = TensorProto.FLOAT, TensorProto.BOOL
MODEL_FILE = MINILM_INT8.weight_files[0][0]


def attention(zero: float = 0.0, *, export_guard: bool = False,
              nan_read_elsewhere: bool = False, zero_shape: tuple[int, ...] = ()) -> onnx.ModelProto:
    """``Y = Where(IsNaN(P), zero, P) @ V`` with ``P = Softmax(S)``: one guarded attention."""
    nodes = [
        helper.make_node("Softmax", ["S"], ["P"], axis=-1),
        helper.make_node("IsNaN", ["P"], ["P_nan"]),
        helper.make_node("Where", ["P_nan", "zero", "P"], ["P_safe"]),
        helper.make_node("MatMul", ["P_safe", "V"], ["Y"]),
    ]
    outputs = [helper.make_tensor_value_info("Y", FLOAT, [None, 3, 2])]
    if export_guard:
        outputs.append(helper.make_tensor_value_info("P_safe", FLOAT, [None, 3, 3]))
    if nan_read_elsewhere:
        outputs.append(helper.make_tensor_value_info("P_nan", BOOL, [None, 3, 3]))
    graph = helper.make_graph(
        nodes,
        "guarded",
        [helper.make_tensor_value_info("S", FLOAT, [None, 3, 3]),
         helper.make_tensor_value_info("V", FLOAT, [None, 3, 2])],
        outputs,
        [numpy_helper.from_array(np.full(zero_shape, zero, dtype=np.float32), "zero")],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    built.ir_version = 10
    return built


def run(model: onnx.ModelProto, scores: np.ndarray, values: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"S": scores, "V": values})


def inputs() -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(11)
    scores = generator.normal(size=(2, 3, 3)).astype(np.float32)
    scores[1, :, 2] = np.finfo(np.float32).min  # a masked key, as MiniLM's export masks it
    return scores, generator.normal(size=(2, 3, 2)).astype(np.float32)


def test_a_guard_after_a_softmax_is_removed_and_the_output_is_the_same() -> None:
    original = attention()
    rewritten = attention()
    assert drop_nan_guards(rewritten.graph) == 1
    assert [node.op_type for node in rewritten.graph.node] == ["Softmax", "MatMul"]
    assert list(rewritten.graph.node[1].input) == ["P", "V"]
    scores, values = inputs()
    (expected,), (result,) = run(original, scores, values), run(rewritten, scores, values)
    assert np.array_equal(result, expected)


def test_the_guard_it_removes_only_ever_replaced_a_nan() -> None:
    # A row of -inf scores is the one case the guard changes: there the rewritten graph gives
    # NaN (which LocalEmbedder refuses), never another finite number.
    scores, values = inputs()
    scores[0, 1, :] = -np.inf
    rewritten = attention()
    drop_nan_guards(rewritten.graph)
    (guarded,), (unguarded,) = run(attention(), scores, values), run(rewritten, scores, values)
    assert np.array_equal(guarded[0, 1], [0.0, 0.0])
    assert np.isnan(unguarded[0, 1]).all()
    finite = ~np.isnan(unguarded)
    assert finite.sum() == 2 * 3 * 2 - 2
    assert np.array_equal(unguarded[finite], guarded[finite])


@pytest.mark.parametrize(
    ("built", "kept"),
    [
        (attention(zero=1.0), ["Softmax", "IsNaN", "Where", "MatMul"]),  # not a zero
        (attention(export_guard=True), ["Softmax", "IsNaN", "Where", "MatMul"]),
        (attention(nan_read_elsewhere=True), ["Softmax", "IsNaN", "MatMul"]),
        (attention(zero_shape=(1, 1, 1, 1)), ["Softmax", "IsNaN", "Where", "MatMul"]),
        (attention(zero_shape=(3,)), ["Softmax", "IsNaN", "Where", "MatMul"]),
    ],
    ids=["non-zero-fill", "guard-is-a-graph-output", "isnan-read-elsewhere",
         "fill-of-higher-rank", "fill-of-three-values"],
)
def test_guards_that_are_not_the_pattern_are_left_alone(
    built: onnx.ModelProto, kept: list[str]
) -> None:
    scores, values = inputs()
    expected = run(built, scores, values)
    drop_nan_guards(built.graph)
    assert [node.op_type for node in built.graph.node] == kept
    for result, before in zip(run(built, scores, values), expected, strict=True):
        assert np.array_equal(result, before)


def test_a_where_on_a_nan_check_of_something_other_than_a_softmax_is_kept() -> None:
    built = attention()
    built.graph.node[0].op_type = "Relu"  # IsNaN(Relu(S)): not an attention softmax
    del built.graph.node[0].attribute[:]
    assert drop_nan_guards(built.graph) == 0
    assert [node.op_type for node in built.graph.node] == ["Relu", "IsNaN", "Where", "MatMul"]


def test_a_file_that_is_not_a_model_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "not-a-model.onnx"
    path.write_bytes(b"\x08\x07garbage")
    with pytest.raises(EmbeddingError, match=f"{path} is not an ONNX model"):
        document_model(path)


def test_the_shipped_minilm_loses_its_six_guards_in_both_rewrites() -> None:
    path = verify_weight_files(MINILM_INT8)[MODEL_FILE]
    shipped = Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    assert (shipped["Softmax"], shipped["IsNaN"]) == (6, 6)
    for rewritten in (document_model(path), int8_compute_model(path)):
        counts = Counter(node.op_type for node in onnx.load_from_string(rewritten).graph.node)
        assert (counts["Softmax"], counts["IsNaN"]) == (6, 0)
        assert counts["Where"] == shipped["Where"] - 6


def test_document_vectors_are_the_shipped_files_bit_for_bit() -> None:
    texts = [
        "Who must notify AEMO when a unit's availability changes?",
        "3.1.2 Access Control — limit system access to authorised users (NIST SP 800-171r2).",
        "| Region | MLF | DLF |\n| NSW1 | 0.9876 | 1.0021 |",
        "CVP",
        "",
        "Multifactor authentication is required for network access to privileged accounts " * 40,
    ]
    embedder = MiniLmEmbedder(threads=1, batch_size=3)
    path = verify_weight_files(MINILM_INT8)[MODEL_FILE]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    shipped = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    vectors = embedder.embed_documents(texts)
    embedder._sessions[False] = shipped  # the same embedder, on the file as shipped
    assert np.array_equal(vectors, embedder.embed_documents(texts))

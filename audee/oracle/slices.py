"""Rounding no input perturbation shows: a normalization over slices of one element.

A layer that normalizes each slice of its input (``LayerNormalization`` over ``axis``;
``GroupNormalization`` over each group of channels with every other non-batch axis, which
holds one element where a group has one channel and the other axes length 1) gives
exactly beta where a slice holds one element: the element minus its own mean is 0, whatever
its value.  Keras computes a normalization as ``x * inv + (beta - mean * inv)`` with
``inv = gamma / sqrt(var + epsilon)`` (``keras/src/ops/nn.py`` ``_layer_normalization``):
there two terms of ``|x| * |inv|`` cancel, and their rounding, up to an ulp of
``|x| / sqrt(epsilon)``, is the whole output error (JAX, TensorFlow eager, onnxruntime), where
TensorFlow's rewritten graph and torch's ``F.layer_norm`` subtract the mean first and give beta
exactly.  On a slice of more than one element that rounding is the input's own conditioning
(the mean is itself rounded at ``|x|``'s scale) and the conditioning probe
(:func:`audee.oracle.deviation.perturbed`) measures it; on one element the probe moves the
element and its mean alike and the error, beta rounded to the grid of the terms, does not
move.  So the bound is computed here, from the formula: a difference within it is the
formula's rounding on a degenerate slice, not evidence against a backend (the api-cpu
campaign, rngs 2881 and 2896: epsilon 1e-12 on a one-element axis, or an input at 1e4; rng
3011: a GroupNormalization of one channel per group on a length-1 axis, epsilon 1e-12).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from audee.apis.config import ApiConfig, load_api_configs, named_axes
from audee.oracle.deviation import FULL, bound_score

#: wrappers that run their inner layer (parameter ``layer``) on slices of their input: how to
#: get one such slice (TimeDistributed: one time step, the axis after the batch dropped)
INNER_INPUT: dict[str, Callable[[np.ndarray], np.ndarray]] = {"TimeDistributed": lambda x: x[:, 0]}

#: rounding steps of the formula whose terms reach ``|x| * |inv|``: x * inv, mean * inv,
#: beta - mean * inv and the final sum, each half an ulp of its result at most
FORMULA_ROUNDINGS = 4
UNIT_ROUNDOFF_32, UNIT_ROUNDOFF_64 = 2.0 ** -24, 2.0 ** -53


def _axes(value: Any, ndim: int) -> list[int] | None:
    """The axes an ``axis`` parameter names (:func:`audee.apis.config.named_axes`), made
    non-negative for an input of ``ndim`` axes (None: not axes, or one it has not)."""
    axes = named_axes(value)
    if axes is None or any(not -ndim <= a < ndim for a in axes):
        return None
    return [a % ndim for a in axes]


def _inner(api: str, params: Mapping[str, Any], x: np.ndarray) -> tuple[str, Mapping[str, Any], np.ndarray]:
    """The layer that computes on ``x``: a slicing wrapper's inner layer on one slice, else the layer."""
    inner = params.get("layer")
    if api in INNER_INPUT and isinstance(inner, Mapping) and isinstance(inner.get("api"), str) and x.ndim >= 2:
        return inner["api"], inner.get("params") or {}, INNER_INPUT[api](x)
    return api, params, x


def _slice_size(cfg: ApiConfig, params: Mapping[str, Any], axes: list[int], shape: tuple[int, ...]) -> int | None:
    """How many elements each slice the layer normalizes holds: the ``normalizes`` axes'
    lengths, or with ``groups`` (GroupNormalization) one group's share of that axis times
    every other non-batch axis (None: groups that do not divide the axis, refused anyway)."""
    if not cfg.groups:
        return int(np.prod([shape[a] for a in axes]))
    groups, channels = params.get(cfg.groups), shape[axes[0]]
    if len(axes) != 1 or not isinstance(groups, int) or isinstance(groups, bool):
        return None
    groups = channels if groups == -1 else groups
    if groups <= 0 or channels % groups:
        return None
    return channels // groups * int(np.prod([n for a, n in enumerate(shape) if a not in (0, axes[0])]))


def one_element_rounding(api: str, params: Mapping[str, Any], x: np.ndarray, weights: Sequence[np.ndarray],
                         configs: Mapping[str, ApiConfig]) -> float:
    """The largest error of Keras' normalization formula (module doc) on ``x``, the layer's
    input, where every slice the layer normalizes over holds one element; 0 where any holds
    more, where the layer normalizes nothing (its config says no ``normalizes``) or where it
    scales by the root mean square (``rms_scaling``: no mean subtracted).  ``weights``: the
    layer's arrays as Keras builds them, gamma first where ``scale`` (its default)."""
    x = np.asarray(x)
    api, params, x = _inner(api, params, x)
    cfg = configs.get(api)
    if cfg is None or not cfg.normalizes or params.get("rms_scaling"):
        return 0.0
    axes = _axes(params.get(cfg.normalizes, -1), x.ndim)
    if not axes or 0 in axes or _slice_size(cfg, params, axes, x.shape) != 1:
        return 0.0
    try:
        xs = x.astype(np.float64)
    except (TypeError, ValueError):  # not a float input
        return 0.0
    xs = xs[np.isfinite(xs)]
    if xs.size == 0:
        return 0.0
    gamma = np.asarray(weights[0], np.float64) if params.get("scale", True) and len(weights) else np.ones(1)
    gamma = gamma[np.isfinite(gamma)]
    epsilon = float(params.get("epsilon", 1e-3))
    if epsilon <= 0 or gamma.size == 0:
        return 0.0
    unit = UNIT_ROUNDOFF_64 if x.dtype == np.float64 else UNIT_ROUNDOFF_32  # Keras computes in float32 at least
    return FORMULA_ROUNDINGS * unit * float(np.abs(xs).max()) * float(np.abs(gamma).max()) / np.sqrt(epsilon)


def one_element_score(layer: Any, feed: Mapping[str, np.ndarray], weights: Sequence[np.ndarray],
                      a: np.ndarray, b: np.ndarray, tol: Any = None, compute: str = FULL, sides: int = 2) -> float:
    """:func:`one_element_rounding` of ``layer`` (a spec layer: api, params, inputs) fed
    ``feed`` (its first input is the data normalized; a mask is not), as the deviation score
    of two outputs ``a`` and ``b`` of it that far apart (:func:`bound_score`): ``sides`` 2
    where each of two backends rounds its own way, 1 against an exact reference.  0 for a
    layer of none of the kind."""
    x = feed.get(layer.inputs[0]) if layer.inputs else None
    if x is None:
        return 0.0
    bound = one_element_rounding(layer.api, layer.params, x, weights, load_api_configs())
    return bound_score(np.asarray(a), np.asarray(b), sides * bound, tol, compute) if bound else 0.0

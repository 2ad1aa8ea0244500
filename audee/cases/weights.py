"""Deterministic weights from (role, shape) lists: the same on every backend and machine.

Roles come from the built Keras variables ('kernel', 'gamma', 'moving_variance', ...).
Values are chosen so that every parameter matters: BatchNorm statistics and biases are
not the identity / zero they would be at Keras' initialisation.

Dtypes: a (role, shape) entry may carry a third element, the variable's dtype
('float16' for a layer with ``dtype="float16"``, 'float32' under ``mixed_float16``).
Values are always drawn as float32 and then rounded (to nearest even) to that dtype, so
a float16 model's weights are exactly what every backend makes of the float32 ones, and
adding the dtype to a shape list changes no float32 weight.
"""
from __future__ import annotations

import zlib
from typing import Any, Iterable, Sequence

import numpy as np

from audee.cases.spec import Weights

#: layer -> [(role, shape)] or [(role, shape, dtype)] per variable, in get_weights() order
Shapes = dict[str, list[tuple[Any, ...]]]


def numpy_dtype(name: str | np.dtype) -> np.dtype:
    """A dtype name as numpy knows it; ``bfloat16`` is ml_dtypes' (numpy has none, and
    every framework audee runs hands its bfloat16 arrays out as ml_dtypes arrays)."""
    if str(name) == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def as_dtype(array: Any, dtype: str | np.dtype | None) -> np.ndarray:
    """``array`` in ``dtype`` (unchanged when None or already so): round to nearest even."""
    a = np.asarray(array)
    return a if dtype is None else a.astype(numpy_dtype(dtype), copy=False)


def _entry(item: Sequence[Any]) -> tuple[str, tuple[int, ...], str | None]:
    role, shape = item[0], tuple(int(d) for d in item[1])
    return str(role), shape, (str(item[2]) if len(item) > 2 and item[2] is not None else None)


def _fan_in(role: str, shape: tuple[int, ...]) -> int:
    """At least 1: a weight with a zero-sized axis (a layer built with ``units=0``) is empty,
    whatever its scale, and must not stop the run."""
    if len(shape) < 2:
        return max(shape[0] if shape else 1, 1)
    if role == "depthwise_kernel":
        return max(int(np.prod(shape[:-2])), 1)
    return max(int(np.prod(shape[:-1])), 1)


def init_array(role: str, shape: tuple[int, ...], rng: np.random.Generator,
               dtype: str | np.dtype | None = None) -> np.ndarray:
    """One variable's values for its role, drawn as float32, in ``dtype`` (default float32)."""
    if role in ("kernel", "depthwise_kernel", "pointwise_kernel"):
        a = rng.normal(0.0, np.sqrt(2.0 / _fan_in(role, shape)), shape)
    elif role == "recurrent_kernel":
        a = rng.normal(0.0, np.sqrt(1.0 / _fan_in(role, shape)), shape)
    elif role == "bias":
        a = rng.normal(0.0, 0.05, shape)
    elif role == "gamma":
        a = rng.uniform(0.8, 1.2, shape)
    elif role in ("beta", "moving_mean"):
        a = rng.normal(0.0, 0.1, shape)
    elif role == "moving_variance":
        a = rng.uniform(0.5, 1.5, shape)
    elif role == "embeddings":
        a = rng.normal(0.0, 0.5, shape)
    elif role == "alpha":
        a = rng.uniform(0.0, 0.3, shape)
    else:
        a = rng.normal(0.0, 0.05, shape)
    return as_dtype(a.astype(np.float32), dtype)


def init_weights(shapes: Shapes, seed: int, layers: Iterable[str] | None = None) -> Weights:
    """Weights for every layer in ``shapes`` (or only ``layers``); each layer draws from
    its own stream keyed by (seed, layer name), so adding a layer changes no other's."""
    out: Weights = {}
    for name, roles in shapes.items():
        if layers is not None and name not in layers:
            continue
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        out[name] = [init_array(role, shape, rng, dtype) for role, shape, dtype in map(_entry, roles)]
    return out


def adapt_weights(base: Weights, shapes: Shapes, seed: int) -> Weights:
    """Keep ``base`` wherever an array's position and shape still fit; initialise the rest.

    Used for network-level variants: a redrawn parameter that changes a layer's weights
    gets fresh ones there, while every other layer keeps the seed's (trained) weights.
    Arrays are matched by position only when the layer still has as many arrays: weights
    carry no role names, and when a BatchNormalization drops gamma (scale=False) the
    others shift, so reusing by position would turn a moving mean into a variance.  With
    the count unchanged the roles line up (a new kernel size keeps the bias).  A kept
    array is rounded to the variable's dtype where the entry names one (a float32 seed
    weight in a layer a variant made float16).
    """
    out: Weights = {}
    for name, roles in shapes.items():
        old = base.get(name, [])
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        arrays = []
        for k, (role, shape, dtype) in enumerate(map(_entry, roles)):
            fresh = init_array(role, shape, rng, dtype)  # drawn always: streams stay aligned
            keep = len(old) == len(roles) and tuple(old[k].shape) == shape
            arrays.append(as_dtype(old[k], dtype) if keep else fresh)
        out[name] = arrays
    return out

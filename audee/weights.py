"""Deterministic weights from (role, shape) lists: the same on every backend and machine.

Roles come from the built Keras variables ('kernel', 'gamma', 'moving_variance', ...).
Values are chosen so that every parameter matters: BatchNorm statistics and biases are
not the identity / zero they would be at Keras' initialisation.
"""
from __future__ import annotations

import zlib
from typing import Iterable

import numpy as np

from audee.spec import Weights

Shapes = dict[str, list[tuple[str, tuple[int, ...]]]]


def _fan_in(role: str, shape: tuple[int, ...]) -> int:
    if len(shape) < 2:
        return max(shape[0] if shape else 1, 1)
    if role == "depthwise_kernel":
        return int(np.prod(shape[:-2]))
    return int(np.prod(shape[:-1]))


def init_array(role: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
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
    return a.astype(np.float32)


def init_weights(shapes: Shapes, seed: int, layers: Iterable[str] | None = None) -> Weights:
    """Weights for every layer in ``shapes`` (or only ``layers``); each layer draws from
    its own stream keyed by (seed, layer name), so adding a layer changes no other's."""
    out: Weights = {}
    for name, roles in shapes.items():
        if layers is not None and name not in layers:
            continue
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        out[name] = [init_array(role, tuple(shape), rng) for role, shape in roles]
    return out


def adapt_weights(base: Weights, shapes: Shapes, seed: int) -> Weights:
    """Keep ``base`` wherever an array's position and shape still fit; initialise the rest.

    Used for network-level variants: a redrawn parameter that changes a layer's weights
    gets fresh ones there, while every other layer keeps the seed's (trained) weights.
    Arrays are matched by position only when the layer still has as many arrays: weights
    carry no role names, and when a BatchNormalization drops gamma (scale=False) the
    others shift, so reusing by position would turn a moving mean into a variance.  With
    the count unchanged the roles line up (a new kernel size keeps the bias).
    """
    out: Weights = {}
    for name, roles in shapes.items():
        old = base.get(name, [])
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        arrays = []
        for k, (role, shape) in enumerate(roles):
            fresh = init_array(role, tuple(shape), rng)  # drawn always: streams stay aligned
            keep = len(old) == len(roles) and tuple(old[k].shape) == tuple(shape)
            arrays.append(old[k] if keep else fresh)
        out[name] = arrays
    return out

"""Layer distance (the paper's Definition 4): the mean absolute difference of one layer's
outputs on two backends."""
from __future__ import annotations

import numpy as np


def layer_distance(a: np.ndarray, b: np.ndarray, axis: tuple[int, ...] | None = None) -> np.ndarray | float:
    """Mean |a - b|; ``inf`` when shapes differ or only one side is not finite."""
    if a.shape != b.shape:
        return float("inf")
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    # equal values agree: the same infinity, or NaN, on both sides is no difference (the NaN
    # oracle reports non-finite outputs on its own)
    d[(a == b) | (np.isnan(a) & np.isnan(b))] = 0.0
    if axis is None:
        v = float(d.mean()) if d.size else 0.0
        return v if np.isfinite(v) else float("inf")
    return np.nan_to_num(d.mean(axis=axis), nan=np.inf, posinf=np.inf)


def per_input_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Definition 4 for each input of a batch separately (axis 0 is the batch)."""
    if a.shape != b.shape:
        return np.full(a.shape[0], np.inf)
    return layer_distance(a, b, axis=tuple(range(1, a.ndim)))


def layer_distances(layers_a: dict[str, np.ndarray], layers_b: dict[str, np.ndarray]) -> dict[str, float]:
    return {name: layer_distance(layers_a[name], layers_b[name]) for name in layers_a if name in layers_b}

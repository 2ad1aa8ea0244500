"""The one home of distances between two backends' outputs.

* :func:`layer_distance` — the paper's Definition 4: mean |a - b| of one layer's outputs
  (whole arrays, or per row with :func:`per_input_distance`);
* :func:`relative_distance` — Definition 4 per row divided by the row's mean output
  magnitude on both sides: a difference that survives scaling, so a search cannot win by
  inflating values (the relative-inconsistency fitness and localization's one-layer
  change rates).

Non-finite values: the same value on both sides (the same infinity, or NaN on both) is
no difference; a non-finite value on one side only is an infinite distance."""
from __future__ import annotations

import numpy as np

SCALE_FLOOR = 1e-12  # added to the magnitude a relative distance divides by: 0 / 0 is agreement

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
    if d.size == 0:  # an empty output: nothing differs
        return np.zeros([n for i, n in enumerate(d.shape) if i not in axis])
    return np.nan_to_num(d.mean(axis=axis), nan=np.inf, posinf=np.inf)


def per_input_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Definition 4 for each input of a batch separately (axis 0 is the batch)."""
    if a.shape != b.shape:
        return np.full(a.shape[0], np.inf)
    return layer_distance(a, b, axis=tuple(range(1, a.ndim)))


def layer_distances(layers_a: dict[str, np.ndarray], layers_b: dict[str, np.ndarray]) -> dict[str, float]:
    return {name: layer_distance(layers_a[name], layers_b[name]) for name in layers_a if name in layers_b}


def relative_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: :func:`per_input_distance` over the mean |output| of the row on both sides
    (plus :data:`SCALE_FLOOR`).  Rows that agree score 0 at any scale; an undefined ratio
    (inf / inf) scores ``inf``."""
    n = a.shape[0]
    dist = per_input_distance(a, b)
    if a.shape != b.shape:
        return dist
    with np.errstate(over="ignore", invalid="ignore"):
        scale = (np.abs(a.reshape(n, -1).astype(np.float64)).mean(1)
                 + np.abs(b.reshape(n, -1).astype(np.float64)).mean(1)) / 2
        rel = np.where(dist == 0.0, 0.0, dist / (scale + SCALE_FLOOR))
    return np.where(np.isnan(rel), np.inf, rel)

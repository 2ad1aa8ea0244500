"""Per-individual fitness over a batch: row ``i`` of every array is individual ``i``.

* inconsistency — the layer distance (Definition 4) between two backends at one layer
  (the logits by default); with more than two backends, the largest over all pairs,
  and the pair that gave it;
* nan — max(x) - min(x) of one layer's output on one backend: spread-out values are the
  ones that overflow into Inf and NaN.  A row that already holds NaN/Inf scores ``inf``.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from audee.oracle.distance import per_input_distance

FITNESSES = ("inconsistency", "nan", "relative-inconsistency")


def inconsistency_fitness(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Largest per-row distance over backend pairs, and the pair ('a|b') for each row."""
    labels = list(outputs)
    if len(labels) < 2:
        raise ValueError("the inconsistency fitness needs at least two backends")
    n = next(iter(outputs.values())).shape[0]
    best = np.full(n, -np.inf)
    pair = [""] * n
    for a, b in combinations(labels, 2):
        d = per_input_distance(outputs[a], outputs[b])
        d = np.where(np.isnan(d), np.inf, d)
        for i in np.flatnonzero(d > best):
            pair[i] = f"{a}|{b}"
        best = np.maximum(best, d)
    return best, pair


def relative_inconsistency_fitness(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Like :func:`inconsistency_fitness`, divided by each row's mean output magnitude:
    a difference that survives scaling, so a search cannot win by inflating values."""
    dist, pair = inconsistency_fitness(outputs)
    n = dist.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.mean([np.abs(o.reshape(n, -1).astype(np.float64)).mean(axis=1) for o in outputs.values()], axis=0)
        rel = np.where(dist == 0.0, 0.0, dist / (scale + 1e-12))  # agreement is agreement at any scale
    return np.where(np.isnan(rel), np.inf, rel), pair


def nan_fitness(output: np.ndarray) -> np.ndarray:
    flat = output.reshape(output.shape[0], -1).astype(np.float64)
    finite = np.isfinite(flat).all(axis=1)
    with np.errstate(invalid="ignore"):
        spread = flat.max(axis=1) - flat.min(axis=1)
    return np.where(finite, spread, np.inf)

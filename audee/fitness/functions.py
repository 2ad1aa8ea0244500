"""Per-individual fitness over a batch: row ``i`` of every array is individual ``i``.

* inconsistency — the layer distance (Definition 4) between two backends at one layer
  (the logits by default); with more than two backends, the largest over all pairs,
  and the pair that gave it;
* relative-inconsistency — the same with the scale-normalized distance (localization's
  one-layer amplification);
* nan — max(x) - min(x) of one layer's output on one backend: spread-out values are the
  ones that overflow into Inf and NaN.  A row that already holds NaN/Inf scores ``inf``.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable

import numpy as np

from audee.oracle.distance import per_input_distance, relative_distance

FITNESSES = ("inconsistency", "nan", "relative-inconsistency")


def _largest_pair(outputs: dict[str, np.ndarray],
                  distance: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Per row, the largest ``distance`` over backend pairs (NaN counts as ``inf``), and
    the pair ('a|b') that gave it."""
    labels = list(outputs)
    if len(labels) < 2:
        raise ValueError("the inconsistency fitness needs at least two backends")
    n = next(iter(outputs.values())).shape[0]
    best = np.full(n, -np.inf)
    pair = [""] * n
    for a, b in combinations(labels, 2):
        d = distance(outputs[a], outputs[b])
        d = np.where(np.isnan(d), np.inf, d)
        for i in np.flatnonzero(d > best):
            pair[i] = f"{a}|{b}"
        best = np.maximum(best, d)
    return best, pair


def inconsistency_fitness(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Largest per-row Definition 4 distance over backend pairs, and the pair for each row."""
    return _largest_pair(outputs, per_input_distance)


def relative_inconsistency_fitness(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Largest per-row relative distance (:func:`audee.oracle.distance.relative_distance`)
    over backend pairs: a difference that survives scaling."""
    return _largest_pair(outputs, relative_distance)


def nan_fitness(output: np.ndarray) -> np.ndarray:
    flat = output.reshape(output.shape[0], -1).astype(np.float64)
    finite = np.isfinite(flat).all(axis=1)
    with np.errstate(invalid="ignore"):
        spread = flat.max(axis=1) - flat.min(axis=1)
    return np.where(finite, spread, np.inf)

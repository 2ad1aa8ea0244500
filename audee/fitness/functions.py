"""Per-individual fitness over a batch: row ``i`` of every array is individual ``i``.

* inconsistency — the deviation oracle's normalized score
  (:func:`audee.oracle.deviation.deviation_score`: per row, the largest
  |a - b| / (atol + rtol * s), s the row's largest |value|) between two backends at one
  layer (the logits by default); with more than two backends, the largest over all pairs,
  and the pair that gave it.  It measures disagreement per unit of output scale, so a
  search cannot raise it by inflating inputs or weights, and > 1 means out of tolerance.
  (The paper used the Definition 4 distance; it grows with the scale on any pair of
  backends, correct ones too.  Traces still profile layers with Definition 4);
* relative-inconsistency — the same with the scale-normalized distance (localization's
  one-layer amplification);
* nan — max(x) - min(x) of one layer's output on one backend: spread-out values are the
  ones that overflow into Inf and NaN.  A row that already holds NaN/Inf scores ``inf``;
* precision — Predoo's fitness: the largest error of any backend's logits
  against the float64 reference's, normalized as the deviation oracle normalizes (in each
  backend's own dtype's tolerance: > 1 is out of tolerance), and the backend that gave it.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Mapping

import numpy as np

from audee.oracle.deviation import FULL, deviation_score, pair_compute
from audee.oracle.distance import relative_distance

FITNESSES = ("inconsistency", "nan", "relative-inconsistency", "precision")


def largest_pair(scores: Mapping[tuple[str, str], np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Per row, the largest score over backend pairs (``scores[(a, b)]``, NaN counting as
    ``inf``), and the pair ('a|b') that gave it: the scores computed elsewhere (the
    search's judgement computes each pair's deviation once, for its suspects and this)."""
    if not scores:
        raise ValueError("the inconsistency fitness needs at least two backends")
    n = next(iter(scores.values())).shape[0]
    best = np.full(n, -np.inf)
    pair = [""] * n
    for (a, b), d in scores.items():
        d = np.where(np.isnan(d), np.inf, d)
        for i in np.flatnonzero(d > best):
            pair[i] = f"{a}|{b}"
        best = np.maximum(best, d)
    return best, pair


def _largest_pair(outputs: dict[str, np.ndarray],
                  distance: Callable[[str, str], np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """:func:`largest_pair` of ``distance(a, b)`` over the pairs of ``outputs``' labels
    (fewer than two labels: no pair, which it refuses)."""
    return largest_pair({(a, b): distance(a, b) for a, b in combinations(list(outputs), 2)})


def inconsistency_fitness(outputs: dict[str, np.ndarray], tolerances: Mapping[str, Any] | Any = None,
                          modes: Mapping[str, str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Largest per-row normalized deviation over backend pairs, and the pair for each row.
    ``tolerances``: the deviation oracle's (default: its defaults); ``modes``: each
    backend's compute mode (a pair with a TF32 backend is judged with the tf32
    tolerances).  A row non-finite on one side only scores ``inf`` (the NaN oracle
    confirms it)."""
    modes = modes or {}

    def score(a: str, b: str) -> np.ndarray:
        compute = pair_compute(modes.get(a, FULL), modes.get(b, FULL))
        return deviation_score(outputs[a], outputs[b], tolerances, compute)

    return _largest_pair(outputs, score)


def relative_inconsistency_fitness(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Largest per-row relative distance (:func:`audee.oracle.distance.relative_distance`)
    over backend pairs: a difference that survives scaling."""
    return _largest_pair(outputs, lambda a, b: relative_distance(outputs[a], outputs[b]))


def nan_fitness(output: np.ndarray) -> np.ndarray:
    flat = output.reshape(output.shape[0], -1).astype(np.float64)
    finite = np.isfinite(flat).all(axis=1)
    with np.errstate(invalid="ignore"):
        spread = flat.max(axis=1) - flat.min(axis=1)
    return np.where(finite, spread, np.inf)


def precision_fitness(outputs: dict[str, np.ndarray], reference: np.ndarray, tolerances: Mapping[str, Any] | Any = None,
                      modes: Mapping[str, str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Per row, the largest normalized error of any backend's ``outputs`` against the
    float64 ``reference`` (:func:`audee.oracle.deviation.deviation_score`, judged in the
    backend's dtype and compute mode), and the backend that gave it.  A row non-finite on
    one side only scores ``inf``."""
    if not outputs:
        raise ValueError("the precision fitness needs at least one backend")
    modes = modes or {}
    values, pairs = largest_pair({(b, "reference"): deviation_score(x, reference, tolerances,
                                                                    pair_compute(modes.get(b, FULL)))
                                  for b, x in outputs.items()})
    return values, [p.split("|")[0] for p in pairs]

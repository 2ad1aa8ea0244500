"""The training phase's search fitness: how far apart two backends' training steps are.

The largest normalized error (:mod:`audee.oracle.deviation`'s score, via
:func:`audee.oracle.train.pair_scores`) over the model output in training mode, the loss
and every trainable weight's gradient, for the pair of backends where it is largest: the
GA (:mod:`audee.search.train`) climbs it at input or weight level towards a
``train_deviation``, which a value above 1 already is.  Scale-normalized like every
deviation, so the search cannot win by blowing values up.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Mapping

from audee.oracle.train import pair_scores
from audee.train.setup import TrainOutcome

QUANTITIES = ("output", "loss", "gradient")


def gradient_fitness(outcomes: Mapping[str, TrainOutcome], tolerances: Any = None) -> tuple[float, str]:
    """(the largest pair's score, that pair ``a|b``); (0.0, "") with fewer than two steps."""
    ok = [o for o in outcomes.values() if o.ok]
    best, pair = 0.0, ""
    for a, b in combinations(ok, 2):
        s = pair_scores(a, b, tolerances)
        value = 0.0
        for q in QUANTITIES:
            got = s.get(q)
            if got is None:
                continue
            scores = [got["score"]] if "score" in got else [v["score"] for v in got.values()]
            value = max([value, *(float(x) for x in scores)])
        if value > best or not pair:
            best, pair = value, f"{a.backend}|{b.backend}"
    return best, pair


__all__ = ["QUANTITIES", "gradient_fitness"]

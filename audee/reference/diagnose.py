"""Where a backend loses accuracy: the per-layer judgement of a ``precision`` finding.

On a few of the finding's worst rows:

1. the reference runs again with every layer's output returned, and so does the backend:
   each layer's error along the whole model (``layer_errors``; :func:`audee.oracle.deviation.layer_scores`
   against the reference's layer) and the first one out of tolerance (``first_layer``);
2. the layers out of tolerance worth judging alone (the first, then those that raise the
   error most over their inputs', at most :data:`OWN_LAYER_CHECKS`) run alone on the
   backend, fed the **reference's** input to the layer cast to the backend's dtype: the
   layer's own error against the reference's output of it (``own``);
3. the first of them out of tolerance, in model order, and well-conditioned (moving its
   input by rounding noise of the dtype it computes in moves its output by less than a
   tenth of that error: :func:`audee.oracle.attribution.attribute`) is the layer blamed
   (``layer``); an ill-conditioned one is listed (``ill_conditioned``) and not blamed;
4. when every layer judged is cleared, the finding becomes ``precision_accumulated`` (no
   failure): the deviation oracle's rule for ``deviation_accumulated``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audee.cases.case import Finding, Kind, TestCase
from audee.oracle.compute_dtype import layer_compute_dtype
from audee.oracle.attribution import Alone, attribute
from audee.oracle.deviation import (DTYPE_ROUNDING, compare, jump_order, layer_scores, pair_compute, perturbed,
                                    perturbed_weights, rounding_for)
from audee.oracle.slices import one_element_score
from audee.records.findings import OwnScore
from audee.cases.spec import Weights, one_layer_model, weights_key

DIAGNOSE_ROWS = 8        # rows whose layers are fetched for a finding
OWN_LAYER_CHECKS = 6     # layers judged alone per finding


def diagnose_precision(ex: Any, case: TestCase, wide: Any, reference: str, f: Finding) -> dict[str, float]:
    """Fill ``f``'s per-layer fields (module docstring); each layer's error along the whole
    model (what the reference record keeps for the backend)."""
    d, backend = f.detail, f.detail.backend
    rows = list(d.rows or [])[:DIAGNOSE_ROWS] or list(range(min(case.batch, DIAGNOSE_ROWS)))
    sub = {k: v[rows] for k, v in case.inputs.items()}
    wide_sub = wide.rows(rows)
    ref = ex.pool_run(wide.spec, wide.weights, weights_key(wide.weights), wide_sub, labels=[reference],
                      layers=True).get(reference)
    mine = ex.pool_run(case.spec, case.weights, weights_key(case.weights), sub, labels=[backend],
                       layers=True).get(backend)
    if not (isinstance(ref, dict) and isinstance(mine, dict)):
        return {}
    ref_layers, my_layers = ref["layers"], mine["layers"]
    order = case.spec.topological_order()
    compute = pair_compute(ex.pool.precisions.get(backend, "full"))
    scores = layer_scores(my_layers, ref_layers, order, ex.tolerances, compute)
    d.layer_errors = {name: float(s["score"]) for name, s in scores.items()}
    out = [name for name in order if name in scores and scores[name]["score"] > 1.0]
    d.first_layer = out[0] if out else None
    d.own = {}
    checks = jump_order(scores, order, case.spec.predecessors)[:OWN_LAYER_CHECKS]

    def run_alone(name: str) -> Alone | None:
        """``name`` alone on the backend, fed the reference's input to it, against the reference's output."""
        refs = case.spec.layer(name).inputs
        if not all(r in ref_layers or r in wide_sub for r in refs):
            return None
        # the reference's input to the layer, in the dtype the backend fed it
        feed = {r: _as(ref_layers[r] if r in ref_layers else wide_sub[r], my_layers.get(r, sub.get(r)))
                for r in refs}
        alone = _alone(ex, case, name, feed, backend)
        if alone is None:
            return None
        own = compare(alone, np.asarray(ref_layers[name]), ex.tolerances, compute=compute)
        if own is None:
            return None

        def self_score() -> float:
            # rounding noise of the dtype the layer computes in (a float16 layer fed float32 rounds 2^-22 away)
            size = max(rounding_for(compute, {**feed, name: alone}),
                       DTYPE_ROUNDING.get(layer_compute_dtype(case.spec.layer(name).params), 0.0))
            moved = _alone(ex, case, name, perturbed(feed, size=size), backend,
                           weights=perturbed_weights(case.weights, name, size=size))
            got = compare(alone, moved, ex.tolerances, compute=compute) if moved is not None else None
            # and what it cannot move (audee.oracle.slices): here one side rounds, the reference is exact
            return max(float(got["score"]) if got is not None else float("inf"),
                       one_element_score(case.spec.layer(name), feed, case.weights.get(name, []), alone,
                                         np.asarray(ref_layers[name]), ex.tolerances, compute, sides=1))

        return Alone(OwnScore(score=own["score"], max_abs=own["max_abs"], max_rel=own["max_rel"]),
                     self_score=self_score)

    att = attribute(checks, order, run_alone, own=d.own)
    d.layer = d.layer or (att.blamed[0] if att.blamed else None)
    if att.ill_conditioned:
        d.ill_conditioned = [*(d.ill_conditioned or []), *att.ill_conditioned]
    if d.layer is None and att.judged == att.checked:
        # no layer loses accuracy on its own input: rounding amplified along the model, or a
        # computation rounding decides (an input right at a threshold): no evidence against the backend
        f.kind = Kind.PRECISION_ACCUMULATED
    return dict(d.layer_errors)


def _as(value: np.ndarray, like: Any) -> np.ndarray:
    """``value`` in the dtype of ``like`` (a float array; else as it is)."""
    if like is None:
        return np.asarray(value)
    like = np.asarray(like)
    return np.asarray(value).astype(like.dtype) if np.asarray(value).dtype != like.dtype else np.asarray(value)


def _alone(ex: Any, case: TestCase, name: str, feed: dict[str, np.ndarray], backend: str,
           weights: Weights | None = None) -> np.ndarray | None:
    """Layer ``name`` alone on ``backend``, fed ``feed``, with the case's weights (or ``weights``'s):
    its output (None if it cannot run alone)."""
    model = one_layer_model(case.spec, case.weights if weights is None else weights, name, feed)
    if model is None:
        return None
    spec1, w1 = model
    got = ex.pool_run(spec1, w1, weights_key(w1), dict(feed), labels=[backend]).get(backend)
    return np.asarray(got["logits"]) if isinstance(got, dict) else None


__all__ = ["diagnose_precision"]

"""The precision oracle (after Predoo): every backend judged against a float64
reference, so that a disagreement says *which* backend is wrong, and a backend that is
wrong when the others agree with it is found too.

The reference is the test case computed once more under the ``float64`` dtype policy
(:mod:`audee.reference` runs it).  A backend's **error** against it is the deviation
oracle's row score (:func:`audee.oracle.deviation.compare`: ``|x - ref| / (atol + rtol * s)``,
``s`` the row's largest |value| on both sides), judged in the backend's own dtype's
tolerance (a float32 output against float32's, a float16 one against float16's, a GPU in
TF32 mode against tf32's): above 1 it is out of tolerance.  The largest of the logits' and
the output's scores counts.

* **culprit** (:func:`culprit`): of a ``deviation`` or ``inconsistency`` finding's
  backends, those out of tolerance against the reference, provided some backend of the
  case stays within it; ``[]`` when every backend is out (an ill-conditioned case: nobody
  can tell) or none is.
* **precision** (:func:`precision_findings`): a backend out of tolerance whose error is
  also ``factor`` (:data:`audee.settings.PRECISION_FACTOR`) times the best other
  backend's: one implementation lost accuracy where another kept it, whether or not the
  backends agree with each other.  Every backend equally far off is a case the float32
  arithmetic cannot compute (chaotic, cancelling), not one backend's bug.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from audee.cases.case import Finding, Kind, Outcome
from audee.cases.kinds import CULPRIT_KINDS
from audee.oracle.deviation import TENSORS, Tolerances, compare, pair_compute
from audee.oracle.pairs import Float64Verdict, odd_by_float64
from audee.records.findings import PrecisionDetail
from audee.records.reference import ReferenceRun



def reference_scores(outcomes: list[Outcome], reference: Mapping[str, np.ndarray],
                     tol: Tolerances | Mapping | None = None) -> dict[str, dict[str, Any]]:
    """Each backend that ran, against the reference's tensors (``{"logits": .., "output": ..}``):
    :func:`audee.oracle.deviation.compare` of its worse tensor, with ``tensor`` added.
    Backends with nothing comparable (other shapes, no finite row) are left out."""
    out: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        if not o.ok:
            continue
        for tensor in TENSORS:
            x, ref = getattr(o, tensor), reference.get(tensor)
            if x is None or ref is None:
                continue
            got = compare(np.asarray(x), np.asarray(ref), tol, compute=pair_compute(o.precision))
            if got is not None and (o.backend not in out or got["score"] > out[o.backend]["score"]):
                out[o.backend] = {**got, "tensor": tensor}
    return out


def culprit(backends: list[str], errors: Mapping[str, float]) -> list[str]:
    """Of ``backends`` (a finding's), those out of tolerance against the reference, when some
    backend with an error stays within it; else ``[]`` (the one rule:
    :func:`audee.oracle.pairs.odd_by_float64`)."""
    told = odd_by_float64(backends, errors)
    return told[0] if told else []


def float64_verdict(rec: ReferenceRun | None) -> Float64Verdict | None:
    """What a case's reference record says of its backends, for the odd marking
    (:func:`audee.oracle.odd.mark_odd`); None when it has none that judges (not computed,
    disputed)."""
    if rec is None or not rec.usable:
        return None
    return Float64Verdict(dict(rec.errors), tuple(rec.nonfinite) if rec.nonfinite else None)


def mark_culprits(findings: list[Finding], errors: Mapping[str, float]) -> None:
    """Set ``culprit`` and ``reference_errors`` on every deviation and inconsistency finding."""
    for f in findings:
        if f.kind in CULPRIT_KINDS:
            f.detail.culprit = culprit(list(f.backends), errors)
            f.detail.reference_errors = {b: float(errors[b]) for b in f.backends if b in errors}


def precision_findings(scores: Mapping[str, Mapping[str, Any]], factor: float, reference: str,
                       reference_dtype: str = "float64") -> list[Finding]:
    """One ``precision`` finding per backend out of tolerance against the reference and
    ``factor`` times the best other backend's error (module docstring).  A case with one
    backend has no best other: no finding."""
    errors = {b: float(s["score"]) for b, s in scores.items()}
    found = []
    for b, s in scores.items():
        others = {c: e for c, e in errors.items() if c != b}
        if errors[b] <= 1.0 or not others:
            continue
        best = min(others, key=lambda c: others[c])
        ratio = errors[b] / others[best] if others[best] > 0 else float("inf")
        if ratio <= factor:
            continue
        detail = PrecisionDetail(backend=b, reference=reference, reference_dtype=reference_dtype, tensor=s["tensor"],
                                 score=s["score"], max_abs=s["max_abs"], max_rel=s["max_rel"], n_out=s["n_out"],
                                 n=s["n"], rows=s["rows"], dtype=s["dtype"], tolerance=s["tolerance"], best=best,
                                 best_score=others[best], factor=ratio, errors=errors)
        found.append(Finding(Kind.PRECISION, [b], detail))
    return found


__all__ = ["CULPRIT_KINDS", "culprit", "float64_verdict", "mark_culprits", "precision_findings", "reference_scores"]

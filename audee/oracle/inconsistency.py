"""Inconsistency oracle (the paper's Definition 2): predicted labels differ between two
backends on the same input.

A label flip on an input where either backend's top-two outputs are closer than
``tie_margin`` is a floating-point tie, not an inconsistency: it is counted separately
(``ties``) so that near-uniform outputs do not flood the results.  ``tie_margin=0`` gives
the paper's plain definition.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from audee.case import Finding, Kind, Outcome
from audee.oracle.distance import layer_distance, per_input_distance


def _margin(out: np.ndarray) -> np.ndarray:
    flat = out.reshape(out.shape[0], -1)
    if flat.shape[1] < 2:
        return np.full(flat.shape[0], np.inf)
    top2 = np.partition(flat, -2, axis=1)[:, -2:]
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf is no tie: NaN compares False
        return top2[:, 1] - top2[:, 0]


def pair_report(a: Outcome, b: Outcome, tie_margin: float) -> dict:
    """Labels, flips, ties and distances for one backend pair."""
    if a.output.shape != b.output.shape or a.logits.shape != b.logits.shape:
        return {"shape_mismatch": {a.backend: list(a.output.shape), b.backend: list(b.output.shape)},
                "flips": list(range(a.output.shape[0])), "ties": [], "distance": float("inf"),
                "per_input": [float("inf")] * a.output.shape[0]}
    la = a.output.reshape(a.output.shape[0], -1).argmax(1)
    lb = b.output.reshape(b.output.shape[0], -1).argmax(1)
    differ = np.flatnonzero(la != lb)
    tie = np.minimum(_margin(a.output), _margin(b.output)) < tie_margin
    per_input = per_input_distance(a.logits, b.logits)
    return {"flips": [int(i) for i in differ if not tie[i]], "ties": [int(i) for i in differ if tie[i]],
            "distance": layer_distance(a.logits, b.logits), "per_input": [float(v) for v in per_input],
            "labels": {a.backend: la.tolist(), b.backend: lb.tolist()}}


def inconsistency_findings(outcomes: list[Outcome], tie_margin: float = 1e-5) -> tuple[list[Finding], dict]:
    """Findings for every pair of backends that both ran with finite outputs, and the
    per-pair distances (reported for every case, failing or not)."""
    usable = [o for o in outcomes if o.ok and np.isfinite(o.output).all() and np.isfinite(o.logits).all()]
    findings: list[Finding] = []
    pairs: dict[str, dict] = {}
    for a, b in combinations(usable, 2):
        rep = pair_report(a, b, tie_margin)
        key = f"{a.backend}|{b.backend}"
        pairs[key] = {"distance": rep["distance"], "flips": len(rep["flips"]), "ties": len(rep["ties"])}
        if rep["flips"]:
            detail = {"pair": key, "distance": rep["distance"], "inputs": rep["flips"][:64],
                      "n_flips": len(rep["flips"]), "ties": len(rep["ties"]),
                      "input_distance": {str(i): rep["per_input"][i] for i in rep["flips"][:64]}}
            if "shape_mismatch" in rep:
                detail["shape_mismatch"] = rep["shape_mismatch"]
            else:
                detail["labels"] = {k: [v[i] for i in rep["flips"][:64]] for k, v in rep["labels"].items()}
            findings.append(Finding(Kind.INCONSISTENCY, [a.backend, b.backend], detail))
    return findings, pairs

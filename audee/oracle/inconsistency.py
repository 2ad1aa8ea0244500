"""Inconsistency oracle (the paper's Definition 2): predicted labels differ between two
backends on the same input.

Which rows flip, which are ties (top-two outputs closer than ``tie_margin``, counted
separately so that near-uniform outputs do not flood the results) and which are left to
the NaN oracle (NaN/Inf on either side) is decided by the one rule in
:mod:`audee.oracle.labels`.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from audee.cases.case import Finding, Kind, Outcome
from audee.oracle.deviation import pair_compute, relative_tie_margin
from audee.oracle.distance import layer_distance, per_input_distance
from audee.oracle.labels import label_flips
from audee.records.findings import InconsistencyDetail


def pair_report(a: Outcome, b: Outcome, tie_margin: float, tolerances: Any = None) -> dict:
    """Labels, flips, ties and distances for one backend pair.  ``tolerances``: the
    deviation oracle's, for the relative tie margin of reduced-precision pairs."""
    rel = relative_tie_margin(a.output, b.output, tolerances, pair_compute(a.precision, b.precision))
    judged = label_flips(a.output, b.output, tie_margin, rel)
    la, lb = judged.labels
    rep = {"flips": [int(i) for i in np.flatnonzero(judged.flips)],
           "ties": [int(i) for i in np.flatnonzero(judged.ties)],
           "labels": {a.backend: la.tolist(), b.backend: lb.tolist()}}
    if a.output.shape != b.output.shape or a.logits.shape != b.logits.shape:
        n = a.output.shape[0]
        return {**rep, "flips": list(range(n)), "ties": [], "distance": float("inf"), "per_input": [float("inf")] * n,
                "shape_mismatch": {a.backend: list(a.output.shape), b.backend: list(b.output.shape)}}
    return {**rep, "distance": layer_distance(a.logits, b.logits),
            "per_input": [float(v) for v in per_input_distance(a.logits, b.logits)]}


def inconsistency_findings(outcomes: list[Outcome], tie_margin: float,
                           tolerances: Any = None) -> tuple[list[Finding], dict]:
    """Findings for every pair of backends that both ran, and the per-pair distances
    (reported for every case, failing or not).  Rows with NaN/Inf are judged by the NaN
    oracle, not here (:func:`audee.oracle.labels.label_flips`)."""
    usable = [o for o in outcomes if o.ok]
    facts = {o.backend: dict(o.facts) for o in usable if getattr(o, "facts", None)}
    findings: list[Finding] = []
    pairs: dict[str, dict] = {}
    for a, b in combinations(usable, 2):
        rep = pair_report(a, b, tie_margin, tolerances)
        key = f"{a.backend}|{b.backend}"
        pairs[key] = {"distance": rep["distance"], "flips": len(rep["flips"]), "ties": len(rep["ties"])}
        if rep["flips"]:
            detail = InconsistencyDetail(pair=key, distance=rep["distance"], inputs=rep["flips"][:64],
                                         n_flips=len(rep["flips"]), ties=len(rep["ties"]),
                                         input_distance={str(i): rep["per_input"][i] for i in rep["flips"][:64]},
                                         program={x: facts[x] for x in (a.backend, b.backend) if x in facts})
            if "shape_mismatch" in rep:
                detail.shape_mismatch = rep["shape_mismatch"]
            else:
                detail.labels = {k: [v[i] for i in rep["flips"][:64]] for k, v in rep["labels"].items()}
            findings.append(Finding(Kind.INCONSISTENCY, [a.backend, b.backend], detail))
    return findings, pairs

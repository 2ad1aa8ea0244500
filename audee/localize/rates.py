"""Change rates (the paper's section 2.5) and CRADLE's rule, on DAG models.

R_L = (d_L - d_pre) / (d_pre + eps), with d_pre the largest distance over the layers
feeding L; a layer fed only by model inputs has d_pre = 0 (both backends get the same
input).
"""
from __future__ import annotations

import numpy as np

from audee.records.localization import RateRow
from audee.cases.spec import ModelSpec

EPS = 1e-7


def change_rates(spec: ModelSpec, distances: dict[str, float]) -> dict[str, float]:
    rates = {}
    for name in spec.topological_order():
        if name not in distances:
            continue
        pre = [distances.get(p, 0.0) for p in spec.predecessors(name)]
        d_pre = max(pre) if pre else 0.0
        d = distances[name]
        if not np.isfinite(d_pre):
            rates[name] = 0.0  # an inf already upstream explains this layer
        elif not np.isfinite(d):
            rates[name] = float("inf")
        else:
            rates[name] = (d - d_pre) / (d_pre + EPS)
    return rates


def cradle_flags(rates: dict[str, float]) -> list[str]:
    """CRADLE's rule as the paper compares it: layers in the top quartile of change rates."""
    if not rates:
        return []
    values = np.array([v if np.isfinite(v) else np.finfo(np.float64).max for v in rates.values()])
    cut = np.percentile(values, 75)
    return [k for k, v in zip(rates, values) if v >= cut and v > 0]


def top1_rate(table: list[RateRow]) -> float | None:
    """The paper's Top1-CR: the largest change rate over a rate table's layers."""
    rates = [float(row.rate) for row in table if row.rate is not None and not np.isnan(row.rate)]
    return max(rates) if rates else None

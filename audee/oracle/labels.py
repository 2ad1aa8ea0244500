"""The one label-flip rule (the paper's Definition 2), shared by the inconsistency oracle
and the search's cheap per-individual judgement.

Row ``i`` of each array is input ``i`` of the batch; a row's label is the argmax of its
flattened output.  For every row:

* **non-finite** — NaN or Inf anywhere in the row, on either side: neither a flip nor a
  tie.  argmax over NaN is meaningless; non-finite outputs are the NaN oracle's business;
* **tie** — finite on both sides, labels differ, and either side's top-two outputs are
  closer than ``tie_margin``, or than ``rel_margin`` times the row's largest |value| on
  both sides: a floating-point tie, counted apart from flips (``tie_margin=0`` and
  ``rel_margin=0`` give the paper's plain definition).  ``rel_margin`` is non-zero only for
  pairs judged in a reduced precision (float16, bfloat16, a GPU in TF32 mode): there two
  correct backends legitimately differ by the precision's relative rounding, and labels
  whose top two are closer than that are a coin toss
  (:func:`audee.oracle.deviation.relative_tie_margin`);
* **flip** — finite on both sides, labels differ, and no tie.

Outputs of different shapes cannot agree: every row is a flip (labels as each side
computes them).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class LabelFlips(NamedTuple):
    flips: np.ndarray                       # bool per row: a label flip (Definition 2)
    ties: np.ndarray                        # bool per row: labels differ inside the tie margin
    labels: tuple[np.ndarray, np.ndarray]   # argmax per row on each side


def top2_margin(out: np.ndarray) -> np.ndarray:
    """Per row, the gap between the two largest outputs (``inf`` with a single output)."""
    flat = out.reshape(out.shape[0], -1)
    if flat.shape[1] < 2:
        return np.full(flat.shape[0], np.inf)
    top2 = np.partition(flat, -2, axis=1)[:, -2:]
    with np.errstate(over="ignore", invalid="ignore"):
        return top2[:, 1] - top2[:, 0]


def _labels(out: np.ndarray) -> np.ndarray:
    """argmax per row; -1 for rows of an empty output."""
    flat = out.reshape(out.shape[0], -1)
    return flat.argmax(1) if flat.shape[1] else np.full(flat.shape[0], -1)


def label_flips(out_a: np.ndarray, out_b: np.ndarray, tie_margin: float, rel_margin: float = 0.0) -> LabelFlips:
    """Flips, ties and labels of two backends' outputs on the same batch (rule above)."""
    n = out_a.shape[0]
    la, lb = _labels(out_a), _labels(out_b)
    if out_a.shape != out_b.shape:
        return LabelFlips(np.ones(n, bool), np.zeros(n, bool), (la, lb))
    if out_a.reshape(n, -1).shape[1] == 0:  # an empty output (a crop to nothing): no label, nothing to flip
        return LabelFlips(np.zeros(n, bool), np.zeros(n, bool), (la, lb))
    finite = np.isfinite(out_a.reshape(n, -1)).all(1) & np.isfinite(out_b.reshape(n, -1)).all(1)
    differ = (la != lb) & finite
    tie = np.zeros(n, bool)
    if differ.any():  # a tie only matters where the labels differ: the other rows are neither
        m = int(differ.sum())
        margin = np.full(m, float(tie_margin))
        if rel_margin > 0:
            fa = np.abs(out_a[differ].reshape(m, -1))
            fb = np.abs(out_b[differ].reshape(m, -1))
            scale = np.maximum(fa.max(1, initial=0.0), fb.max(1, initial=0.0)).astype(np.float64)
            margin = np.maximum(margin, rel_margin * scale)
        tie[differ] = np.minimum(top2_margin(out_a[differ]), top2_margin(out_b[differ])) < margin
    return LabelFlips(differ & ~tie, differ & tie, (la, lb))

"""Which layer deviates on its own input, and is it well conditioned: the one attribution rule.

Every diagnosis that pins a numeric difference on a layer asks the same thing of a few
candidate layers, in model order: fed the recorded input of the layer alone, does it still
differ (its own score out of tolerance), and is it well conditioned there — does it differ
well beyond what moving its input by rounding noise does to it on one side?  A layer that
differs alone and is well conditioned is **blamed**; one that differs alone but turns
rounding into as large a change itself is **ill-conditioned** (no evidence against a
backend); one that does not differ alone is **cleared**.  When every candidate was judged
and none is blamed, the difference is **accumulated**: rounding amplified along the model.

The sites differ only in how they run a layer alone and what they compare (two backends'
outputs of the layer; a training step's output and gradients with the probe loss; a
backend's output against the float64 reference's; a layer with and without an equivalence
rule; an op call itself), and in what they write on the finding.  Each passes the running
as a callable that answers an :class:`Alone` per layer; :func:`attribute` applies the rule.

Two conditioning rules, one per kind of difference: values (:func:`audee.oracle.deviation.attributed`
on the layer's score against its ``self_score``) and non-finite patterns
(:func:`audee.oracle.nan.condition_pattern`'s reason: None when the difference stands,
``ill_conditioned`` when rounding noise changes the pattern itself, another reason clears it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal, Mapping, Sequence

import numpy as np

from audee.oracle.deviation import attributed
from audee.records.findings import OwnScore

#: a layer's judgement alone
Settled = Literal["blamed", "ill_conditioned", "cleared"]
#: the reason a layer within tolerance alone is cleared (a pattern rule names its own)
IN_TOLERANCE = "in_tolerance"
#: the reason of a layer that differs alone but no more than rounding noise moves it
ILL_CONDITIONED = "ill_conditioned"


@dataclass
class Alone:
    """One layer run alone, as a site ran it: ``entry`` its score there (what the finding's
    ``own`` records; ``self_score`` is filled here when asked), and its conditioning, asked
    only when the layer differs alone: ``self_score``, how far rounding noise on its input
    moves its output (the values rule), or ``pattern``, the non-finite rule's reason (None:
    the difference stands).  Given ``pattern``, the layer differs alone by construction."""

    entry: OwnScore = field(default_factory=OwnScore)
    self_score: Callable[[], float] | None = None
    pattern: Callable[[], str | None] | None = None


@dataclass
class Attribution:
    """The candidates' judgement: ``own`` (each judged layer's entry), the layers ``blamed``
    and ``ill_conditioned`` (model order), why each judged layer not blamed was not
    (``reasons``: :data:`IN_TOLERANCE`, ``ill_conditioned``, or the pattern rule's reason),
    and how many of the ``checked`` candidates could be ``judged`` alone (a layer that
    cannot stand alone is not)."""

    own: dict[str, OwnScore] = field(default_factory=dict)
    blamed: list[str] = field(default_factory=list)
    ill_conditioned: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    judged: int = 0
    checked: int = 0

    @property
    def accumulated(self) -> bool:
        """Every candidate judged and none blamed: no evidence against a backend (a site
        with no candidate at all counts as accumulated; one that needs a candidate says so)."""
        return not self.blamed and self.judged == self.checked


def settle(alone: Alone) -> tuple[Settled, str | None]:
    """The rule on one layer judged alone: blamed (no reason), or ill-conditioned or cleared
    with the reason.  The values rule asks the conditioning (and records ``self_score``)
    only of a layer out of tolerance alone; no way to ask it is no evidence of good conditioning."""
    if alone.pattern is not None:
        reason = alone.pattern()
        if reason is None:
            return "blamed", None
        return ("ill_conditioned" if reason == ILL_CONDITIONED else "cleared"), reason
    score = float(alone.entry.score if alone.entry.score is not None else 0.0)
    if score <= 1.0:
        return "cleared", IN_TOLERANCE
    self_score = alone.self_score() if alone.self_score is not None else float("inf")
    alone.entry.self_score = self_score
    return ("blamed", None) if attributed(score, self_score) else ("ill_conditioned", ILL_CONDITIONED)


def attribute(checks: Iterable[str], order: Sequence[str], run_alone: Callable[[str], Alone | None], *,
              own: dict[str, OwnScore] | None = None) -> Attribution:
    """Judge each of ``checks`` alone, in model ``order`` (:func:`settle`): ``run_alone(name)``
    runs it (None: it cannot be judged alone).  ``own``: the dict each judged layer's entry
    goes into as it is judged (a finding's ``own``; default: a new one)."""
    checks = list(checks)
    rank = {name: i for i, name in enumerate(order)}
    out = Attribution(own=own if own is not None else {}, checked=len(checks))
    for name in sorted(checks, key=lambda n: rank[n] if n in rank else len(rank)):
        alone = run_alone(name)
        if alone is None:
            continue
        out.judged += 1
        out.own[name] = alone.entry
        verdict, reason = settle(alone)
        if verdict == "blamed":
            out.blamed.append(name)
            continue
        if verdict == "ill_conditioned":
            out.ill_conditioned.append(name)
        out.reasons[name] = reason or IN_TOLERANCE
    return out


def batch_of(rows: Sequence[int], inputs: Mapping[str, np.ndarray]) -> list[int]:
    """``rows`` repeated to the batch size the case ran, the rows a difference is diagnosed
    on: a backend picks its kernels by the size of what it computes (XLA on the CPU sums a
    float32 reduction of fewer than 4096 elements in one sequential accumulator and a larger
    one in a YNNPACK fusion: one large-offset row alone put JAX's GroupNormalization 19 ulps
    of its mean off where the case's batch of 8 was 0.5 off, the api-cpu campaign, rng 2990),
    so a layer judged on fewer rows may run another kernel than the case did.  Scores are
    maxima over rows, which repeats leave as they are."""
    rows = list(rows)
    batch = max((len(v) for v in inputs.values() if np.ndim(v)), default=len(rows))
    return [rows[i % len(rows)] for i in range(max(batch, len(rows)))] if rows else []


__all__ = ["Alone", "Attribution", "ILL_CONDITIONED", "IN_TOLERANCE", "Settled", "attribute", "batch_of", "settle"]


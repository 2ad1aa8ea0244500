"""The equivalence oracle: one backend, a test case and its equivalent model.

Every other oracle compares two backends; a bug every backend shares (Keras' own layer
code), or a backend with no peer, is invisible to them.  EAGLE (ICSE 2022) compares
*equivalent graphs* on one library instead.  A rule (:mod:`audee.equivalence.rules`)
rewrites a test case into an equivalent model; both run on the same backend, and this
module judges the pair of runs:

* the backend ran the case and refused its equivalent (a clean error: ``rejected``) or
  died on it (``crashed``);
* a layer of the case computes another shape in the equivalent than Keras declares for it,
  while it computes the declared one in the case (``shape``, the layer named: a batch of zero
  rows that a kernel returns unconvolved, which the next layer's declared shape hides);
* the compared tensor (logits, else the output; on the rows the rewrite ran, in its
  order) differs in shape (``shape``), in its non-finite pattern (``nonfinite``: NaN,
  +Inf, -Inf and finite per element, as :mod:`audee.oracle.nan` classes them), or in
  value beyond the deviation oracle's tolerance of the compared dtype (``values``:
  ``|a - b| > atol + rtol * s``, :func:`audee.oracle.deviation.compare`, rows finite on
  both sides).

A pattern difference is no finding where rounding decides it (:func:`pattern_cleared`):
every differing element is at the overflow scale of float32 on the finite side (a value
right at the boundary), or non-finite only in the original where the rewrite computes in a
wider dtype (a float32 overflow, possibly inside a layer, the float64 model does not make),
or the rule does not propagate non-finite values exactly (a zero-inserted kernel turns
``inf * 0`` into NaN; max pooling's window of NaN and padding is framework-defined) and the
input holds NaN/Inf or overflow-scale values: such a rule judges only the rows whose inputs
are finite and of ordinary scale.

The per-layer judgement (the first mapped layer out of tolerance, each rewritten layer
alone with and without the rule, its conditioning) is run by ``audee.equivalence.check``;
:func:`settle` turns a finding no rewritten layer explains into
``equivalence_accumulated`` (rounding amplified along the model, not a failure).  Which
backends are odd (:func:`equivalence_odd`): those where a rule fails while a strict
majority of the backends judged run it clean; when it fails everywhere, none (the code
they share, Keras, is the suspect).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from audee.cases.case import Finding, Kind, Outcome
from audee.oracle.deviation import FULL, Tolerances, compare
from audee.oracle.nan import compare_codes, has_nonfinite, overflow_scale
from audee.records.findings import EquivalenceDetail

#: the rules that run the case's own model on other rows, and the rows they run (reversed, the first
#: alone, none; :attr:`audee.equivalence.rules.Rewrite.order`): a finding of one is read on the whole
#: batch, and its failure is its backend's code path whichever layer met it (audee.triage.rootcause)
ROW_ORDERS = {"batch_permuted": "reversed", "batch_single": "first", "batch_empty": "empty"}
TENSORS = ("logits", "output")
REASONS = ("values", "nonfinite", "shape", "rejected", "crashed", "original_rejected")
#: why a difference is no failure (``equivalence_accumulated``'s ``cleared``)
CLEARED = ("accumulated", "ill_conditioned", "overflow")
MAX_REWRITTEN = 32  # rewritten layers listed in a finding


def _tensor(outcome: Any, name: str) -> np.ndarray | None:
    got = getattr(outcome, name, None)
    return None if got is None else np.asarray(got)


def pattern_cleared(a: np.ndarray, b: np.ndarray, *, nonfinite_exact: bool = True,
                    inputs: Mapping[str, np.ndarray] | None = None, widens: bool = False) -> str | None:
    """Why the non-finite patterns of ``a`` (original) and ``b`` (rewrite) may differ
    without a bug (None: they must not): ``overflow`` where every differing element is at
    float32's overflow scale on its finite side (or non-finite on both), or, for a rewrite
    in a wider dtype (``widens``: float64), non-finite in the original only (the narrower
    dtype overflowed, inside a layer too: an LSTM's state); ``inexact`` for a rule that does
    not propagate NaN/Inf exactly on an input holding them (or overflow-scale values)."""
    if not nonfinite_exact and (has_nonfinite(inputs) or overflow_scale(inputs)):
        return "inexact"
    with np.errstate(invalid="ignore", over="ignore"):
        fa, fb = np.isfinite(a), np.isfinite(b)
        differ = (fa != fb) | (~fa & ~fb & ~((a == b) | (np.isnan(a) & np.isnan(b))))
        if not differ.any():
            return None
        limit = np.sqrt(float(np.finfo(np.float32).max))
        finite = np.where(fa, np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        at_scale = (~fa & ~fb) | (finite >= limit)
        if widens:
            at_scale |= ~fa & fb
    return "overflow" if bool(at_scale[differ].all()) else None


def judge_rewrite(rule: str, original: Outcome, rewritten: Outcome, rows: list[int],
                  tolerances: Tolerances | Mapping | None = None, *, nonfinite_exact: bool = True,
                  inputs: Mapping[str, np.ndarray] | None = None, rewritten_layers: Iterable[str] = (),
                  compute: str = FULL, widens: bool = False, witnesses: bool = False,
                  acceptance_only: bool = False, layer_map: Mapping[str, str] | None = None) -> Finding | None:
    """The ``equivalence`` finding of one backend's runs of a case (``original``) and of its
    equivalent by ``rule`` (``rewritten``, whose row ``i`` is the original's row
    ``rows[i]``), or None when they agree (module docstring).  An original that did not
    run is the crash oracles' business, unless it raised cleanly and its rewrite, by a rule
    that witnesses refusals (``witnesses``: :attr:`audee.equivalence.rules.Rule.witnesses_refusals`),
    runs: ``original_rejected``, the original's error and phase.  ``acceptance_only``
    (:attr:`audee.equivalence.rules.Rule.acceptance_only`): two runs agree whatever their values.
    ``layer_map``: each case layer's layer in the equivalent, whose declared shapes are judged."""
    backend = original.backend
    base = {"rule": rule, "backend": backend, "rewritten": list(rewritten_layers)[:MAX_REWRITTEN]}
    if not original.ok:
        f = original.failure
        if not witnesses or getattr(f, "kind", None) != "error" or not rewritten.ok:
            return None   # a rule that changes what runs, a crash, or a refusal the rewrite shares
        alone = base["rewritten"][0] if len(base["rewritten"]) == 1 else None  # the one layer the rule moved
        return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(
            **base, reason="original_rejected", phase=getattr(f, "phase", None), message=getattr(f, "message", None),
            first_layer=alone, layer=alone))
    if not rewritten.ok:
        f = rewritten.failure
        reason = "rejected" if getattr(f, "kind", None) == "error" else "crashed"
        return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(
            **base, reason=reason, phase=getattr(f, "phase", None), message=getattr(f, "message", None)))
    off = _off_declaration(original, rewritten, layer_map or {})
    if off is not None:
        layer, shapes = off
        return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(
            **base, reason="shape", shapes=shapes, first_layer=layer, layer=layer))
    keep = None if nonfinite_exact else _finite_input_rows(inputs, rows)  # rewrite rows judged
    all_rows = list(rows)
    for tensor in TENSORS:
        a, b = _tensor(original, tensor), _tensor(rewritten, tensor)
        if a is None or b is None:
            continue
        a, rows = (a[all_rows] if a.ndim else a), all_rows
        if keep is not None and a.shape == b.shape and a.ndim:
            if not keep.any():
                return None
            a, b, rows = a[keep], b[keep], [all_rows[i] for i in np.flatnonzero(keep)]
        if a.shape != b.shape:
            return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(
                **base, reason="shape", tensor=tensor, shapes={"original": list(a.shape), "rewrite": list(b.shape)}))
        if acceptance_only or not a.size:  # no values to judge (a random model; the batch of zero rows)
            continue
        pattern = compare_codes(a, b)
        if pattern is not None:     # the rows this finding names are its own field, of the whole batch
            pattern.pop("rows", None)
        # (rows whose inputs a rule does not propagate exactly are left out above)
        if pattern is not None and pattern_cleared(a, b, widens=widens) is None:
            bad = _pattern_rows(a, b)
            return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(
                **base, reason="nonfinite", tensor=tensor, pattern=pattern, rows=[rows[i] for i in bad][:64]))
        got = compare(a, b, tolerances, compute=compute)
        if got is not None and got["score"] > 1.0:
            got["rows"] = [rows[i] for i in got["rows"]]
            return Finding(Kind.EQUIVALENCE, [backend], EquivalenceDetail(**base, reason="values", tensor=tensor,
                                                                          **got))
    return None


def batch_rule(name: str | None) -> bool:
    """Whether the rule ``name`` runs the case's own model on other rows (:data:`ROW_ORDERS`)."""
    return str(name) in ROW_ORDERS


def _off_declaration(original: Any, rewritten: Any, layer_map: Mapping[str, str]
                     ) -> tuple[str, dict[str, list[int]]] | None:
    """The first case layer (in the equivalent's run order) whose equivalent computes a shape
    off Keras' declaration where the case's own run of it does not (or computes another one):
    the layer and the shapes, the case's as declared; None where there is none or no backend
    declares (a converted graph)."""
    got, own = getattr(rewritten, "declared", None), getattr(original, "declared", None) or {}
    if not got or own is None:
        return None
    case_of = {v: k for k, v in layer_map.items()}
    for mapped, (declared, computed) in got.items():
        name = case_of.get(mapped)
        if name is None:
            continue
        theirs = own.get(name)
        if theirs is not None and list(theirs[1][0])[1:] == list(computed[0])[1:]:
            continue  # the case computes it off its declaration alike: the declared-output oracle's
        shape = [int(computed[0][0]) if d is None and k == 0 and computed[0] else d
                 for k, d in enumerate(declared[0])]
        if list(shape) != list(computed[0]):
            return name, {"original": shape, "rewrite": list(computed[0])}
    return None


def _finite_input_rows(inputs: Mapping[str, np.ndarray] | None, rows: list[int]) -> np.ndarray | None:
    """Per row of the rewrite (original rows ``rows``): whether every float input of it is
    finite and below overflow scale (None: no inputs to read)."""
    if not inputs:
        return None
    keep = np.ones(len(rows), bool)
    for v in inputs.values():
        v = np.asarray(v)
        if not np.issubdtype(v.dtype, np.floating) or not v.ndim:
            continue
        flat = np.abs(v[rows].reshape(len(rows), -1).astype(np.float64))
        with np.errstate(invalid="ignore"):
            keep &= np.isfinite(flat).all(axis=1) & ~(flat >= np.sqrt(float(np.finfo(v.dtype).max))).any(axis=1)
    return keep


def _pattern_rows(a: np.ndarray, b: np.ndarray) -> list[int]:
    """Rows (of the rewrite's order) where the non-finite patterns of ``a`` and ``b`` differ."""
    from audee.oracle.nan import nonfinite_codes

    n = a.shape[0] if a.ndim else 1
    differ = (nonfinite_codes(a) != nonfinite_codes(b)).reshape(n, -1).any(axis=1)
    return np.flatnonzero(differ).tolist()


def settle(finding: Finding, judged: int, candidates: int) -> None:
    """After the per-layer judgement: a values or nonfinite finding whose every candidate
    layer was judged alone and none differs there (or only ill-conditioned ones) becomes
    ``equivalence_accumulated``; a layer that cannot be judged alone keeps it a failure."""
    d = finding.detail
    if d.reason not in ("values", "nonfinite") or d.layer is not None or not candidates or judged < candidates:
        return
    finding.kind = Kind.EQUIVALENCE_ACCUMULATED
    d.cleared = "ill_conditioned" if d.ill_conditioned else "accumulated"


def equivalence_odd(finding: Finding, findings: Iterable[Finding], ran: Iterable[str]) -> tuple[list[str], str]:
    """The odd backends of an ``equivalence`` finding among a case's ``findings``: the
    backends where its rule fails, when the others of those judged (``ran``: every backend
    that ran the case) are a strict majority; none when it fails on every one (their
    shared code, Keras, is the suspect) or no majority holds it."""
    rule = finding.detail.rule
    every = sorted(set(ran))
    failing = sorted({b for f in findings if f.kind == Kind.EQUIVALENCE and f.detail.rule == rule
                      for b in f.backends} & set(every)) or sorted(finding.backends)
    n = len(every)
    if n < 2:
        return [], "one backend judged: nothing to compare"
    if set(failing) >= set(every):
        return [], f"the rule fails on all {n} backends judged (their shared code)"
    if 2 * (n - len(failing)) > n:
        return failing, f"the rule holds on the other {n - len(failing)} of {n}"
    return [], f"no strict majority of {n} holds the rule"


__all__ = ["CLEARED", "REASONS", "equivalence_odd", "judge_rewrite", "pattern_cleared", "settle"]

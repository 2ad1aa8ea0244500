"""The one owner of "the odd backend": which backend(s) of a case behave differently from
the majority, recorded on every failure finding.

A finding names the backends *involved* (``finding.backends``: the rejecting ones, every
NaN one, both of a pair); a bug report wants the one that is *wrong*.  With three or more
backends the majority tells it; with two nobody can.  :func:`mark_odd` sets, on every
failure finding of a case:

* ``detail.odd``: the sorted labels of the backends outside a strict majority of
  backends that behave alike, or ``[]`` when no strict majority exists (two backends, a
  tie, every backend different) or every backend behaves alike;
* ``detail.odd_rule``: why, in a few words (``"minority of 4"``, ``"two backends:
  cannot tell"``, ...).

The rules (``docs/oracles.md``, "The odd backend"):

* **crash, divergent acceptance**: every backend of the case falls into one group: the
  ones that ran, or one group per distinct ``(phase, failure kind)``; the odd ones are
  those outside the largest group when it is a strict majority (the backends that failed
  when most ran, or the ones that ran when most failed alike).
* **NaN**: the backends that ran are grouped by their element-wise non-finite pattern of
  the output and the logits; when those agree, by their lists of non-finite layers.  The
  odd ones are those outside a strict-majority group.  Where some pair's difference was
  cleared by the conditioning rule or is forced by an overflow, the pairs that stood decide
  as failing pairs do, or as a backend and its reference do (:func:`standing_odd`), where
  they name someone: a majority built of cleared pairs is no verdict.  Where whole patterns
  leave no strict majority, the independent frameworks decide among themselves and each
  compiled or converted backend against its reference (:func:`independent_odd`).  In
  float16, where those name an independent framework finite where the layer's float64
  result fits (or none) while others are non-finite there, those others are odd
  (:func:`~audee.oracle.pairs.nonfinite_off_float64`: they lost a value the dtype holds).
* **one framework, one voice**: a majority whose backends are too few frameworks (``torch``
  and ``torch@cuda`` against ``jax@cuda``: one Keras backend's code on two devices) does
  not decide (:func:`~audee.oracle.pairs.one_framework_outvotes`); the rules below do.
* **a backend and its reference** (:mod:`audee.oracle.pairs`): where the rules above cannot
  tell (two backends, no strict majority) and every differing pair is a compiled or
  converted backend and the backend whose program it runs, the compiled or converted side
  is odd (``"judged against its reference tensorflow"``); for a pairwise finding, its own pair,
  unless the compiled or converted side agrees with an independent framework that the
  reference differs from too: then the reference is (:func:`~audee.oracle.pairs.odd_by_witness`).
  A strict majority made only of backends judged against the odd ones (two runtimes of one
  converter's graph of ``tensorflow``'s program, both dropping a NaN it keeps) is no
  majority against their reference: the pair rule decides there too.
* **the float64 reference** (:mod:`audee.oracle.pairs`, ``--reference float64``): where a
  case has one that judges, it decides before the majority does: a deviation's or an
  inconsistency's odd backends are those out of tolerance against it
  (:func:`~audee.oracle.pairs.odd_by_float64`: ``"out of tolerance against the float64
  reference"``), a NaN finding's those non-finite where it is finite
  (:func:`~audee.oracle.pairs.nonfinite_by_float64`); two backends sharing one wrong value
  leave the third, right one alone.  Where it cannot tell, the rules below and above.
* **a declared output** (``declared_output``, :mod:`audee.oracle.declared`): the backends
  that ran the model Keras built, grouped by what they compute at the layer (its declaration,
  or their shape and dtype); the minority of a strict majority is odd, none where all compute
  alike against the declaration (the layer's own declaration is wrong).
* **a version pair** (``regression``, :mod:`audee.oracle.regression`): its newer release,
  judged against the older (``"the newer release, judged against the older"``); none where
  the reported versions do not order the two.
* **deviation, inconsistency** (one finding per pair): from the pairs with such a finding
  among the backends that ran, the smallest set of backends that touches every failing
  pair, when it is the only one of its size and the backends left (every pair among them
  agrees) are a strict majority: four backends whose pairs with onnxruntime deviate and
  whose other pairs agree give ``["onnxruntime"]``.  A majority the blamed layer's float64
  result contradicts does not decide: where it names a backend within that result while a
  backend of the case is within none, each pair's other side is odd
  (:func:`~audee.oracle.pairs.odd_off_float64`; two frameworks on one kernel library,
  wrong alike, outvote the right one); where no majority forms, the same evidence names
  the side off it, after the witness and the pair's own float64 results.

It is a pure function of the outcomes, the findings and the float64 reference's verdict,
so it runs again, unchanged, on a re-judged or reproduced case.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Hashable

import numpy as np

from audee.backends.info import reference_of
from audee.cases.case import Finding, Kind, Outcome
from audee.cases.kinds import PAIRWISE, odd_rule
from audee.oracle.compute_dtype import reduced_precision
from audee.oracle.declared import declared_groups
from audee.oracle.equivalence import equivalence_odd
from audee.oracle.nan import ARRAYS, nonfinite_codes, stood
from audee.oracle.pairs import (UNORDERED, VERSION_RULE, Float64Verdict, NONFINITE_RULE, differing_pairs,
                                float64_sides, nonfinite_off_float64, odd_by_float64, odd_by_reference, odd_by_witness,
                                odd_off_float64, one_framework_outvotes, outvotes_its_reference)


def mark_odd(outcomes: list[Outcome], findings: list[Finding], reference: Float64Verdict | None = None) -> None:
    """Set ``odd`` and ``odd_rule`` on every failure finding of one case (module docstring),
    by the rule its kind names in the finding kind table (:func:`audee.cases.kinds.odd_rule`);
    ``reference``: what the case's float64 reference says, where it has one that judges."""
    crash = nan = pairwise = differing = sides = None  # computed once per case, when a finding needs them
    ran = [o.backend for o in outcomes if o.ok]
    by_float64 = odd_by_float64(ran, reference.errors) if reference is not None else None
    nonfinite = (list(reference.nonfinite), NONFINITE_RULE) if reference is not None and reference.nonfinite else None
    for f in findings:
        if not f.is_failure:
            continue
        by = odd_rule(f.kind)
        if by == "acceptance":
            crash = crash or _or_reference(minority, acceptance_groups(outcomes))
            odd, rule = crash
        elif by == "nan":
            if nan is None:
                groups = nan_groups(outcomes)
                nan = nonfinite or _or_reference(minority, groups)
                nan = nan if nan[0] or nonfinite else (independent_odd(groups) or nan)
            odd, rule = nan
            told = None if nonfinite else standing_odd(ran, f)
            if told and sorted(told[0]) != sorted(odd):  # the differences that stood decide where some were set aside
                odd, rule = told
            if not nonfinite:  # a backend losing a value its dtype holds is odd whatever the count
                odd, rule = nonfinite_off_float64(*float64_sides(_nan_withins(f)), ran, named=odd) or (odd, rule)
        elif by == "pairs":
            failing = failing_pairs(findings)
            pairwise = pairwise or by_float64 or _unless_outvoted(ran, odd_of_pairs(ran, failing))
            odd, rule = pairwise
            sides = sides or float64_sides(_float64_withins(findings))
            if odd and by_float64 is None:  # a majority the blamed layer's exact result contradicts
                odd, rule = odd_off_float64(_pair_of(f), *sides, named=odd) or (odd, rule)
            if not odd:  # the case cannot tell: this pair may still be a backend and its reference
                differing = differing if differing is not None else \
                    {_pair_of(g) for g in findings if isinstance(getattr(g.detail, "pair", None), str)}
                own = float64_sides(_float64_withins(findings, _pair_of(f)))  # its own deviation's first
                odd, rule = odd_by_witness(_pair_of(f), ran, differing, failing) \
                    or odd_off_float64(_pair_of(f), *own) or odd_off_float64(_pair_of(f), *sides) \
                    or odd_by_reference([_pair_of(f)]) or (odd, rule)
        elif by == "equivalence":  # the backends where its rule fails, against those where it holds
            odd, rule = equivalence_odd(f, findings, [o.backend for o in outcomes if o.ok])
        elif by == "reference":  # the float64 reference tells: the backend far worse than the best
            odd, rule = [f.detail.backend], "against the float64 reference"
        elif by == "declared":  # the backends computing the layer unlike the rest, against Keras' declaration
            odd, rule = _unless_outvoted(ran, minority(declared_groups(f)))
        elif by == "version":  # a version pair: the newer release, judged against the older
            newer = f.detail.newer
            odd, rule = ([newer], VERSION_RULE) if newer else ([], UNORDERED)
        else:
            odd, rule = [], f"no rule for {f.kind}"
        f.detail.odd, f.detail.odd_rule = list(odd), rule


def _or_reference(rule: Any, groups: dict[str, Hashable]) -> tuple[list[str], str]:
    """``rule``'s odd backends of ``groups``; where it cannot tell, the compiled or converted
    side of the differing pairs when each is such a backend and its reference
    (:func:`audee.oracle.pairs.odd_by_reference`)."""
    odd, why = _unless_outvoted(list(groups), rule(groups))
    if odd:
        return odd, why
    return odd_by_reference(differing_pairs(groups)) or (odd, why)


def independent_odd(groups: dict[str, Hashable]) -> tuple[list[str], str] | None:
    """Where the backends' groups (backend -> group key) leave no strict majority: the
    independent frameworks decide among themselves (:func:`minority`), and each compiled or
    converted backend whose group differs from its reference's is odd beside them.  A
    conversion runs its reference's program and is judged against it, no vote among the
    frameworks: TensorFlow's float16 einsum overflowing where torch and JAX agree, and
    onnxruntime, running TensorFlow's graph, leaking another NaN through a select lowered to
    arithmetic, are two odd backends, not a tie of two against two (the api-cpu campaign, rng
    2926).  None where no backend is judged against another, or the independent frameworks
    leave no strict majority either."""
    judged = {b: reference_of(b) for b in groups if reference_of(b) in groups}
    independent = {b: key for b, key in groups.items() if b not in judged}
    if not judged or len(independent) < 3:
        return None
    odd, why = minority(independent)
    if not odd:
        return None
    off = sorted(b for b, ref in judged.items() if groups[b] != groups[ref])
    refs = sorted({judged[b] for b in off})
    return sorted({*odd, *off}), f"{why} independent frameworks" + \
        (f"; {', '.join(off)} judged against {', '.join(refs)}" if off else "")


def standing_odd(ran: list[str], f: Finding) -> tuple[list[str], str] | None:
    """A NaN finding's odd backends from the pattern differences that stood, where some pair
    was set aside: a pair the conditioning rule cleared, or whose difference the math forces
    (at the overflow boundary: NaN on one, Inf on the other, where the exact value overflows
    too), is no vote against either backend, nor is a pair whose per-layer diagnosis never
    came back (``lost``: a worker that ended; JAX named odd in a ConvLSTM3D whose other pairs
    were forced, only because its pairs went unjudged: the api-cpu campaign, rng 3027), so
    the pairs left decide as failing pairs do
    (:func:`odd_of_pairs`), or, where they are each a compiled or converted backend and its
    reference, as such a pair does (:func:`audee.oracle.pairs.odd_by_reference`).  TensorFlow
    alone making NaN where torch and JAX give -0, while torch and JAX differ only at two
    forced elements, names TensorFlow.  A whole-pattern majority that only cleared pairs
    built is no verdict either: an exploding ConvLSTM2D whose state overflows on every
    backend, TensorFlow's soft_shrink giving 0 for the NaN where torch, JAX and onnxruntime
    keep it, leaves onnxruntime's difference from TensorFlow, the program it converted (a
    select lowered to arithmetic), standing: onnxruntime is odd, not TensorFlow (the api-cpu
    campaign, rng 2925).  None: no pair was set aside, or none stood, or the pairs left name
    no one."""
    patterns = getattr(f.detail, "patterns", None) or {}
    standing = {frozenset(k.split("|")) for k, p in patterns.items() if stood(p)}
    if not standing or len(standing) == len(patterns):
        return None
    odd, why = _unless_outvoted(ran, odd_of_pairs(ran, standing))
    if not odd:
        odd, why = odd_by_reference(standing) or (odd, why)
    return (odd, f"{why} (pairs cleared or forced left out)") if odd else None


def _unless_outvoted(ran: list[str], decided: tuple[list[str], str]) -> tuple[list[str], str]:
    """The majority's odd backends, unless that majority is only conversions or compilations
    of the odd ones (:func:`audee.oracle.pairs.outvotes_its_reference`) or speaks for too
    few frameworks (:func:`audee.oracle.pairs.one_framework_outvotes`): then it cannot tell."""
    odd, why = decided
    if odd and outvotes_its_reference(ran, odd):  # its conversions agreeing: no majority against it
        return [], f"{why}, each of the rest judged against {', '.join(odd)}: cannot tell"
    if one_framework_outvotes(ran, odd):  # torch and torch@cuda: one Keras backend's code
        return [], f"{why}, the rest too few frameworks: cannot tell"
    return odd, why


def _float64_withins(findings: list[Finding], pair: frozenset[str] | None = None) -> list[dict[str, list[str]]]:
    """The ``float64_within`` of the case's deviations (of ``pair``'s only, when given: a label
    flip is the same pair's difference, one exact result judges both) computed in full
    precision: in float16 or bfloat16 a side nearer the exact result may only be computing in
    a wider dtype than the program says (onnxruntime's float16 nodes in float32), no
    evidence against the other."""
    return [g.detail.float64_within for g in findings
            if g.kind == Kind.DEVIATION and getattr(g.detail, "float64_within", None)
            and not reduced_precision(g.detail.dtype) and (pair is None or _pair_of(g) == pair)]


def _nan_withins(f: Finding) -> list[dict[str, list[str]]]:
    """The ``float64_within`` of a NaN finding's pairs that stood (a pair cleared, forced or
    never diagnosed is no evidence against either side)."""
    patterns = getattr(f.detail, "patterns", None) or {}
    return [p.float64_within for p in patterns.values() if p.float64_within and stood(p)]


def _pair_of(f: Finding) -> frozenset[str]:
    """A pairwise finding's two backends."""
    pair = f.detail.pair
    return frozenset(pair.split("|")) if isinstance(pair, str) else frozenset(f.backends)


def acceptance_groups(outcomes: list[Outcome]) -> dict[str, Hashable]:
    """Each backend's group for crashes and rejections: ``"ran"``, or its failure's
    ``(phase, kind)``."""
    return {o.backend: "ran" if o.ok else (getattr(o.failure, "phase", None), getattr(o.failure, "kind", None))
            for o in outcomes}


def nan_groups(outcomes: list[Outcome]) -> dict[str, Hashable]:
    """Each backend that ran, grouped by its non-finite pattern of the output and the
    logits (shape and per-element class); when every backend has the same, by its list of
    non-finite layers."""
    ok = [o for o in outcomes if o.ok]
    keys = {o.backend: tuple(_pattern_key(getattr(o, k)) for k in ARRAYS) for o in ok}
    if len(set(keys.values())) <= 1:
        keys = {o.backend: tuple(o.nonfinite) for o in ok}
    return keys


def _pattern_key(a: Any) -> Hashable:
    if a is None:
        return None
    codes = nonfinite_codes(np.asarray(a))
    return codes.shape, codes.tobytes()


def minority(groups: dict[str, Hashable]) -> tuple[list[str], str]:
    """The backends outside the strict-majority group of ``groups`` (backend -> group key),
    and the rule that decided."""
    n = len(groups)
    if n < 2:
        return [], "one backend: nothing to compare"
    if n == 2:
        return [], "two backends: cannot tell"
    sizes: dict[Hashable, int] = {}
    for key in groups.values():
        sizes[key] = sizes.get(key, 0) + 1
    if len(sizes) == 1:
        return [], f"all {n} alike"
    top, count = max(sizes.items(), key=lambda kv: kv[1])
    if 2 * count <= n:
        return [], f"no strict majority of {n}"
    return sorted(b for b, key in groups.items() if key != top), f"minority of {n}"


def failing_pairs(findings: list[Finding]) -> set[frozenset[str]]:
    """The backend pairs with a failing pairwise finding (deviation or inconsistency)."""
    return {_pair_of(f) for f in findings if f.kind in PAIRWISE and f.is_failure}


def odd_of_pairs(ran: list[str], failing: set[frozenset[str]]) -> tuple[list[str], str]:
    """The smallest set of backends touching every failing pair, when it is unique and
    leaves a strict majority of ``ran`` whose pairs all agree (module docstring)."""
    n = len(ran)
    if n < 2:
        return [], "one backend: nothing to compare"
    if n == 2:
        return [], "two backends: cannot tell"
    if not failing:
        return [], f"all {n} alike"
    for size in range(1, n):
        if 2 * (n - size) <= n:
            break
        covers = [set(c) for c in combinations(sorted(ran), size) if all(p & set(c) for p in failing)]
        if len(covers) == 1:
            return sorted(covers[0]), f"every failing pair holds it; the other {n - size} of {n} agree"
        if len(covers) > 1:
            return [], f"{len(covers)} ways to explain the failing pairs: cannot tell"
    return [], f"no strict majority of {n} agrees"

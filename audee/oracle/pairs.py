"""The one owner of "which side of a pair is judged against the other": a backend that
compiles or converts another's program (its description's ``reference``,
:func:`audee.backends.info.reference_of`) must compute what that program computes, so in a
pair of the two the reference is right by definition and the other side is the odd one.

Between independent frameworks (``tensorflow``, ``torch``, ``jax``) nothing is anyone's
reference by construction; where the case has a float64 reference (``--reference
float64``: the model widened, or the op called on widened tensors), it decides which side
is wrong (:func:`odd_by_float64`, :func:`nonfinite_by_float64`): two backends sharing one
wrong value are no majority against the third that computes what float64 computes.  Where
it cannot tell (none, disputed, non-finite itself where the backends differ, every backend
off), the majority decides, as before.  The odd-backend marking (:mod:`audee.oracle.odd`),
the float64 culprit (:mod:`audee.oracle.precision`), the root-cause classes and the pair
folding (:mod:`audee.triage.rootcause`) read these functions and no other copy of the rule
(docs/oracles.md, "Pairs and their references").

A **version pair** is one backend in two environments (``torch`` and ``torch@prev``,
:func:`version_pair`): the same program under two releases must give the same result, so
the older release is the reference and the newer side is judged (:func:`version_sides`,
from the versions each worker reported); :mod:`audee.oracle.regression` turns their
differences into ``regression`` findings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import re
from itertools import combinations
from typing import Iterable, Mapping

import numpy as np

from audee.backends.info import reference_of
from audee.backends.registry import split_label

#: the rules' words in a finding's ``odd_rule``
FLOAT64_RULE = "out of tolerance against the float64 reference"
NONFINITE_RULE = "non-finite where the float64 reference is finite"


def judged_against(a: str, b: str) -> str | None:
    """The reference side of the pair ``a``, ``b`` (result labels) where one compiles or
    converts the other's program on the same placement; None between independent backends."""
    if reference_of(a) == b:
        return b
    if reference_of(b) == a:
        return a
    return None


def judged_side(a: str, b: str) -> str | None:
    """The side of the pair ``a``, ``b`` judged against the other (the compiled or converted
    one), or None where neither is the other's reference."""
    ref = judged_against(a, b)
    return None if ref is None else (b if ref == a else a)


#: how :func:`odd_by_reference` names its rule (signatures read it: ``judged_only``)
JUDGED_RULE = "judged against its reference "


def odd_by_reference(pairs: Iterable[Iterable[str]]) -> tuple[list[str], str] | None:
    """The odd backends of differing ``pairs`` when each is a compiled or converted backend
    and its reference: the judged sides, and the rule that decided; None when any differing
    pair is two independent backends (or there is none)."""
    sides, refs = set(), set()
    for pair in pairs:
        members = sorted(pair)
        if len(members) != 2:
            return None
        side = judged_side(*members)
        if side is None:
            return None
        sides.add(side)
        refs.update(m for m in members if m != side)
    if not sides or sides & refs:  # a backend both judged and the judge: no single answer
        return None
    return sorted(sides), JUDGED_RULE + ", ".join(sorted(refs))


#: the rule's words where the reference differs alike from a framework its conversion agrees with
WITNESS_RULE = "its reference {reference} differs alike from {witness}, which {side} agrees with"


def odd_by_witness(pair: Iterable[str], ran: Iterable[str], differing: set[frozenset[str]],
                   failing: set[frozenset[str]]) -> tuple[list[str], str] | None:
    """The reference as the odd side of a differing ``pair`` of a compiled or converted backend
    and its reference, where the judged side agrees with an independent framework (no
    difference at all in ``differing``) that the reference differs from too (``failing``):
    the converted program computes what the framework computes, so the difference is the
    reference's (TensorFlow's bicubic resize reading its weights from a 1024-entry table,
    which tf2onnx's exact Resize and JAX do not share).  None where another independent
    framework agrees with the reference against the judged side (each side has a witness:
    the pair rule decides), where none agrees with the judged side, and where the pair is
    two independent backends: there the pair rule cannot tell, nor can this."""
    members = sorted(str(b) for b in pair)
    if len(members) != 2 or judged_against(*members) is None:
        return None
    ref, side = judged_against(*members), judged_side(*members)
    independent = [x for x in sorted(str(b) for b in ran) if x not in members and judged_against(x, ref) is None
                   and judged_against(x, side) is None and not version_pair(x, ref)]
    witnesses = [x for x in independent if frozenset((side, x)) not in differing and frozenset((ref, x)) in failing]
    # a framework agreeing with the reference against the conversion is a witness the other way
    against = [x for x in independent if frozenset((ref, x)) not in differing and frozenset((side, x)) in failing]
    if not witnesses or against:
        return None
    return [ref], WITNESS_RULE.format(reference=ref, witness=witnesses[0], side=side)


#: the rule's words where the layer recomputed in float64 sides with one side of a pair
LAYER_FLOAT64_RULE = "off the layer recomputed in float64, which {side} is within"


#: the rule's words where the layer recomputed in float64 puts the backend a majority named on it
MAJORITY_OFF_FLOAT64_RULE = "the majority against {named} is off the layer recomputed in float64, which {named} is within"


def float64_sides(withins: Iterable[Mapping[str, list[str]]]) -> tuple[set[str], set[str]]:
    """The backends on the exact result and those off it, by the case's float32 deviations'
    ``float64_within`` (side -> the float64 results of the blamed layer it is within): on,
    within one of them; off, within none."""
    on: set[str] = set()
    off: set[str] = set()
    for within in withins:
        for x, results in within.items():
            (on if results else off).add(str(x))
    return on, off


def odd_off_float64(pair: Iterable[str], on: set[str], off: set[str],
                    named: Iterable[str] | None = None) -> tuple[list[str], str] | None:
    """The odd side of a deviating ``pair`` by float64 evidence (:func:`float64_sides` of the
    pair's own deviation, or of the case's): where one side is on the blamed layer's exact
    result and some backend is off it, the other side.  ``named``: the backends a majority
    named odd; then only a majority naming the side that is on gives way.  A layer computed
    right lands within rounding of its exact result: a conversion that does, beside a
    reference that does not, is not the one off the program (TensorFlow's and torch's oneDNN
    convolution wrong alike, findings row 107, against JAX and onnxruntime, each side with a
    witness, had named onnxruntime by its reference: the api-cpu campaign, rng 2937).  And
    backends sharing a kernel library are wrong alike and outvote the one computing right:
    the same convolution outvoted JAX in a ConvLSTM3D, and where each was wrong its own way
    no majority formed, and a pair of them with JAX had no blamed layer of its own (rng
    2943).  None where no backend is off, or both or neither side is on."""
    members = sorted(str(b) for b in pair)
    right = [x for x in members if x in on and x not in off]
    if len(members) != 2 or not off or len(right) != 1:
        return None
    if named is not None and right[0] not in set(named):
        return None
    side = [x for x in members if x != right[0]]
    rule = MAJORITY_OFF_FLOAT64_RULE.format(named=right[0]) if named is not None else \
        LAYER_FLOAT64_RULE.format(side=right[0])
    return side, rule


#: the rule's words where a NaN finding's layer, recomputed in float64, fits the dtype where
#: some backends are non-finite and others finite
NAN_OFF_FLOAT64_RULE = "non-finite where the layer recomputed in float64 fits, {right} finite there"


def nonfinite_off_float64(on: set[str], off: set[str], ran: Iterable[str],
                          named: Iterable[str] | None = None) -> tuple[list[str], str] | None:
    """A NaN finding's odd backends by float64 evidence (:func:`float64_sides` of its standing
    pairs' ``float64_within``: on, finite at every element where its pair differs and the
    layer recomputed in float64 fits the dtype; off, non-finite at one): the backends only off
    it, where the backends ``named`` by the rules of whole patterns leave an independent
    framework only on it odd, or name none.  A backend that overflows a float16 result its
    dtype holds where an independent framework keeps it is wrong whatever the count: TensorFlow
    and JAX summing an average pool's window in float16 outvote torch, which keeps the mean,
    and onnxruntime, TensorFlow's graph with its float16 nodes in float32 (the api-cpu
    campaign, rngs 2932 and 2953, each filed under onnxruntime's float16 entry).  A backend
    judged against another of ``ran`` (a conversion, :func:`judged_against`) is on no one's
    behalf: finite where its program overflows, it left the program (onnxruntime alone
    finite in a float16 ConvLSTM1D whose state overflows on every framework, rng 2951).
    None where no backend is only off, or no independent one only on, or the named ones are
    all off."""
    ran = set(ran)
    right = {x for x in on - off if reference_of(x) not in ran}
    wrong = off - on
    if not right or not wrong:
        return None
    named = set(named or ())
    if named and not named & right:
        return None
    return sorted(wrong), NAN_OFF_FLOAT64_RULE.format(right=", ".join(sorted(right)))


def outvotes_its_reference(ran: Iterable[str], odd: Iterable[str]) -> bool:
    """Whether a majority of ``ran`` that leaves ``odd`` out is made only of backends
    judged against one of ``odd``: compilations or conversions of one program (two runtimes
    of one converter's graph of ``tensorflow``'s) share their compiler's or converter's faults, and agreeing with each other they are no evidence against the program
    they must keep.  Then the majority does not decide; the pair rule does."""
    odd = {str(b) for b in odd}
    rest = [str(b) for b in ran if str(b) not in odd]
    return bool(odd) and bool(rest) and all(reference_of(b) in odd for b in rest)


def one_framework_outvotes(ran: Iterable[str], odd: Iterable[str]) -> bool:
    """Whether a majority of ``ran`` that leaves ``odd`` out speaks for too few frameworks:
    one backend on two devices or under two releases (``torch`` and ``torch@cuda``) runs one
    Keras backend's code, and a bug of that code is in both, so they are one voice.  The
    majority decides only where the frameworks agreeing are a strict majority of the
    frameworks that ran (``torch``, ``torch@cuda`` against ``jax@cuda``: one against one,
    cannot tell; ``torch@cuda`` against ``torch`` and ``jax``: a device's own difference)."""
    odd = {str(b) for b in odd}
    ran = [str(b) for b in ran]
    rest = {split_label(b)[0] for b in ran if b not in odd}
    return bool(odd) and bool(rest) and 2 * len(rest) <= len({split_label(b)[0] for b in ran})


def differing_pairs(groups: dict[str, object]) -> list[frozenset[str]]:
    """The pairs of backends in different groups (backend -> group key)."""
    return [frozenset((a, b)) for a, b in combinations(sorted(groups), 2) if groups[a] != groups[b]]


def in_contract(odd: Iterable[str], backends: Iterable[str]) -> bool:
    """Whether a difference whose odd backends are ``odd``, among ``backends``, is judged
    against a reference that is itself not odd: each odd backend compiles or converts one of
    the others, which the odd ones are not, or is one side of a version pair whose other side
    is among them (the same backend under another release, :func:`version_pair`).  Then the
    inputs the reference took (NaN, Inf) are in the contract: the compiled or converted
    program, or the newer release, must keep what its reference computes."""
    odd = {str(b) for b in odd}
    involved = {str(b) for b in backends}
    if not odd:
        return False
    for b in odd:
        refs = {reference_of(b)} | {o for o in involved if version_pair(b, o)}
        if not any(r is not None and r in involved and r not in odd for r in refs):
            return False
    return True


# ---- version pairs: one backend under two releases -------------------------------------------
#: the rule's words in a regression finding's ``odd_rule``
VERSION_RULE = "the newer release, judged against the older"
UNORDERED = "the versions do not order the pair"


def version_pair(a: str, b: str) -> bool:
    """Whether result labels ``a`` and ``b`` are one backend on one placement in two
    environments (``torch`` and ``torch@prev``, ``jax@cuda`` and ``jax@next@cuda``)."""
    na, ea, pa = split_label(a)
    nb, eb, pb = split_label(b)
    return na == nb and pa == pb and ea != eb


def release(version: str) -> tuple[int, ...] | None:
    """A version's numeric release (``2.13.0+cpu`` -> ``(2, 13, 0)``), None when it starts
    with no number: enough to order the releases a worker reports; a pre-release or local
    tag of the same release does not order (:func:`version_sides` cannot tell)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def changed_versions(a: str, b: str, versions: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, str]]:
    """The packages both workers report at different versions: package -> (``a``'s, ``b``'s)."""
    va, vb = versions.get(a) or {}, versions.get(b) or {}
    return {k: (str(va[k]), str(vb[k])) for k in va if k in vb and str(va[k]) != str(vb[k])}


def version_sides(a: str, b: str, versions: Mapping[str, Mapping[str, str]]) -> tuple[str, str] | None:
    """(older, newer) of the version pair ``a``, ``b`` by the versions their workers reported
    (``versions``: label -> {package: version}): every package they report differently must
    be newer on one side; None where it cannot tell (no package differs, a release that does
    not order, one package newer on each side, or not a version pair)."""
    if not version_pair(a, b):
        return None
    changed = changed_versions(a, b, versions)
    newer: set[str] = set()
    for va, vb in changed.values():
        ra, rb = release(va), release(vb)
        if ra is None or rb is None or ra == rb:
            return None
        newer.add(b if rb > ra else a)
    if len(newer) != 1:
        return None
    side = newer.pop()
    return (a if side == b else b), side


def version_component(older: str, newer: str, versions: Mapping[str, Mapping[str, str]]) -> str:
    """A version pair as a component, the newer first: ``keras 3.15.1 vs 3.14.1 on torch``
    (every package that differs; the backend by name and placement)."""
    name, _, place = split_label(newer)
    changed = changed_versions(newer, older, versions)
    what = ", ".join(f"{k} {vn} vs {vo}" for k, (vn, vo) in sorted(changed.items())) or "the same versions"
    return f"{what} on {name}" + (f"@{place}" if place else "")


_CHANGE = re.compile(r"(\S+) (\S+) vs (\S+)")


def component_changes(component: str) -> dict[str, tuple[str, str]]:
    """A version pair's component read back (:func:`version_component`'s words): package ->
    (newer, older) version; empty for any other component."""
    what, on, _ = str(component).rpartition(" on ")
    if not on:
        return {}
    out = {}
    for part in what.split(", "):
        m = _CHANGE.fullmatch(part.strip())
        if m is None:
            return {}
        out[m.group(1)] = (m.group(2), m.group(3))
    return out


@dataclass(frozen=True)
class Float64Verdict:
    """What a case's float64 reference says of its backends: each one's error against it
    (``errors``: above 1 is out of tolerance in the backend's own dtype) and the backends
    non-finite where it is finite, at a place where the backends' patterns differ
    (``nonfinite``: :func:`nonfinite_by_float64`; None where it cannot tell)."""

    errors: Mapping[str, float] = field(default_factory=dict)
    nonfinite: tuple[str, ...] | None = None


def odd_by_float64(backends: Iterable[str], errors: Mapping[str, float]) -> tuple[list[str], str] | None:
    """Of ``backends``, those out of tolerance against the float64 reference (``errors``),
    with the rule's words, when some backend of the case stays within it: the reference, not
    the majority, says which side is wrong.  None where it cannot tell: no backend of
    ``backends`` is out, or every backend with an error is (an ill-conditioned case)."""
    out = sorted(str(b) for b in backends if errors.get(b, 0.0) > 1.0)
    within = [b for b, e in errors.items() if e <= 1.0]
    return (out, FLOAT64_RULE) if out and within else None


def nonfinite_by_float64(arrays: Mapping[str, np.ndarray], reference: np.ndarray) -> tuple[str, ...] | None:
    """The backends (``arrays``: each one's tensor, the reference's shape) non-finite at an
    element where their patterns differ and the float64 ``reference`` is finite: there the
    value is defined and representable, so the non-finite side is wrong, however many share
    it.  None where it cannot tell: shapes differ, the patterns do not differ, the reference
    is itself non-finite where they differ (undefined there), or every backend is off."""
    ref = np.asarray(reference)
    masks = {}
    for b, a in arrays.items():
        a = np.asarray(a)
        if a.shape != ref.shape:
            return None
        masks[b] = ~np.isfinite(a.astype(np.float64))
    if len(masks) < 2:
        return None
    stack = np.stack(list(masks.values()))
    differ = stack.any(axis=0) & ~stack.all(axis=0)
    if not differ.any() or not np.isfinite(ref.astype(np.float64))[differ].all():
        return None
    odd = tuple(sorted(b for b, m in masks.items() if (m & differ).any()))
    return odd if 0 < len(odd) < len(masks) else None
